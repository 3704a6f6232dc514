//! `toolgate serve --http ADDR`: MCP over streamable HTTP at `http://ADDR/mcp`.
//!
//! - Binds only loopback addresses unless `allow_remote` is set.
//! - Every request's `Host` header must be one of the allowed authorities (`localhost`,
//!   `127.0.0.1`, `[::1]`, each with the bound port, plus `--allowed-host` names when remote
//!   access is on), and an `Origin` header, when present, must be `http://` one of them: a web
//!   page that rebinds its DNS name to 127.0.0.1 sends its own name and is refused with 403
//!   before anything else runs.
//! - Every request must carry `Authorization: Bearer <token>` with a token from the token file
//!   ([`HttpOptions::token_file`]; by default `$XDG_STATE_HOME/toolgate/http-token`, 32 random
//!   bytes in hex, created on first use with mode 0600). A file may hold several tokens, one a
//!   line; each client can get its own. Anything else is answered 401 before MCP sees it; the
//!   comparison takes the same time whatever the presented token is.
//! - Each MCP session (`Mcp-Session-Id`) is one [`super::McpConnection`], so one toolgate
//!   session. The id a client sees is 128 random bits from the OS, bound to the token (the
//!   line of the token file) that created it: the same id with another token is answered 404,
//!   exactly as an unknown id, so a token holder learns nothing about other tokens' sessions.
//! - A client has [`HttpOptions::header_timeout`] (10 s) to send a request's headers, then the
//!   connection is closed; at most [`HttpOptions::max_connections`] (64) are open at once, and a
//!   connection over that is answered 503 with `Retry-After` and closed (it does not queue: a
//!   local process holding connections open cannot make the server wait for it).
//! - At most [`HttpOptions::max_sessions`] (256) sessions live at once; an `initialize` over
//!   that is answered 503 (none is evicted). A session idle for [`HttpOptions::session_idle`]
//!   (30 min) with no request in flight is closed, and its id then gets 404.
//! - A POST that is not `application/json` is 415, a body that is not JSON 400 (`-32700`), a
//!   batch 400 (`-32600`): each with a JSON-RPC error body.
//! - Every connection is its own task, and every MCP request its own task inside rmcp, so one
//!   session's slow call (a command, a hook, an approval) does not hold up another session.
//! - A 2026-07-28 request (its `_meta` names the version and the client's capabilities) needs
//!   no session: rmcp serves it statelessly, answered as plain JSON. Its toolgate session is
//!   its conversation, [`conversation_session`] of the token and the optional
//!   `Toolgate-Conversation` header, passed to the handler in an internal header that is
//!   stripped from every client request first. Any process serving the workspace may answer
//!   it (approval states verify on every process given the same
//!   [`super::mrtr::STATE_KEY_FILE_ENV`] key file).
//! - A session ended with `DELETE` is answered 204 No Content.

use super::token::os_random;
pub use super::token::{default_token_file, Tokens, TOKEN_FILE_NAME};
use super::McpConnection;
use crate::gate::Gate;
use crate::userdirs::UserDirs;
use anyhow::{bail, Context};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// How long a client may take to send a request's headers by default: a client that trickles
/// them (slowloris) would otherwise hold a connection, and a connection slot, forever.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Most connections open at once by default: each costs a task and buffers, and the server is
/// for a few local clients, not a crowd.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// Most live sessions by default: each costs a task, channels and a toolgate session (tens of
/// KiB), and the server is for a few local clients.
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// How long a session may sit unused by default before it is closed.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// Connections over the cap that still get a 503 answer (beyond these they are closed at once),
/// so a flood of connections costs a bounded number of tasks.
const OVERFLOW_RESPONDERS: usize = 16;

/// The header carrying the MCP session id.
const SESSION_HEADER: &str = "mcp-session-id";

/// The header a 2026-07-28 client may send to name its conversation (any visible ASCII, at
/// most [`MAX_CONVERSATION_CHARS`]); without it, all its stateless requests with one token are
/// one conversation.
pub const CONVERSATION_HEADER: &str = "toolgate-conversation";

/// The longest conversation name accepted.
pub const MAX_CONVERSATION_CHARS: usize = 256;

/// The header the server itself puts on a stateless request for the MCP handler: the
/// toolgate session of its conversation. Removed from every client request first.
pub(super) const INTERNAL_CONVERSATION_HEADER: &str = "x-toolgate-internal-conversation";

