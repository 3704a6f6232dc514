//! The network capability: a guest's outgoing HTTP(S) goes through `wasi:http`, and the host
//! sends it only when the call's [`NetGrant`] allows the destination.
//!
//! What is checked, for every request (a redirect is a new request, so every hop):
//! - the scheme is `http` or `https`, and the host (and port, when a pattern names one) matches
//!   the grant's allowlist;
//! - the name is resolved *by the host* and every address must be public, unless the policy
//!   names the host or address in `[network] allow_private` (no SSRF into loopback, the
//!   user's network or a cloud metadata service);
//! - the connection goes to the address that was checked (no second lookup that a rebinding
//!   DNS server could answer differently);
//! - the response body is cut off at the grant's byte budget, and connecting and waiting for
//!   the response are bounded in time (the call's own deadline bounds the rest).
//!
//! Guests get no sockets and no name lookup of their own: the WASI context disables both.

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use std::fmt;
use std::future::Future;
#[cfg(test)]
use std::net::Ipv4Addr;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

mod addr;
pub mod creds;
pub mod egress;
mod http1;
pub mod scrub;
use addr::{default_port, ipv4_shorthand, split_host_port, valid_hostname};
pub use addr::{is_public, not_public};

/// One allowed destination: `host`, `*.domain`, optionally with a scheme (`https://host`) and a
/// port (`host:8443`). Without a scheme both `http` and `https` match. Without a port, an
/// allowlist pattern ([`HostPattern::matches`]) matches any port, but an `allow_private` entry
/// ([`HostPattern::matches_private`]) only the scheme's default port (80, 443): naming a
/// private host opens one service on it, not every port it listens on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPattern {
    text: String,
    scheme: Option<String>,
    host: HostMatch,
    port: Option<u16>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostMatch {
    Exact(String),
    /// `*.example.com`: any name ending in `.example.com` (not `example.com` itself).
    Suffix(String),
}

