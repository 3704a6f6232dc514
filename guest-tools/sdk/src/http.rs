//! Outgoing HTTP for tools built with the SDK's `http` feature (`wasi:http/outgoing-handler`).
//!
//! A small blocking client: [`send`] makes one request, [`fetch`] also follows redirects. The
//! host decides which requests get through: a host that is not on the tool's network
//! allowlist comes back as an [`HttpError`] with code `http-request-denied`, and an address in
//! a private, loopback or link-local range as `destination-ip-prohibited`. The host does not
//! follow redirects itself; [`fetch`] does, and every hop is a new request the host checks
//! again.
//!
//! ```ignore
//! use toolgate_guest::http::{self, Request};
//! use toolgate_guest::ToolError;
//!
//! fn status_of(url: &str) -> Result<String, ToolError> {
//!     let req = Request::get(url).header("accept", "application/json");
//!     // At most 64 KiB of body, at most 5 redirects.
//!     let resp = http::fetch(req, 64 * 1024, 5)
//!         .map_err(|e| ToolError::new(&e.code, e.message))?;
//!     let body = String::from_utf8_lossy(&resp.body);
//!     Ok(format!(
//!         "{} -> {} ({} bytes{})\n{body}",
//!         resp.url,
//!         resp.status,
//!         resp.body_bytes_seen,
//!         if resp.truncated { ", cut" } else { "" }
//!     ))
//! }
//! ```
//!
//! Enable it in the tool's `Cargo.toml`:
//! `toolgate-guest = { path = "vendor/toolgate-guest", features = ["http"] }` (the SDK `toolgate plugin new` vendors).

use std::fmt;

/// One HTTP request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ... (any case; sent upper-cased).
    pub method: String,
    /// An absolute `http://` or `https://` URL.
    pub url: String,
    /// Request headers, in order. `host`, `connection` and the like are set by the host.
    pub headers: Vec<(String, String)>,
    /// The request body, if any. A `content-length` header is added when it is missing.
    pub body: Option<Vec<u8>>,
}

impl Request {
    /// A request with `method` to `url`, no headers and no body.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Request {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// A `GET` request to `url`.
    pub fn get(url: impl Into<String>) -> Self {
        Request::new("GET", url)
    }

    /// Add a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Set the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }
}

/// A response, with at most the requested number of body bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Response headers as the host passed them on (names lower-case), in order.
    pub headers: Vec<(String, String)>,
    /// The body, at most `max_bytes` of it.
    pub body: Vec<u8>,
    /// True when the body was cut at `max_bytes` and the server had more.
    pub truncated: bool,
    /// Body bytes received (can exceed `body.len()` when `truncated`; the server may have had
    /// more still).
    pub body_bytes_seen: u64,
    /// The URL this response came from (the last hop after redirects).
    pub url: String,
    /// The URLs redirected to, in order (empty when there was no redirect).
    pub redirects: Vec<String>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A request that failed: a stable code and a message that names the URL and says what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpError {
    /// The `wasi:http` error-code name (`http-request-denied`, `destination-ip-prohibited`,
    /// `dns-error`, `connection-timeout`, `internal-error`, ...) or one of the client's own:
    /// `bad-url`, `bad-header`, `bad-method`, `too-many-redirects`, `body-read-error`,
    /// `unsupported` (not running as a wasm component).
    pub code: String,
    /// What went wrong, for the model or the user.
    pub message: String,
}

impl HttpError {
    /// An error with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        HttpError {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for HttpError {}

/// An absolute `http`/`https` URL, split the way `wasi:http` wants it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    /// `http` or `https`.
    pub scheme: String,
    /// The host name (lower-case) or IP address; an IPv6 address without brackets.
    pub host: String,
    /// The port when the URL names one.
    pub port: Option<u16>,
    /// The path (starting with `/`) and the query (with its `?`); never a fragment.
    pub path_and_query: String,
}

fn bad_url(url: &str, why: &str) -> HttpError {
    HttpError::new("bad-url", format!("`{url}` is not a usable URL: {why}"))
}