/// How to serve over HTTP.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// Allow a non-loopback bind address.
    pub allow_remote: bool,
    /// Extra host names accepted in `Host`/`Origin` (with or without a port).
    pub allowed_hosts: Vec<String>,
    /// The bearer-token file: one token a line (blank lines and `# comments` skipped), mode
    /// 0600. Created with one fresh token if it does not exist. `None`: [`default_token_file`].
    pub token_file: Option<PathBuf>,
    /// How long a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// Most connections open at once; more are answered 503.
    pub max_connections: usize,
    /// Most live MCP sessions at once; an `initialize` over that is answered 503 (no session
    /// is evicted for it). Policy key to wire: `[http] max_sessions`.
    pub max_sessions: usize,
    /// A session with no request for this long (and none in flight) is closed; its id then
    /// gets 404. Policy key to wire: `[http] session_idle_secs`.
    pub session_idle: Duration,
}

impl HttpOptions {
    /// Options for `addr` with the defaults: loopback only, the default token file, 10 s for
    /// headers, 64 connections.
    pub fn new(addr: SocketAddr) -> Self {
        HttpOptions {
            addr,
            allow_remote: false,
            allowed_hosts: Vec::new(),
            token_file: None,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: DEFAULT_SESSION_IDLE,
        }
    }
}

/// What [`serve_http`] tells its caller once it accepts connections.
#[derive(Clone, Debug)]
pub struct Listening {
    /// The bound address.
    pub addr: SocketAddr,
    /// The token file in use.
    pub token_file: PathBuf,
    /// Whether the token file was created just now.
    pub created: bool,
    /// How many tokens it holds.
    pub tokens: usize,
    /// The console's address, with the file's first token in its fragment (`/#token=…`):
    /// for the person who started the server, never for a log.
    pub console: String,
}

/// The session ids clients see, each bound to the token that created it, and the id rmcp
/// knows the session by; when each was last used, and how many requests it has in flight.
#[derive(Default)]
struct Sessions {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    by_outer: HashMap<String, Bound>,
    /// `initialize` requests admitted under the cap and not answered yet.
    reserved: usize,
}

struct Bound {
    inner: String,
    token: usize,
    last_used: Instant,
    busy: usize,
}

/// A request in flight on a session: the session does not expire until it is dropped (with
/// the response body, so a long streamed call keeps its session).
struct InFlight {
    sessions: Arc<Sessions>,
    outer: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(b) = self.sessions.lock().by_outer.get_mut(&self.outer) {
            b.busy = b.busy.saturating_sub(1);
            b.last_used = Instant::now();
        }
    }
}

/// An admitted `initialize`; its place under the cap is given back when dropped.
struct Reservation(Arc<Sessions>);

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut t = self.0.lock();
        t.reserved = t.reserved.saturating_sub(1);
    }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// rmcp's id for `outer`, if it exists, belongs to `token` and has not been idle for
    /// `idle`, with the request marked in flight. An expired session is removed, and its rmcp
    /// id returned in the error for closing.
    fn use_session(
        self: &Arc<Self>,
        outer: &str,
        token: usize,
        idle: Duration,
    ) -> Result<(String, InFlight), Option<String>> {
        let mut t = self.lock();
        let Some(b) = t.by_outer.get_mut(outer) else {
            return Err(None);
        };
        if b.token != token {
            return Err(None);
        }
        if b.busy == 0 && b.last_used.elapsed() >= idle {
            let inner = t.by_outer.remove(outer).map(|b| b.inner);
            return Err(inner);
        }
        b.busy += 1;
        b.last_used = Instant::now();
        let inner = b.inner.clone();
        Ok((
            inner,
            InFlight {
                sessions: self.clone(),
                outer: outer.to_string(),
            },
        ))
    }

    /// A place for one more session, if there are fewer than `max` (counting those being
    /// made).
    fn reserve(self: &Arc<Self>, max: usize) -> Option<Reservation> {
        let mut t = self.lock();
        if t.by_outer.len() + t.reserved >= max {
            return None;
        }
        t.reserved += 1;
        Some(Reservation(self.clone()))
    }

    /// The id clients see for rmcp's `inner`, made (and bound to `token`) if new.
    fn outer_for(&self, inner: &str, token: usize) -> std::io::Result<String> {
        let mut t = self.lock();
        if let Some((outer, _)) = t.by_outer.iter().find(|(_, b)| b.inner == inner) {
            return Ok(outer.clone());
        }
        let outer = hex::encode(os_random::<16>()?);
        t.by_outer.insert(
            outer.clone(),
            Bound {
                inner: inner.to_string(),
                token,
                last_used: Instant::now(),
                busy: 0,
            },
        );
        Ok(outer)
    }

    fn remove(&self, outer: &str) {
        self.lock().by_outer.remove(outer);
    }

    /// Remove the sessions idle for `idle` with nothing in flight; their rmcp ids.
    fn take_expired(&self, idle: Duration) -> Vec<String> {
        let mut t = self.lock();
        let expired: Vec<String> = t
            .by_outer
            .iter()
            .filter(|(_, b)| b.busy == 0 && b.last_used.elapsed() >= idle)
            .map(|(o, _)| o.clone())
            .collect();
        expired
            .iter()
            .filter_map(|o| t.by_outer.remove(o).map(|b| b.inner))
            .collect()
    }

    /// Forget ids whose rmcp session has ended.
    async fn prune(&self, manager: &LocalSessionManager) {
        let known: Vec<(String, String)> = self
            .lock()
            .by_outer
            .iter()
            .map(|(o, b)| (o.clone(), b.inner.clone()))
            .collect();
        for (outer, inner) in known {
            if !manager.has_session(&inner.into()).await.unwrap_or(true) {
                self.remove(&outer);
            }
        }
    }
}

