//! A small registry client: HTTP/1.1 with hyper, TLS with rustls and the webpki roots (as the
//! rest of the host), plain HTTP only to loopback, the bearer-token and basic flows, capped
//! bodies.

use super::auth::{self, Challenge, Credentials};
use super::reference::{host_of, is_loopback, Reference};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Uri};
use http_body_util::BodyExt;
use std::path::Path;
use std::time::Duration;

/// Bound on connecting and on each request's answer head.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one whole request, body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// Redirects followed for one request (blob downloads are often redirected to storage).
const MAX_REDIRECTS: usize = 5;

/// One answer.
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body (at most the cap asked for).
    pub body: Bytes,
}

impl Response {
    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A client for one repository of one registry.
pub struct Client {
    base: String,
    reference: Reference,
    actions: &'static str,
    lookup: auth::Lookup,
    authorization: Option<String>,
}

impl Client {
    /// A client for `reference`'s repository, for `actions` (`pull` or `pull,push`), with the
    /// user's credentials for its registry (never from `workspace`).
    pub fn new(reference: &Reference, actions: &'static str, workspace: &Path) -> Client {
        Client {
            base: reference.base_url(),
            reference: reference.clone(),
            actions,
            lookup: auth::lookup(&reference.registry, workspace),
            authorization: None,
        }
    }

    /// `/v2/REPO/…` on this registry.
    pub fn url(&self, tail: &str) -> String {
        format!("{}/v2/{}/{tail}", self.base, self.reference.repository)
    }

    /// Send a request, answering the registry's challenge once (token or basic), following
    /// redirects for GET and HEAD. The body is read up to `cap` bytes; more is an error.
    pub async fn send(
        &mut self,
        method: Method,
        url: &str,
        headers: &[(&str, String)],
        body: Bytes,
        cap: u64,
    ) -> Result<Response, String> {
        let first = self
            .attempt(&method, url, headers, body.clone(), cap)
            .await?;
        if first.status != 401 {
            return Ok(first);
        }
        let challenge = first
            .header("www-authenticate")
            .and_then(auth::parse_challenge);
        let registry = self.reference.registry.clone();
        match challenge {
            Some(Challenge::Basic) => {
                let c = self.credentials()?;
                self.authorization = Some(c.basic());
            }
            Some(Challenge::Bearer {
                realm,
                service,
                scope,
            }) => {
                let token = self.token(&realm, service.as_deref(), scope.as_deref()).await?;
                self.authorization = Some(format!("Bearer {token}"));
            }
            None => {
                return Err(format!(
                    "{registry} answered 401 without a challenge toolgate understands (WWW-Authenticate: {})",
                    first.header("www-authenticate").unwrap_or("none")
                ))
            }
        }
        let again = self.attempt(&method, url, headers, body, cap).await?;
        if again.status == 401 || again.status == 403 {
            let from = self
                .lookup
                .credentials
                .as_ref()
                .map_or("no credentials".to_string(), |c| {
                    format!("the credentials of `{}` from {}", c.user, c.from.display())
                });
            return Err(format!(
                "{registry} refused {from} for {} ({}); log in again with `docker login {registry}` (or `podman login`), or check your access to the repository",
                self.reference.repository, again.status
            ));
        }
        Ok(again)
    }

    fn credentials(&self) -> Result<Credentials, String> {
        self.lookup.credentials.clone().ok_or_else(|| {
            let mut msg = format!(
                "{} asks for credentials and toolgate found none for it; log in with `docker login {}` or `podman login {}` (toolgate reads $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, ~/.config/containers/auth.json, $DOCKER_CONFIG/config.json or ~/.docker/config.json, never the workspace)",
                self.reference.registry, self.reference.registry, self.reference.registry
            );
            for n in &self.lookup.notes {
                msg.push_str("; ");
                msg.push_str(n);
            }
            msg
        })
    }