/// Bytes of a path or query that are percent-encoded instead of refused.
fn needs_encoding(b: u8) -> bool {
    b >= 0x80
        || matches!(
            b,
            b' ' | b'"' | b'<' | b'>' | b'`' | b'{' | b'}' | b'|' | b'\\' | b'^'
        )
}

fn encode_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if needs_encoding(b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out
}

/// Remove `.` and `..` segments from an absolute path (RFC 3986 section 5.2.4).
fn remove_dot_segments(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    let mut out: Vec<&str> = Vec::new();
    for (i, seg) in segments.iter().enumerate().skip(1) {
        match *seg {
            "." => {}
            ".." => {
                out.pop();
            }
            s => {
                out.push(s);
                continue;
            }
        }
        if i == last {
            out.push("");
        }
    }
    format!("/{}", out.join("/"))
}

/// `path?query` with dot segments removed from the path.
fn normalize_path_and_query(pq: &str) -> String {
    match pq.split_once('?') {
        Some((path, query)) => format!("{}?{query}", remove_dot_segments(path)),
        None => remove_dot_segments(pq),
    }
}

/// Whether `s` starts with `scheme:` (RFC 3986: a letter, then letters, digits, `+-.`).
fn has_scheme(s: &str) -> bool {
    match s.find(':') {
        Some(i) if i > 0 => {
            let scheme = &s[..i];
            scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        _ => false,
    }
}

impl Url {
    /// Parse an absolute `http://` or `https://` URL. The fragment is dropped; spaces and
    /// non-ASCII characters in the path and query are percent-encoded.
    pub fn parse(input: &str) -> Result<Url, HttpError> {
        let s = input.trim();
        if s.chars().any(char::is_control) {
            return Err(bad_url(input, "it contains control characters"));
        }
        let Some((scheme, rest)) = s.split_once("://") else {
            return Err(bad_url(
                input,
                "write it as an absolute URL such as https://example.com/path",
            ));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(bad_url(
                input,
                &format!("the scheme `{scheme}` is not supported; only http and https are"),
            ));
        }
        let rest = rest.split('#').next().unwrap_or("");
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if authority.contains('@') {
            return Err(bad_url(
                input,
                "user names and passwords in URLs are not supported; send an Authorization header instead",
            ));
        }
        let (host, port) = if let Some(after) = authority.strip_prefix('[') {
            let Some((host, after)) = after.split_once(']') else {
                return Err(bad_url(input, "an IPv6 address is missing its closing `]`"));
            };
            if host.is_empty()
                || !host
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
            {
                return Err(bad_url(input, "the IPv6 address in brackets is not valid"));
            }
            match after {
                "" => (host, None),
                p => match p.strip_prefix(':') {
                    Some(p) => (host, Some(p)),
                    None => return Err(bad_url(input, "unexpected text after the IPv6 address")),
                },
            }
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad_url(input, "it has no host name"));
        }
        if !host.is_ascii() {
            return Err(bad_url(
                input,
                "the host name is not ASCII; use its punycode (xn--) form",
            ));
        }
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%' | '~'))
        {
            return Err(bad_url(
                input,
                "the host name contains characters a host name cannot have",
            ));
        }
        let port = match port {
            None | Some("") => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.chars().all(|c| c.is_ascii_digit()) => Some(n),
                _ => return Err(bad_url(input, &format!("`{p}` is not a valid port"))),
            },
        };
        let tail = if tail.starts_with('?') {
            format!("/{tail}")
        } else if tail.is_empty() {
            "/".to_string()
        } else {
            tail.to_string()
        };
        Ok(Url {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
            path_and_query: normalize_path_and_query(&encode_path(&tail)),
        })
    }

    /// `host[:port]`, with brackets around an IPv6 address.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(p) => format!("{host}:{p}"),
            None => host,
        }
    }

    /// The port the request goes to: the explicit one or the scheme's default.
    pub fn effective_port(&self) -> u16 {
        self.port
            .unwrap_or(if self.scheme == "https" { 443 } else { 80 })
    }

    /// Whether `other` has the same scheme, host and port.
    pub fn same_origin(&self, other: &Url) -> bool {
        self.scheme == other.scheme
            && self.host == other.host
            && self.effective_port() == other.effective_port()
    }

    /// Resolve `reference` (a `Location` header: absolute, `//host/..`, `/path`, `?query` or
    /// a relative path) against this URL.
    pub fn join(&self, reference: &str) -> Result<Url, HttpError> {
        let r = reference.trim();
        let r = r.split('#').next().unwrap_or("");
        if has_scheme(r) {
            return Url::parse(r);
        }
        if r.starts_with("//") {
            return Url::parse(&format!("{}:{r}", self.scheme));
        }
        if r.chars().any(char::is_control) {
            return Err(bad_url(reference, "it contains control characters"));
        }
        let path = self
            .path_and_query
            .split('?')
            .next()
            .unwrap_or("/")
            .to_string();
        let path_and_query = if r.is_empty() {
            self.path_and_query.clone()
        } else if r.starts_with('/') {
            r.to_string()
        } else if r.starts_with('?') {
            format!("{path}{r}")
        } else {
            let dir = match path.rfind('/') {
                Some(i) => &path[..=i],
                None => "/",
            };
            format!("{dir}{r}")
        };
        Ok(Url {
            path_and_query: normalize_path_and_query(&encode_path(&path_and_query)),
            ..self.clone()
        })
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme,
            self.authority(),
            self.path_and_query
        )
    }
}