/// Close rmcp's sessions `inner` (their workers end, and with them the toolgate sessions).
async fn close_sessions(manager: &LocalSessionManager, inner: Vec<String>) {
    for id in inner {
        tracing::info!("closing an idle MCP session");
        if let Err(e) = manager.close_session(&id.into()).await {
            tracing::debug!(error = %e, "closing an idle session failed");
        }
    }
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

/// Serve until the listener fails. `ready` is called once it accepts connections, with the
/// bound address and the token file in use.
pub async fn serve_http(
    gate: Arc<Gate>,
    options: HttpOptions,
    ready: impl FnOnce(&Listening),
) -> anyhow::Result<()> {
    if !options.addr.ip().is_loopback() && !options.allow_remote {
        bail!(
            "refusing to listen on {}: it is not a loopback address, and anyone who can reach it could run tools in this workspace; use 127.0.0.1, or pass --allow-remote (with --allowed-host NAME for the names clients use)",
            options.addr
        );
    }
    let (token_file, private_dir) = match &options.token_file {
        Some(f) => (f.clone(), false),
        None => (default_token_file(&UserDirs::from_env()), true),
    };
    let (tokens, created) = Tokens::load_or_create(&token_file, private_dir)?;
    let tokens = Arc::new(tokens);
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
        .with_legacy_session_mode(true)
        // A stateless (2026-07-28) answer with nothing before it is plain JSON, not a stream.
        .with_json_response(true);
    let state_key = super::mrtr::StateKey::process()?;
    // Sessions expire by our idle rule (which spares a session with a call in flight), not by
    // rmcp's keep-alive, which would end a session whose call runs long without messages.
    let mut manager = LocalSessionManager::default();
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let console = Arc::new(crate::console::Console::new(gate.clone()));
    let service = StreamableHttpService::new(
        move || {
            Ok(McpConnection::with_state_key(
                gate.clone(),
                state_key.clone(),
            ))
        },
        manager.clone(),
        config,
    );
    let sessions = Arc::new(Sessions::default());
    let limits = SessionLimits {
        max: options.max_sessions.max(1),
        idle: options.session_idle,
    };
    {
        let (sessions, manager) = (sessions.clone(), manager.clone());
        let every = (limits.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(60));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                close_sessions(&manager, sessions.take_expired(limits.idle)).await;
            }
        });
    }
    let connections = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let overflow = Arc::new(Semaphore::new(OVERFLOW_RESPONDERS));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout);
    ready(&Listening {
        addr: local,
        console: format!("http://{local}/#token={}", tokens.first()),
        token_file,
        created,
        tokens: tokens.len(),
    });

    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                // Out of file descriptors, most likely: give the open connections a moment.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Answers are written in pieces (an SSE stream's events): without this, Nagle's
        // algorithm holds each piece for the client's delayed ACK, ~40 ms a request (measured
        // on a keep-alive 2025-11-25 session).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "setting TCP_NODELAY failed");
        }
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            let Ok(permit) = overflow.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "too many connections; closed one unanswered");
                continue;
            };
            tracing::warn!(%peer, max = options.max_connections, "too many connections; answering 503");
            let mut builder = builder.clone();
            builder.keep_alive(false);
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(|_req: Request<Incoming>| async {
                    Ok::<_, Infallible>(busy_response())
                });
                let _ = builder
                    .serve_connection(TokioIo::new(stream), handler)
                    .await;
                drop(permit);
            });
            continue;
        };
        let service = service.clone();
        let console = console.clone();
        let allowlist = allowlist.clone();
        let tokens = tokens.clone();
        let sessions = sessions.clone();
        let manager = manager.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
                let service = service.clone();
                let console = console.clone();
                let allowlist = allowlist.clone();
                let tokens = tokens.clone();
                let sessions = sessions.clone();
                let manager = manager.clone();
                async move {
                    Ok::<_, Infallible>(
                        handle(
                            req, service, &console, &allowlist, &tokens, &sessions, &manager,
                            limits,
                        )
                        .await,
                    )
                }
            });
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), handler)
                .await
            {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
            drop(permit);
        });
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// The session cap and idle expiry.
#[derive(Clone, Copy)]
struct SessionLimits {
    max: usize,
    idle: Duration,
}

