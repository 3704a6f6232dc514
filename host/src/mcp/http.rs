//! `toolgate serve --http ADDR`: MCP over streamable HTTP at `http://ADDR/mcp`.
//!
//! - Binds only loopback addresses unless `allow_remote` is set.
//! - Every request's `Host` header must be one of the allowed authorities (`localhost`,
//!   `127.0.0.1`, `[::1]`, each with the bound port, plus `--allowed-host` names when remote
//!   access is on), and an `Origin` header, when present, must be `http://` one of them: a web
//!   page that rebinds its DNS name to 127.0.0.1 sends its own name and is refused with 403
//!   before anything else runs.
//! - Each MCP session (`Mcp-Session-Id`) is one [`super::McpConnection`], so one toolgate
//!   session.

use super::McpConnection;
use crate::gate::Gate;
use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// How to serve over HTTP.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// Allow a non-loopback bind address.
    pub allow_remote: bool,
    /// Extra host names accepted in `Host`/`Origin` (with or without a port).
    pub allowed_hosts: Vec<String>,
}

/// The `Host` and `Origin` values a request may carry.
#[derive(Clone, Debug)]
pub struct Allowlist {
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl Allowlist {
    /// Loopback names with `port`, plus `extra` names (`name` or `name:port`).
    pub fn new(port: u16, extra: &[String]) -> Self {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|h| format!("{h}:{port}"))
            .collect();
        for name in extra {
            let name = name.trim().to_ascii_lowercase();
            if name.is_empty() {
                continue;
            }
            let has_port = name.rsplit_once(':').is_some_and(|(h, p)| {
                !h.is_empty() && !h.ends_with(':') && p.parse::<u16>().is_ok()
            }) && !(name.starts_with('[') && name.ends_with(']'));
            hosts.push(if has_port {
                name
            } else {
                format!("{name}:{port}")
            });
        }
        hosts.sort();
        hosts.dedup();
        let origins = hosts
            .iter()
            .flat_map(|h| [format!("http://{h}"), format!("https://{h}")])
            .collect();
        Allowlist { hosts, origins }
    }

    /// The accepted `Host` values.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// Whether a request with these `Host` and `Origin` headers may pass.
    pub fn allows(&self, host: Option<&str>, origin: Option<&str>) -> bool {
        let Some(host) = host else { return false };
        let host = host.trim().to_ascii_lowercase();
        if !self.hosts.contains(&host) {
            return false;
        }
        match origin {
            None => true,
            Some(o) => {
                let o = o.trim().trim_end_matches('/').to_ascii_lowercase();
                self.origins.contains(&o)
            }
        }
    }
}

/// Serve until the listener fails. `ready` is called with the bound address once it accepts
/// connections.
pub async fn serve_http(
    gate: Arc<Gate>,
    options: HttpOptions,
    ready: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    if !options.addr.ip().is_loopback() && !options.allow_remote {
        bail!(
            "refusing to listen on {}: it is not a loopback address, and anyone who can reach it could run tools in this workspace; use 127.0.0.1, or pass --allow-remote (with --allowed-host NAME for the names clients use)",
            options.addr
        );
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let local = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let mut extra = options.allowed_hosts.clone();
    if options.allow_remote && !local.ip().is_unspecified() && !local.ip().is_loopback() {
        extra.push(local.to_string());
    }
    let allowlist = Arc::new(Allowlist::new(local.port(), &extra));

    // The Host/Origin check above runs first and is the one relied on; rmcp's own check is
    // turned off so the two cannot disagree about spelling (e.g. `[::1]`).
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_legacy_session_mode(true);
    let service = StreamableHttpService::new(
        move || Ok(McpConnection::new(gate.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    ready(local);

    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                continue;
            }
        };
        let service = service.clone();
        let allowlist = allowlist.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
                let mut service = service.clone();
                let allowlist = allowlist.clone();
                async move {
                    if let Some(refusal) = refuse(&req, &allowlist) {
                        return Ok::<_, Infallible>(refusal);
                    }
                    use tower_service::Service as _;
                    service.call(req).await
                }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler)
                .await
            {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        });
    }
}

/// The response that refuses `req`, if it must be refused.
fn refuse(
    req: &Request<Incoming>,
    allowlist: &Allowlist,
) -> Option<Response<BoxBody<Bytes, Infallible>>> {
    let header = |name| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or("\u{fffd}"))
    };
    if !allowlist.allows(header(hyper::header::HOST), header(hyper::header::ORIGIN)) {
        tracing::warn!(
            host = ?header(hyper::header::HOST),
            origin = ?header(hyper::header::ORIGIN),
            "refused a request with a foreign Host or Origin header (DNS rebinding?)"
        );
        return Some(text_response(
            StatusCode::FORBIDDEN,
            "Forbidden: the Host or Origin header is not allowed\n",
        ));
    }
    if req.uri().path() != MCP_PATH {
        return Some(text_response(
            StatusCode::NOT_FOUND,
            "Not found: the MCP endpoint is /mcp\n",
        ));
    }
    None
}

fn text_response(status: StatusCode, text: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_with_the_port_pass() {
        let a = Allowlist::new(8080, &[]);
        assert!(a.allows(Some("localhost:8080"), None));
        assert!(a.allows(Some("127.0.0.1:8080"), Some("http://127.0.0.1:8080")));
        assert!(a.allows(Some("[::1]:8080"), Some("http://localhost:8080/")));
        assert!(a.allows(Some("LOCALHOST:8080"), None));
    }

    #[test]
    fn foreign_hosts_ports_and_origins_are_refused() {
        let a = Allowlist::new(8080, &[]);
        assert!(!a.allows(None, None));
        assert!(!a.allows(Some("evil.example:8080"), None));
        assert!(!a.allows(Some("localhost:9090"), None));
        assert!(!a.allows(Some("localhost"), None));
        assert!(!a.allows(Some("127.0.0.1:8080"), Some("http://evil.example")));
        assert!(!a.allows(Some("127.0.0.1:8080"), Some("null")));
    }

    #[test]
    fn extra_names_get_the_port() {
        let a = Allowlist::new(8080, &["box.lan".into(), "10.0.0.2:9000".into()]);
        assert!(a.allows(Some("box.lan:8080"), Some("https://box.lan:8080")));
        assert!(a.allows(Some("10.0.0.2:9000"), None));
        assert!(!a.allows(Some("box.lan:9000"), None));
    }
}