/// Whether `status` is a redirect [`fetch`] follows (301, 302, 303, 307, 308).
pub fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// The method of the request that follows a `status` redirect of a `method` request, and
/// whether the body is kept: 303 turns everything but HEAD into a GET without body, and so
/// do 301 and 302 for a POST (what browsers and curl do); 307 and 308 keep both.
pub fn redirect_method(status: u16, method: &str) -> (String, bool) {
    let upper = method.to_ascii_uppercase();
    let to_get = match status {
        303 => upper != "GET" && upper != "HEAD",
        301 | 302 => upper == "POST",
        _ => false,
    };
    if to_get {
        ("GET".to_string(), false)
    } else {
        (upper, true)
    }
}

/// Headers that describe a body, dropped when a redirect drops the body.
const BODY_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-encoding",
    "content-language",
    "content-location",
    "transfer-encoding",
];
/// Credentials, dropped when a redirect leaves the origin.
const CREDENTIAL_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// Send one request and read at most `max_bytes` of the body. Redirects are returned as they
/// are (see [`fetch`]).
pub fn send(req: &Request, max_bytes: usize) -> Result<Response, HttpError> {
    let url = Url::parse(&req.url)?;
    transport::send(req, &url, max_bytes)
}

/// Send `req`, following up to `max_redirects` redirects (301, 302, 303, 307, 308 with a
/// `Location`; see [`redirect_method`]), and read at most `max_bytes` of the final body. A
/// relative `Location` is resolved against the current URL; credentials (`authorization`,
/// `cookie`) are not sent on to another origin. More redirects than `max_redirects` is an
/// error with code `too-many-redirects`.
pub fn fetch(req: Request, max_bytes: usize, max_redirects: u32) -> Result<Response, HttpError> {
    fetch_with(req, max_redirects, |r| send(r, max_bytes))
}