/// The largest request body read (rmcp's own limit).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// One request: the checks, then the console's page or API, or rmcp with the session id
/// translated.
#[allow(clippy::too_many_arguments)]
async fn handle(
    req: Request<Incoming>,
    mut service: StreamableHttpService<McpConnection, LocalSessionManager>,
    console: &crate::console::Console,
    allowlist: &Allowlist,
    tokens: &Tokens,
    sessions: &Arc<Sessions>,
    manager: &LocalSessionManager,
    limits: SessionLimits,
) -> Response<Body> {
    if let Some(refusal) = refuse(&req, allowlist) {
        return refusal;
    }
    if let Some(page) = crate::console::page(&req) {
        return page;
    }
    let token = match authorize(&req, tokens) {
        Ok(t) => t,
        Err(message) => return unauthorized(message),
    };
    if crate::console::is_api(req.uri().path()) {
        return console.api(req).await;
    }
    if req.uri().path() != MCP_PATH {
        return text_response(
            StatusCode::NOT_FOUND,
            "Not found: the MCP endpoint is /mcp, the console is at /\n",
        );
    }
    let posting = req.method() == hyper::Method::POST;
    if posting && !is_json(&req) {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            -32600,
            "Unsupported Media Type: send the JSON-RPC message with `Content-Type: application/json`",
        );
    }
    let (parts, body) = req.into_parts();
    let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                "Invalid Request: the body is over 4 MiB, the most a message may be",
            )
        }
        Err(_) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                "Parse error: the request body could not be read",
            )
        }
    };
    let mut initialize = false;
    if posting {
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Err(e) => {
                return rpc_error(StatusCode::BAD_REQUEST, -32700, &format!("Parse error: {e}"))
            }
            Ok(serde_json::Value::Array(_)) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    "Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching); send one message a request",
                )
            }
            Ok(v) => initialize = v.get("method").and_then(|m| m.as_str()) == Some("initialize"),
        }
    }
    let mut req = Request::from_parts(parts, Full::new(body));
    // Only the server says which conversation a request is in.
    req.headers_mut().remove(INTERNAL_CONVERSATION_HEADER);
    let mut in_flight = None;
    let mut reservation = None;
    let outer = match req.headers().get(SESSION_HEADER) {
        None => {
            if initialize {
                sessions.prune(manager).await;
                close_sessions(manager, sessions.take_expired(limits.idle)).await;
                reservation = sessions.reserve(limits.max);
                if reservation.is_none() {
                    tracing::warn!(
                        max = limits.max,
                        "too many MCP sessions; refused an initialize"
                    );
                    return rpc_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        -32000,
                        &format!("Service unavailable: too many sessions ({}) are open on this toolgate server; end one (HTTP DELETE) or wait for an idle one to expire", limits.max),
                    );
                }
            }
            // A stateless (2026-07-28) request: its conversation is the token's, named by
            // the client within it; the handler uses it only for such requests.
            let named = match req.headers().get(CONVERSATION_HEADER).map(|v| v.to_str()) {
                None => "",
                Some(Ok(n)) if n.len() <= MAX_CONVERSATION_CHARS => n,
                Some(_) => {
                    return rpc_error(
                        StatusCode::BAD_REQUEST,
                        -32600,
                        &format!("Invalid Request: the `Toolgate-Conversation` header must be at most {MAX_CONVERSATION_CHARS} visible ASCII characters"),
                    )
                }
            };
            let Some(digest) = tokens.digest(token) else {
                return text_response(StatusCode::INTERNAL_SERVER_ERROR, "bad token\n");
            };
            let session = conversation_session(digest, named);
            if let Ok(v) = hyper::header::HeaderValue::from_str(&session) {
                req.headers_mut().insert(INTERNAL_CONVERSATION_HEADER, v);
            }
            None
        }
        Some(v) => {
            let used = match v.to_str() {
                Ok(outer) => sessions
                    .use_session(outer, token, limits.idle)
                    .map(|(inner, guard)| (outer.to_string(), inner, guard)),
                Err(_) => Err(None),
            };
            let (outer, inner, guard) = match used {
                Ok(u) => u,
                Err(expired) => {
                    if let Some(inner) = expired {
                        close_sessions(manager, vec![inner]).await;
                    }
                    // Unknown, ended, expired, or another token's: the same answer for all.
                    return rpc_error(
                        StatusCode::NOT_FOUND,
                        -32001,
                        "Session not found: start a new session with an initialize request",
                    );
                }
            };
            in_flight = Some(guard);
            match hyper::header::HeaderValue::from_str(&inner) {
                Ok(v) => {
                    req.headers_mut().insert(SESSION_HEADER, v);
                }
                Err(_) => return text_response(StatusCode::INTERNAL_SERVER_ERROR, "bad session\n"),
            }
            Some(outer)
        }
    };
    let deleting = req.method() == hyper::Method::DELETE;
    use tower_service::Service as _;
    let Ok(mut response) = service.call(req).await;
    let created = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(inner) = created {
        if outer.is_none() {
            sessions.prune(manager).await;
        }
        let shown = sessions
            .outer_for(&inner, token)
            .ok()
            .and_then(|o| hyper::header::HeaderValue::from_str(&o).ok());
        match shown {
            Some(v) => {
                response.headers_mut().insert(SESSION_HEADER, v);
            }
            None => {
                return text_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot make a session id: the OS random source failed\n",
                )
            }
        }
    }
    drop(reservation);
    if let (true, Some(outer)) = (deleting && response.status().is_success(), outer) {
        drop(in_flight.take());
        sessions.remove(&outer);
        // Ended: 204 No Content (rmcp says 202, which SDK clients report as a failure).
        let mut ended = Response::new(Full::new(Bytes::new()).boxed());
        *ended.status_mut() = StatusCode::NO_CONTENT;
        return ended;
    }
    match in_flight {
        // The session stays in use until the (maybe streamed) answer is done.
        Some(guard) => response.map(|body| {
            body.map_frame(move |frame| {
                let _in_flight = &guard;
                frame
            })
            .boxed()
        }),
        None => response,
    }
}