impl HostPattern {
    /// Parse a pattern; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let original = text.trim();
        let mut rest = original;
        let mut scheme = None;
        if let Some(i) = rest.find("://") {
            let s = rest[..i].to_ascii_lowercase();
            if s != "http" && s != "https" {
                return Err(format!(
                    "`{original}`: only http and https can be allowed, not `{s}`"
                ));
            }
            scheme = Some(s);
            rest = &rest[i + 3..];
        }
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') || rest.contains('@') || rest.contains('?') {
            return Err(format!(
                "`{original}`: name a host (`api.example.com`, `*.example.com`, `https://host:8443`), not a URL path"
            ));
        }
        let (host, port) = split_host_port(rest)
            .ok_or_else(|| format!("`{original}`: the port is not a number from 1 to 65535"))?;
        let host = host.to_ascii_lowercase();
        let host = if let Some(suffix) = host.strip_prefix("*.") {
            if !valid_hostname(suffix) || !suffix.contains('.') {
                return Err(format!(
                    "`{original}`: a wildcard needs a domain with a dot after `*.` (e.g. `*.example.com`)"
                ));
            }
            HostMatch::Suffix(suffix.to_string())
        } else if host.parse::<IpAddr>().is_ok() || valid_hostname(&host) {
            HostMatch::Exact(host)
        } else {
            return Err(format!(
                "`{original}`: `{host}` is not a host name or an IP address (wildcards only as a leading `*.`)"
            ));
        };
        Ok(HostPattern {
            text: original.to_string(),
            scheme,
            host,
            port,
        })
    }

    /// The port the pattern names, if any.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether a request to `scheme://host:port` matches.
    pub fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.scheme.as_deref().is_none_or(|s| s == scheme)
            && self.port.is_none_or(|p| p == port)
            && self.names_host(host)
    }

    /// As an `[network] allow_private` entry: whether it lets `scheme://host:port` reach a
    /// non-public address. A pattern without a port means the scheme's default port only.
    pub fn matches_private(&self, scheme: &str, host: &str, port: u16) -> bool {
        let wanted = self.port.unwrap_or(default_port(scheme));
        self.scheme.as_deref().is_none_or(|s| s == scheme)
            && wanted == port
            && self.names_host(host)
    }

    /// Whether this pattern names `host`, whatever the scheme and port.
    fn names_host(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        match &self.host {
            HostMatch::Exact(h) => *h == host,
            HostMatch::Suffix(s) => host
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether a destination host is allowed beyond the grant's own lists (the fetch tool asks the
/// gate: is `fetch:<host>` already allowed without a prompt?).
pub type HostCheck = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What one call may reach on the network. Built by the gate for this call only.
#[derive(Clone)]
pub struct NetGrant {
    /// A request must match at least one pattern of *every* list: for a plugin, the hosts its
    /// manifest requests and the hosts the user granted (an intersection, computed here at
    /// request time). An empty outer list allows nothing unless `also` does.
    pub allow: Vec<Vec<HostPattern>>,
    /// A second way in, decided by the gate (for `fetch`: a redirect to a host the user has
    /// already allowed).
    pub also: Option<HostCheck>,
    /// Hosts or addresses the policy lets resolve to private or loopback addresses.
    pub allow_private: Vec<HostPattern>,
    /// Most response-body bytes a single request may deliver.
    pub max_response_bytes: u64,
    /// Bound on connecting, on waiting for the response head, and on each wait for more of
    /// the body.
    pub timeout: Duration,
    /// When the whole call must be over: a body still streaming then ends with an error (a
    /// guest blocked in a host read is not reached by the epoch deadline).
    pub deadline: Option<std::time::Instant>,
    /// What the host refused during this call, in words; the sandbox hands them back in the
    /// call's [`CallReport`](super::CallReport).
    pub refusals: Arc<Mutex<Vec<String>>>,
    /// Credentials the host puts into requests to their hosts ([`creds`]).
    pub credentials: creds::Credentials,
    /// Placeholders sent where they are not bound (each refused), for the audit.
    pub leaks: Arc<Mutex<Vec<String>>>,
}

impl fmt::Debug for NetGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetGrant")
            .field("allow", &self.allow)
            .field("also", &self.also.is_some())
            .field("allow_private", &self.allow_private)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl PartialEq for NetGrant {
    fn eq(&self, other: &Self) -> bool {
        self.allow == other.allow
            && self.also.is_some() == other.also.is_some()
            && self.allow_private == other.allow_private
            && self.max_response_bytes == other.max_response_bytes
            && self.timeout == other.timeout
    }
}

impl Eq for NetGrant {}

impl NetGrant {
    fn host_allowed(&self, scheme: &str, host: &str, port: u16) -> bool {
        let lists = !self.allow.is_empty()
            && self
                .allow
                .iter()
                .all(|list| list.iter().any(|p| p.matches(scheme, host, port)));
        lists || self.also.as_ref().is_some_and(|check| check(host))
    }

    fn refuse(&self, message: String) {
        tracing::info!(%message, "network request refused");
        if let Ok(mut r) = self.refusals.lock() {
            if r.len() < 32 {
                r.push(message);
            }
        }
    }
}

/// The `wasi:http` hooks of one call's store.
#[derive(Default)]
pub(crate) struct NetHooks {
    pub(crate) grant: Option<NetGrant>,
    /// What this call sent and was refused, when it is traced (`toolgate plugin test`).
    pub(crate) trace: Option<super::trace::TraceHandle>,
}

type SendResult = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

impl NetHooks {
    /// What the host refused during this call so far (nothing is allocated when nothing was).
    pub(crate) fn refusals(&self) -> Vec<String> {
        self.grant
            .as_ref()
            .and_then(|g| g.refusals.lock().ok().map(|r| r.clone()))
            .unwrap_or_default()
    }
}

impl WasiHttpHooks for NetHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<dyn Future<Output = SendResult> + Send> {
        drop(fut);
        let grant = self.grant.clone();
        let trace = self.trace.clone();
        Box::new(async move {
            let refusals = grant.as_ref().map(|g| g.refusals.clone());
            let seen = super::trace::NetSeen::start(trace, &request, refusals);
            let result = match grant {
                Some(grant) => send(&grant, request, options).await,
                None => {
                    tracing::info!(uri = %request.uri(), "network request without a network capability");
                    Err(HttpError::HttpRequestDenied)
                }
            };
            if let Some(seen) = seen {
                seen.finish(result.as_ref().map(|(r, _)| r.status().as_u16()), |e| {
                    e.to_string()
                });
            }
            result
        })
    }
}

/// Why an IPv4 address written in a shorthand form (`127.1`, `0x7f.1`, `2130706433`) is
/// refused outright (`None`: `host` is not one).
pub(crate) fn shorthand_refusal(scheme: &str, host: &str, port: u16) -> Option<String> {
    let meant = ipv4_shorthand(host)?
        .map(|ip| format!(" (it means {ip}; write that)"))
        .unwrap_or_default();
    Some(format!(
        "{scheme}://{host}:{port}: `{host}` is an IPv4 address in a shorthand form{meant}; only four plain decimal numbers are accepted, so an address has one spelling in the allowlist, the policy's `[network] allow_private` and the `fetch:HOST` key"
    ))
}

/// Why a destination cannot be reached (see [`resolve_checked`]).
#[derive(Debug)]
pub(crate) enum Unreachable {
    /// The name lookup took longer than allowed.
    Timeout,
    /// The name does not resolve (the resolver's words).
    NoName(String),
    /// The name resolves to nothing.
    NoAddress,
    /// An address is not public and `[network] allow_private` does not name it (the refusal).
    Private(String),
}

/// Resolve `host` by the host's resolver and check every address: each must be public, unless
/// `allow_private` names the host or the address with this port. The caller connects to these
/// addresses (no second lookup that a rebinding DNS server could answer differently). The same
/// check for `wasi:http` requests and for the shell's egress proxy.
pub(crate) async fn resolve_checked(
    allow_private: &[HostPattern],
    scheme: &str,
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, Unreachable> {
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            match tokio::time::timeout(timeout, tokio::net::lookup_host((host, port))).await {
                Err(_) => return Err(Unreachable::Timeout),
                Ok(Err(e)) => return Err(Unreachable::NoName(e.to_string())),
                Ok(Ok(addrs)) => addrs.collect(),
            }
        }
    };
    if addrs.is_empty() {
        return Err(Unreachable::NoAddress);
    }
    for a in &addrs {
        let Some(why) = not_public(a.ip()) else {
            continue;
        };
        let ip_text = a.ip().to_string();
        if allow_private.iter().any(|p| {
            p.matches_private(scheme, host, port) || p.matches_private(scheme, &ip_text, port)
        }) {
            continue;
        }
        let entry = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        return Err(Unreachable::Private(format!(
            "{scheme}://{entry}: {host} resolves to {}, {why}, not a public address; the policy's `[network] allow_private` does not name it with this port (to allow it, add \"{entry}\" there)",
            a.ip()
        )));
    }
    Ok(addrs)
}