/// [`fetch`]'s redirect logic over any way of sending one request (`send` is called once per
/// hop), so it can be tested without a network.
pub fn fetch_with(
    mut req: Request,
    max_redirects: u32,
    mut send: impl FnMut(&Request) -> Result<Response, HttpError>,
) -> Result<Response, HttpError> {
    let start = req.url.clone();
    let mut redirects: Vec<String> = Vec::new();
    loop {
        let mut resp = send(&req)?;
        let location = match resp.header("location") {
            Some(l) if is_redirect(resp.status) && !l.trim().is_empty() => l.trim().to_string(),
            _ => {
                resp.redirects = redirects;
                return Ok(resp);
            }
        };
        let current = Url::parse(&req.url)?;
        if redirects.len() >= usize::try_from(max_redirects).unwrap_or(usize::MAX) {
            return Err(HttpError::new(
                "too-many-redirects",
                format!(
                    "{start} redirected more than {max_redirects} times (the next hop was from {} to `{location}`); the site may redirect in a loop. Request the last URL directly if it is the right one",
                    req.url
                ),
            ));
        }
        let next = current.join(&location).map_err(|e| {
            HttpError::new(
                "bad-url",
                format!(
                    "{} redirected ({}) to `{location}`, which cannot be followed: {}",
                    req.url, resp.status, e.message
                ),
            )
        })?;
        let (method, keep_body) = redirect_method(resp.status, &req.method);
        if !keep_body {
            req.body = None;
            req.headers
                .retain(|(n, _)| !BODY_HEADERS.iter().any(|h| n.eq_ignore_ascii_case(h)));
        }
        if !current.same_origin(&next) {
            req.headers
                .retain(|(n, _)| !CREDENTIAL_HEADERS.iter().any(|h| n.eq_ignore_ascii_case(h)));
        }
        let next = next.to_string();
        req.method = method;
        req.url = next.clone();
        redirects.push(next);
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod transport {
    use super::{HttpError, Request, Response, Url};

    pub(super) fn send(
        _req: &Request,
        url: &Url,
        _max_bytes: usize,
    ) -> Result<Response, HttpError> {
        Err(HttpError::new(
            "unsupported",
            format!(
                "cannot request {url}: HTTP is only available inside a wasm32-wasip2 component"
            ),
        ))
    }
}

#[cfg(target_arch = "wasm32")]
mod transport {
    use super::{HttpError, Request, Response, Url};
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, FutureIncomingResponse, HeaderError, IncomingBody, IncomingResponse,
        Method, OutgoingBody, OutgoingRequest, Scheme,
    };
    use wasip2::io::streams::StreamError;

    /// Bytes asked for per read of the response body.
    const READ_CHUNK: u64 = 64 * 1024;
    /// The most bytes `blocking-write-and-flush` takes at once.
    const WRITE_CHUNK: usize = 4096;

    pub(super) fn send(req: &Request, url: &Url, max_bytes: usize) -> Result<Response, HttpError> {
        let fields = Fields::new();
        let mut has_length = false;
        for (name, value) in &req.headers {
            has_length |= name.eq_ignore_ascii_case("content-length");
            fields
                .append(name, value.as_bytes())
                .map_err(|e| header_error(&req.url, name, e))?;
        }
        if let Some(body) = &req.body {
            if !has_length {
                fields
                    .append("content-length", body.len().to_string().as_bytes())
                    .map_err(|e| header_error(&req.url, "content-length", e))?;
            }
        }
        let request = OutgoingRequest::new(fields);
        request.set_method(&method(&req.method)).map_err(|()| {
            HttpError::new(
                "bad-method",
                format!(
                    "`{}` is not a valid HTTP method (request to {})",
                    req.method, req.url
                ),
            )
        })?;
        let scheme = if url.scheme == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        };
        let bad = |what: &str| bad_url_part(&req.url, what);
        request
            .set_scheme(Some(&scheme))
            .map_err(|()| bad("scheme"))?;
        request
            .set_authority(Some(&url.authority()))
            .map_err(|()| bad("host and port"))?;
        request
            .set_path_with_query(Some(&url.path_and_query))
            .map_err(|()| bad("path or query"))?;
        let body = request
            .body()
            .map_err(|()| internal(&req.url, "the request body was already taken"))?;
        let future =
            outgoing_handler::handle(request, None).map_err(|c| from_code(&req.url, url, c))?;

        if let Err(e) = write_body(body, req.body.as_deref(), &req.url, url) {
            // A refused request fails the body too; the response says why.
            return Err(match wait(&future, &req.url, url) {
                Err(response_error) => response_error,
                Ok(_) => e,
            });
        }
        let incoming = wait(&future, &req.url, url)?;
        drop(future);
        read_response(incoming, &req.url, url, max_bytes)
    }

    fn write_body(
        body: OutgoingBody,
        bytes: Option<&[u8]>,
        raw: &str,
        url: &Url,
    ) -> Result<(), HttpError> {
        if let Some(bytes) = bytes {
            let stream = body
                .write()
                .map_err(|()| internal(raw, "the request body stream was already taken"))?;
            for chunk in bytes.chunks(WRITE_CHUNK) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| stream_error(raw, url, e, "sending the request body"))?;
            }
            drop(stream);
        }
        OutgoingBody::finish(body, None).map_err(|c| from_code(raw, url, c))
    }

    fn wait(
        future: &FutureIncomingResponse,
        raw: &str,
        url: &Url,
    ) -> Result<IncomingResponse, HttpError> {
        loop {
            match future.get() {
                Some(Ok(Ok(resp))) => return Ok(resp),
                Some(Ok(Err(code))) => return Err(from_code(raw, url, code)),
                Some(Err(())) => return Err(internal(raw, "the response was already taken")),
                None => future.subscribe().block(),
            }
        }
    }

    fn read_response(
        incoming: IncomingResponse,
        raw: &str,
        url: &Url,
        max_bytes: usize,
    ) -> Result<Response, HttpError> {
        let status = incoming.status();
        let headers: Vec<(String, String)> = incoming
            .headers()
            .entries()
            .into_iter()
            .map(|(n, v)| (n, String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let body = incoming
            .consume()
            .map_err(|()| internal(raw, "the response body was already taken"))?;
        let stream = body
            .stream()
            .map_err(|()| internal(raw, "the response body stream was already taken"))?;
        let mut buf: Vec<u8> = Vec::new();
        let mut seen: u64 = 0;
        let mut truncated = false;
        loop {
            match stream.blocking_read(READ_CHUNK) {
                Ok(chunk) => {
                    seen += chunk.len() as u64;
                    let room = max_bytes.saturating_sub(buf.len());
                    buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    if chunk.len() > room {
                        truncated = true;
                        break;
                    }
                }
                Err(StreamError::Closed) => break,
                // Reading one chunk past `max_bytes` only asks whether there is more; a host
                // that stops the body at its own limit there (the policy's
                // `max_response_bytes`) says that there is: what was read is kept.
                Err(_) if buf.len() >= max_bytes && max_bytes > 0 => {
                    truncated = true;
                    break;
                }
                Err(e) => {
                    drop(stream);
                    drop(body);
                    return Err(stream_error(raw, url, e, "reading the response body"));
                }
            }
        }
        drop(stream);
        if !truncated {
            drop(IncomingBody::finish(body));
        } else {
            drop(body);
        }
        drop(incoming);
        Ok(Response {
            status,
            headers,
            body: buf,
            truncated,
            body_bytes_seen: seen,
            url: raw.to_string(),
            redirects: Vec::new(),
        })
    }

    fn method(m: &str) -> Method {
        match m.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "CONNECT" => Method::Connect,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "PATCH" => Method::Patch,
            other => Method::Other(other.to_string()),
        }
    }

    fn internal(raw: &str, what: &str) -> HttpError {
        HttpError::new(
            "internal-error",
            format!("the request to {raw} failed: {what}"),
        )
    }

    fn bad_url_part(raw: &str, what: &str) -> HttpError {
        HttpError::new(
            "bad-url",
            format!("the host rejected the {what} of {raw}; check the URL"),
        )
    }

    fn header_error(raw: &str, name: &str, e: HeaderError) -> HttpError {
        let why = match e {
            HeaderError::InvalidSyntax => "its name or value is not valid header syntax",
            HeaderError::Forbidden => "the host sets it itself and does not let tools set it",
            HeaderError::Immutable => "the headers can no longer be changed",
        };
        HttpError::new(
            "bad-header",
            format!("cannot send header `{name}` to {raw}: {why}; remove or fix it"),
        )
    }

    fn stream_error(raw: &str, url: &Url, e: StreamError, doing: &str) -> HttpError {
        match e {
            StreamError::Closed => HttpError::new(
                "connection-terminated",
                format!("the connection to {raw} closed while {doing}; try again"),
            ),
            StreamError::LastOperationFailed(err) => {
                match wasip2::http::types::http_error_code(&err) {
                    Some(code) => from_code(raw, url, code),
                    None => HttpError::new(
                        "body-read-error",
                        format!("{doing} for {raw} failed: {}", err.to_debug_string()),
                    ),
                }
            }
        }
    }

    /// The `wasi:http` name of an error code.
    fn code_name(c: &ErrorCode) -> &'static str {
        match c {
            ErrorCode::DnsTimeout => "dns-timeout",
            ErrorCode::DnsError(_) => "dns-error",
            ErrorCode::DestinationNotFound => "destination-not-found",
            ErrorCode::DestinationUnavailable => "destination-unavailable",
            ErrorCode::DestinationIpProhibited => "destination-ip-prohibited",
            ErrorCode::DestinationIpUnroutable => "destination-ip-unroutable",
            ErrorCode::ConnectionRefused => "connection-refused",
            ErrorCode::ConnectionTerminated => "connection-terminated",
            ErrorCode::ConnectionTimeout => "connection-timeout",
            ErrorCode::ConnectionReadTimeout => "connection-read-timeout",
            ErrorCode::ConnectionWriteTimeout => "connection-write-timeout",
            ErrorCode::ConnectionLimitReached => "connection-limit-reached",
            ErrorCode::TlsProtocolError => "tls-protocol-error",
            ErrorCode::TlsCertificateError => "tls-certificate-error",
            ErrorCode::TlsAlertReceived(_) => "tls-alert-received",
            ErrorCode::HttpRequestDenied => "http-request-denied",
            ErrorCode::HttpRequestLengthRequired => "http-request-length-required",
            ErrorCode::HttpRequestBodySize(_) => "http-request-body-size",
            ErrorCode::HttpRequestMethodInvalid => "http-request-method-invalid",
            ErrorCode::HttpRequestUriInvalid => "http-request-uri-invalid",
            ErrorCode::HttpRequestUriTooLong => "http-request-uri-too-long",
            ErrorCode::HttpRequestHeaderSectionSize(_) => "http-request-header-section-size",
            ErrorCode::HttpRequestHeaderSize(_) => "http-request-header-size",
            ErrorCode::HttpRequestTrailerSectionSize(_) => "http-request-trailer-section-size",
            ErrorCode::HttpRequestTrailerSize(_) => "http-request-trailer-size",
            ErrorCode::HttpResponseIncomplete => "http-response-incomplete",
            ErrorCode::HttpResponseHeaderSectionSize(_) => "http-response-header-section-size",
            ErrorCode::HttpResponseHeaderSize(_) => "http-response-header-size",
            ErrorCode::HttpResponseBodySize(_) => "http-response-body-size",
            ErrorCode::HttpResponseTrailerSectionSize(_) => "http-response-trailer-section-size",
            ErrorCode::HttpResponseTrailerSize(_) => "http-response-trailer-size",
            ErrorCode::HttpResponseTransferCoding(_) => "http-response-transfer-coding",
            ErrorCode::HttpResponseContentCoding(_) => "http-response-content-coding",
            ErrorCode::HttpResponseTimeout => "http-response-timeout",
            ErrorCode::HttpUpgradeFailed => "http-upgrade-failed",
            ErrorCode::HttpProtocolError => "http-protocol-error",
            ErrorCode::LoopDetected => "loop-detected",
            ErrorCode::ConfigurationError => "configuration-error",
            ErrorCode::InternalError(_) => "internal-error",
        }
    }

    /// An error code as an [`HttpError`] whose message names the URL and says what to do.
    fn from_code(raw: &str, url: &Url, c: ErrorCode) -> HttpError {
        let host = &url.host;
        let port = url.effective_port();
        let message = match &c {
            ErrorCode::HttpRequestDenied => format!(
                "the host refused the request to {raw}: {host} is not on this tool's network allowlist (use an allowed host, or ask the user to allow {host})"
            ),
            ErrorCode::DestinationIpProhibited => format!(
                "the host refused {raw}: it resolves to a private, loopback or link-local address, which the policy does not allow"
            ),
            ErrorCode::DnsError(p) => {
                let detail = match (&p.rcode, p.info_code) {
                    (Some(r), Some(i)) => format!(" ({r}, info code {i})"),
                    (Some(r), None) => format!(" ({r})"),
                    (None, Some(i)) => format!(" (info code {i})"),
                    (None, None) => String::new(),
                };
                format!("could not resolve {host} for {raw}{detail}; check the host name")
            }
            ErrorCode::DnsTimeout => {
                format!("looking up {host} for {raw} timed out; try again later")
            }
            ErrorCode::DestinationNotFound | ErrorCode::DestinationUnavailable => {
                format!("{host} could not be reached for {raw}; check the host name or try again later")
            }
            ErrorCode::DestinationIpUnroutable => {
                format!("{host} has no route for {raw}; check the host name")
            }
            ErrorCode::ConnectionRefused => format!(
                "{host}:{port} refused the connection for {raw}; check the port and whether the service is up"
            ),
            ErrorCode::ConnectionTerminated => {
                format!("the connection to {host} closed early for {raw}; try again")
            }
            ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout
            | ErrorCode::HttpResponseTimeout => format!(
                "the request to {raw} timed out ({}); try again later or ask for less",
                code_name(&c)
            ),
            ErrorCode::TlsProtocolError | ErrorCode::TlsCertificateError => format!(
                "the TLS connection to {host} failed for {raw} ({}); the server's certificate or TLS setup is not accepted",
                code_name(&c)
            ),
            ErrorCode::TlsAlertReceived(p) => format!(
                "{host} ended the TLS handshake for {raw} with alert {}{}",
                p.alert_id.map(|i| i.to_string()).unwrap_or_else(|| "?".into()),
                p.alert_message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ),
            ErrorCode::InternalError(Some(m)) => {
                format!("the request to {raw} failed: {m}")
            }
            ErrorCode::InternalError(None) => {
                format!("the request to {raw} failed with an internal error in the host")
            }
            other => format!("the request to {raw} failed: {} ({other:?})", code_name(other)),
        };
        HttpError::new(code_name(&c), message)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn parses_urls() {
        let u = url("HTTPS://Example.COM:8443/a/b?x=1#frag");
        assert_eq!(u.scheme, "https");
        assert_eq!(u.host, "example.com");
        assert_eq!(u.port, Some(8443));
        assert_eq!(u.path_and_query, "/a/b?x=1");
        assert_eq!(u.to_string(), "https://example.com:8443/a/b?x=1");
        assert_eq!(url("http://h").path_and_query, "/");
        assert_eq!(url("http://h?q").path_and_query, "/?q");
        assert_eq!(url("http://h:/x").port, None);
        assert_eq!(url("http://[::1]:8080/").authority(), "[::1]:8080");
        assert_eq!(url("http://h/a b/ü").path_and_query, "/a%20b/%C3%BC");
        assert_eq!(url("http://h/a/./b/../c").path_and_query, "/a/c");
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in [
            "example.com/x",
            "ftp://h/x",
            "http:///x",
            "http://user:pw@h/",
            "http://h:99999/",
            "http://h:12a/",
            "http://[::1/",
            "http://h\n/",
            "http://hé/",
        ] {
            let e = Url::parse(bad).unwrap_err();
            assert_eq!(e.code, "bad-url", "{bad}");
            assert!(e.message.contains(bad.trim()), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn joins_references() {
        let base = url("https://a.example/dir/page?x=1");
        let j = |r: &str| base.join(r).unwrap().to_string();
        assert_eq!(j("http://b.example/x"), "http://b.example/x");
        assert_eq!(j("//c.example/y"), "https://c.example/y");
        assert_eq!(j("/root?q=2"), "https://a.example/root?q=2");
        assert_eq!(j("?q=3"), "https://a.example/dir/page?q=3");
        assert_eq!(j("other"), "https://a.example/dir/other");
        assert_eq!(j("../up"), "https://a.example/up");
        assert_eq!(j("../../../up"), "https://a.example/up");
        assert_eq!(j("./"), "https://a.example/dir/");
        assert_eq!(j(""), "https://a.example/dir/page?x=1");
        assert_eq!(j("#frag"), "https://a.example/dir/page?x=1");
        assert_eq!(base.join("mailto:x@y").unwrap_err().code, "bad-url");
    }

    #[test]
    fn redirect_methods() {
        assert_eq!(redirect_method(303, "POST"), ("GET".into(), false));
        assert_eq!(redirect_method(303, "HEAD"), ("HEAD".into(), true));
        assert_eq!(redirect_method(302, "post"), ("GET".into(), false));
        assert_eq!(redirect_method(301, "PUT"), ("PUT".into(), true));
        assert_eq!(redirect_method(307, "POST"), ("POST".into(), true));
        assert_eq!(redirect_method(308, "POST"), ("POST".into(), true));
    }

    fn resp(status: u16, location: Option<&str>, url: &str) -> Response {
        Response {
            status,
            headers: location
                .map(|l| vec![("location".to_string(), l.to_string())])
                .unwrap_or_default(),
            body: Vec::new(),
            truncated: false,
            body_bytes_seen: 0,
            url: url.to_string(),
            redirects: Vec::new(),
        }
    }

    #[test]
    fn follows_redirects_and_drops_body_and_credentials() {
        let mut seen: Vec<Request> = Vec::new();
        let req = Request::new("POST", "https://a.example/form")
            .header("Authorization", "secret")
            .header("Content-Type", "text/plain")
            .body("hi");
        let out = fetch_with(req, 5, |r| {
            seen.push(r.clone());
            Ok(match seen.len() {
                1 => resp(302, Some("/next"), &r.url),
                2 => resp(301, Some("https://b.example/final"), &r.url),
                _ => resp(200, None, &r.url),
            })
        })
        .unwrap();
        assert_eq!(out.status, 200);
        assert_eq!(out.url, "https://b.example/final");
        assert_eq!(
            out.redirects,
            vec!["https://a.example/next", "https://b.example/final"]
        );
        assert_eq!(seen[1].method, "GET");
        assert_eq!(seen[1].body, None);
        assert!(seen[1].headers.iter().any(|(n, _)| n == "Authorization"));
        assert!(!seen[1].headers.iter().any(|(n, _)| n == "Content-Type"));
        assert!(seen[2].headers.is_empty());
    }

    #[test]
    fn too_many_redirects() {
        let e = fetch_with(Request::get("http://a/"), 2, |r| {
            Ok(resp(302, Some("/again"), &r.url))
        })
        .unwrap_err();
        assert_eq!(e.code, "too-many-redirects");
        assert!(e.message.contains("http://a/"), "{}", e.message);
    }

    #[test]
    fn redirect_without_location_is_returned() {
        let out = fetch_with(Request::get("http://a/"), 5, |r| {
            Ok(resp(302, None, &r.url))
        })
        .unwrap();
        assert_eq!(out.status, 302);
        assert!(out.redirects.is_empty());
    }

    #[test]
    fn send_outside_wasm_is_unsupported() {
        assert_eq!(
            send(&Request::get("http://a/"), 10).unwrap_err().code,
            "unsupported"
        );
        assert_eq!(send(&Request::get("nope"), 10).unwrap_err().code, "bad-url");
    }
}