/// The toolgate session of the conversation `named` by the holder of the token with
/// `digest`: the same name with another token is another conversation, and the session name
/// reveals neither.
pub fn conversation_session(digest: &[u8; 32], named: &str) -> String {
    let h = Sha256::new()
        .chain_update(b"toolgate conversation v1\0")
        .chain_update(digest)
        .chain_update(b"\0")
        .chain_update(named.as_bytes())
        .finalize();
    format!("conv-{}", &hex::encode(h)[..32])
}

/// Whether the request says its body is JSON.
fn is_json(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

/// Which token the request carries, or why it is refused.
fn authorize(req: &Request<Incoming>, tokens: &Tokens) -> Result<usize, &'static str> {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let presented = header.and_then(|h| {
        let (scheme, rest) = h.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    });
    let message = match presented.map(|t| tokens.identify(t)) {
        Some(Some(token)) => return Ok(token),
        Some(None) => "Unauthorized: the bearer token is wrong; send `Authorization: Bearer <token>` with a token from the file `toolgate serve --http` printed at start (by default $XDG_STATE_HOME/toolgate/http-token)",
        None => "Unauthorized: send the header `Authorization: Bearer <token>`, with the token from the file `toolgate serve --http` printed at start (by default $XDG_STATE_HOME/toolgate/http-token)",
    };
    tracing::warn!(
        bad_token = presented.is_some(),
        "refused a request without a valid bearer token"
    );
    Err(message)
}

/// The 401 that refuses a request without a valid token.
fn unauthorized(message: &str) -> Response<Body> {
    let mut response = rpc_error(StatusCode::UNAUTHORIZED, -32001, message);
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer realm=\"toolgate\""),
    );
    response
}

/// The response that refuses `req` for its `Host` or `Origin`, if it must be refused.
fn refuse(req: &Request<Incoming>, allowlist: &Allowlist) -> Option<Response<Body>> {
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
    None
}

/// A JSON-RPC error object (id null) as the body of an HTTP error, so MCP clients show its
/// message.
fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

fn busy_response() -> Response<Body> {
    let mut response = rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        "Service unavailable: too many open connections to this toolgate server; retry shortly",
    );
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}

fn text_response(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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