    /// The bearer token flow: GET realm?service=…&scope=…, with the basic credentials if the
    /// user has some (anonymous otherwise).
    async fn token(
        &self,
        realm: &str,
        service: Option<&str>,
        scope: Option<&str>,
    ) -> Result<String, String> {
        let uri: Uri = realm.parse().map_err(|_| {
            format!(
                "{} sent a token realm that is not a URL: {realm}",
                self.reference.registry
            )
        })?;
        check_scheme(&uri)?;
        let mut q = Vec::new();
        if let Some(s) = service {
            q.push(format!("service={}", encode(s)));
        }
        let scope = scope.map(str::to_string).unwrap_or_else(|| {
            format!("repository:{}:{}", self.reference.repository, self.actions)
        });
        q.push(format!("scope={}", encode(&scope)));
        if !scope.contains(self.actions) {
            q.push(format!(
                "scope={}",
                encode(&format!(
                    "repository:{}:{}",
                    self.reference.repository, self.actions
                ))
            ));
        }
        let sep = if realm.contains('?') { '&' } else { '?' };
        let url = format!("{realm}{sep}{}", q.join("&"));
        let mut headers = Vec::new();
        if let Some(c) = &self.lookup.credentials {
            headers.push(("authorization", c.basic()));
        }
        let r = request(&Method::GET, &url, &headers, Bytes::new(), 1 << 20, None).await?;
        if r.status != 200 {
            return Err(format!(
                "the token service {realm} answered {} for {}; {}",
                r.status,
                self.reference.repository,
                if self.lookup.credentials.is_some() {
                    "check your login (`docker login`)"
                } else {
                    "log in with `docker login` first"
                }
            ));
        }
        let v: serde_json::Value = serde_json::from_slice(&r.body)
            .map_err(|_| format!("the token service {realm} did not answer JSON"))?;
        v["token"]
            .as_str()
            .or_else(|| v["access_token"].as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("the token service {realm} sent no token"))
    }

    async fn attempt(
        &self,
        method: &Method,
        url: &str,
        headers: &[(&str, String)],
        body: Bytes,
        cap: u64,
    ) -> Result<Response, String> {
        let mut url = url.to_string();
        let origin = authority_of(&url);
        for _ in 0..=MAX_REDIRECTS {
            let mut h: Vec<(&str, String)> = headers.to_vec();
            // Credentials go to the registry only, never to where it redirects.
            if let Some(a) = &self.authorization {
                if authority_of(&url) == origin {
                    h.push(("authorization", a.clone()));
                }
            }
            let r = request(
                method,
                &url,
                &h,
                body.clone(),
                cap,
                Some(&self.reference.registry),
            )
            .await?;
            let redirect = matches!(r.status, 301 | 302 | 303 | 307 | 308)
                && matches!(*method, Method::GET | Method::HEAD);
            if !redirect {
                return Ok(r);
            }
            let to = r
                .header("location")
                .ok_or_else(|| format!("{url} redirected without a Location"))?;
            url = resolve(&url, to);
        }
        Err(format!("{url}: more than {MAX_REDIRECTS} redirects"))
    }

    /// Resolve a `Location` the registry sent (uploads answer with one) against its base.
    pub fn resolve(&self, location: &str) -> String {
        resolve(&self.base, location)
    }
}

fn authority_of(url: &str) -> String {
    url.parse::<Uri>()
        .ok()
        .and_then(|u| u.authority().map(|a| a.as_str().to_ascii_lowercase()))
        .unwrap_or_default()
}

/// `location` against `base` (absolute URLs stay as they are; `/path` keeps scheme and host).
fn resolve(base: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_string();
    }
    let Ok(u) = base.parse::<Uri>() else {
        return location.to_string();
    };
    let scheme = u.scheme_str().unwrap_or("https");
    let auth = u.authority().map_or("", |a| a.as_str());
    if location.starts_with('/') {
        format!("{scheme}://{auth}{location}")
    } else {
        format!("{scheme}://{auth}/{location}")
    }
}

/// Percent-encode a query value.
pub fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// HTTPS anywhere; plain HTTP only to a loopback host.
fn check_scheme(uri: &Uri) -> Result<(), String> {
    let host = uri.host().map(host_of_uri).unwrap_or_default();
    match uri.scheme_str() {
        Some("https") => Ok(()),
        Some("http") if is_loopback(&host) => Ok(()),
        Some("http") => Err(format!(
            "{uri}: plain http is used for loopback registries only (127.0.0.0/8, ::1, localhost); this one must be https"
        )),
        _ => Err(format!("{uri}: not an http(s) URL")),
    }
}