async fn send(
    grant: &NetGrant,
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
) -> SendResult {
    let uri = request.uri().clone();
    let scheme = uri.scheme_str().unwrap_or("").to_ascii_lowercase();
    let tls = match scheme.as_str() {
        "https" => true,
        "http" => false,
        _ => {
            grant.refuse(format!("{uri}: only http and https are allowed"));
            return Err(HttpError::HttpRequestDenied);
        }
    };
    let Some(host) = uri.host().map(|h| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase()
    }) else {
        return Err(HttpError::HttpRequestUriInvalid);
    };
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    if let Some(why) = shorthand_refusal(&scheme, &host, port) {
        grant.refuse(why);
        return Err(HttpError::DestinationIpProhibited);
    }
    if !grant.host_allowed(&scheme, &host, port) {
        grant.refuse(format!(
            "{scheme}://{host}:{port}: `{host}` is not on this call's network allowlist"
        ));
        return Err(HttpError::HttpRequestDenied);
    }
    if let Err(r) = creds::broker_request(&grant.credentials, &scheme, &host, port, &mut request) {
        if r.leak {
            grant
                .leaks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(r.why.clone());
        }
        grant.refuse(r.why);
        return Err(HttpError::HttpRequestDenied);
    }
    // A bound host's answer is scanned for every credential's value: uncompressed, please.
    let scrubber = scrub::for_host(&grant.credentials, &host, port);
    if scrubber.is_some() {
        let identity = http::HeaderValue::from_static("identity");
        request
            .headers_mut()
            .insert(http::header::ACCEPT_ENCODING, identity);
    }

    let timeout = |o: Option<Duration>| o.unwrap_or(grant.timeout).min(grant.timeout);
    let connect_timeout = timeout(options.and_then(|o| o.connect_timeout));
    let first_byte_timeout = timeout(options.and_then(|o| o.first_byte_timeout));

    // Resolve here, check every address, and connect to what was checked.
    let addrs =
        match resolve_checked(&grant.allow_private, &scheme, &host, port, connect_timeout).await {
            Ok(addrs) => addrs,
            Err(Unreachable::Timeout) => return Err(HttpError::DnsTimeout),
            Err(Unreachable::NoName(why)) => {
                grant.refuse(format!("{host}: the name does not resolve ({why})"));
                return Err(HttpError::DnsError {
                    rcode: Some(why),
                    info_code: None,
                });
            }
            Err(Unreachable::NoAddress) => return Err(HttpError::DestinationNotFound),
            Err(Unreachable::Private(why)) => {
                grant.refuse(why);
                return Err(HttpError::DestinationIpProhibited);
            }
        };

    let stream =
        match tokio::time::timeout(connect_timeout, tokio::net::TcpStream::connect(&addrs[..]))
            .await
        {
            Err(_) => return Err(HttpError::ConnectionTimeout),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(HttpError::ConnectionRefused)
            }
            Ok(Err(e)) => return Err(HttpError::Connect(e)),
            Ok(Ok(s)) => s,
        };

    // The request line carries only the path; the Host header was set from the authority.
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    *request.uri_mut() = path.parse().map_err(|_| HttpError::HttpRequestUriInvalid)?;

    let response = if tls {
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(HttpError::InvalidDnsNameError)?;
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let stream = tokio::time::timeout(connect_timeout, connector.connect(name, stream))
            .await
            .map_err(|_| HttpError::ConnectionTimeout)?
            .map_err(HttpError::Tls)?;
        exchange(stream, request, connect_timeout, first_byte_timeout).await?
    } else {
        exchange(stream, request, connect_timeout, first_byte_timeout).await?
    };

    let limit = grant.max_response_bytes;
    let idle = grant.timeout;
    let deadline = grant.deadline.map(tokio::time::Instant::from_std);
    let response = response.map(|incoming| {
        Capped {
            inner: incoming,
            seen: 0,
            limit,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d))),
        }
        .boxed_unsync()
    });
    let Some(scrubber) = scrubber else {
        return Ok((response, Box::new(async { Ok(()) })));
    };
    match scrub::response(&host, scrubber, response) {
        Ok(r) => Ok((r.map(|b| b.boxed_unsync()), Box::new(async { Ok(()) }))),
        Err(why) => {
            grant.refuse(why.clone());
            Err(HttpError::HttpResponseContentCoding(Some(why)))
        }
    }
}

async fn exchange<S>(
    stream: S,
    request: http::Request<WasiBody>,
    connect_timeout: Duration,
    first_byte_timeout: Duration,
) -> Result<http::Response<hyper::body::Incoming>, HttpError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::handshake(wasmtime_wasi_http::io::TokioIo::new(stream)),
    )
    .await
    .map_err(|_| HttpError::ConnectionTimeout)??;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "http connection ended with an error");
        }
    });
    tokio::time::timeout(first_byte_timeout, sender.send_request(request))
        .await
        .map_err(|_| HttpError::ConnectionReadTimeout)?
        .map_err(HttpError::from)
}

/// A response body that ends with an error past `limit` bytes, when no data came for `idle`,
/// or at the call's deadline.
struct Capped {
    inner: hyper::body::Incoming,
    seen: u64,
    limit: u64,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Capped {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        if self.seen > self.limit {
            return Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(self.limit)))));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let next = tokio::time::Instant::now() + self.idle;
                self.timer.as_mut().reset(next);
                let Some(len) = frame.data_ref().map(|d| d.len() as u64) else {
                    return Poll::Ready(Some(Ok(frame)));
                };
                let before = self.seen;
                self.seen += len;
                if self.seen <= self.limit {
                    return Poll::Ready(Some(Ok(frame)));
                }
                // The bytes up to the limit are delivered; the next poll says there was more.
                let room = usize::try_from(self.limit - before).unwrap_or(usize::MAX);
                match frame.into_data() {
                    Ok(data) if room > 0 => Poll::Ready(Some(Ok(Frame::data(data.slice(..room))))),
                    _ => Poll::Ready(Some(Err(HttpError::HttpResponseBodySize(Some(self.limit))))),
                }
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(HttpError::from(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let late = self
                    .deadline
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if late || self.timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout)));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

#[cfg(test)]
#[path = "net_tests.rs"]
mod tests;