fn host_of_uri(h: &str) -> String {
    host_of(h)
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

/// One HTTP exchange. `registry` names the registry in messages.
async fn request(
    method: &Method,
    url: &str,
    headers: &[(&str, String)],
    body: Bytes,
    cap: u64,
    registry: Option<&str>,
) -> Result<Response, String> {
    let who = registry.map_or_else(|| url.to_string(), |r| format!("{r} ({url})"));
    tokio::time::timeout(REQUEST_TIMEOUT, exchange(method, url, headers, body, cap))
        .await
        .map_err(|_| {
            format!(
                "{who}: no complete answer within {} s",
                REQUEST_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| format!("{who}: {e}"))
}

async fn exchange(
    method: &Method,
    url: &str,
    headers: &[(&str, String)],
    body: Bytes,
    cap: u64,
) -> Result<Response, String> {
    let uri: Uri = url.parse().map_err(|_| "not a valid URL".to_string())?;
    check_scheme(&uri)?;
    let https = uri.scheme_str() == Some("https");
    let host = uri.host().map(host_of_uri).ok_or("the URL names no host")?;
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    .map_err(|_| format!("cannot connect within {} s", CONNECT_TIMEOUT.as_secs()))?
    .map_err(|e| format!("cannot connect ({e})"))?;
    let _ = tcp.set_nodelay(true);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut req = http::Request::builder().method(method.clone()).uri(path);
    if let Some(a) = uri.authority() {
        req = req.header(http::header::HOST, a.as_str());
    }
    req = req.header(
        http::header::USER_AGENT,
        concat!("toolgate/", env!("CARGO_PKG_VERSION")),
    );
    for (k, v) in headers {
        let v = HeaderValue::from_str(v).map_err(|_| format!("header {k} is not valid"))?;
        req = req.header(*k, v);
    }
    req = req.header(http::header::CONTENT_LENGTH, body.len());
    let req = req
        .body(http_body_util::Full::new(body))
        .map_err(|e| format!("cannot build the request ({e})"))?;
    if https {
        let name = rustls::pki_types::ServerName::try_from(host)
            .map_err(|e| format!("bad host name for TLS ({e})"))?;
        let tls = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_rustls::TlsConnector::from(crate::telemetry::transport::tls_config()?)
                .connect(name, tcp),
        )
        .await
        .map_err(|_| "the TLS handshake timed out".to_string())?
        .map_err(|e| format!("TLS failed ({e})"))?;
        send(tls, req, cap, method == Method::HEAD).await
    } else {
        send(tcp, req, cap, method == Method::HEAD).await
    }
}

async fn send<S>(
    stream: S,
    req: http::Request<http_body_util::Full<Bytes>>,
    cap: u64,
    head: bool,
) -> Result<Response, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = tokio::time::timeout(
        CONNECT_TIMEOUT,
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)),
    )
    .await
    .map_err(|_| "the HTTP handshake timed out".to_string())?
    .map_err(|e| format!("HTTP handshake failed ({e})"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let response = tokio::time::timeout(CONNECT_TIMEOUT, sender.send_request(req))
        .await
        .map_err(|_| format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()))?
        .map_err(|e| format!("the request failed ({e})"))?;
    let (parts, body) = response.into_parts();
    if head {
        return Ok(Response {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body: Bytes::new(),
        });
    }
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared.filter(|n| *n > cap) {
        return Err(format!(
            "the answer is {n} bytes, more than the {cap} toolgate accepts here; refused without reading it"
        ));
    }
    let limit = usize::try_from(cap).unwrap_or(usize::MAX);
    let body = http_body_util::Limited::new(body, limit)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                format!("the answer went past the {cap} bytes toolgate accepts here; refused")
            } else {
                format!("reading the answer failed ({e})")
            }
        })?
        .to_bytes();
    Ok(Response {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    })
}
