//! The HTTP/1 the egress proxy speaks: a strict request head parser, the request body's framing
//! (refusing every ambiguous shape a request-smuggling attack relies on), and the response
//! relay that scrubs brokered credentials out of what a bound host answers.
//!
//! The proxy forwards exactly one request per connection: the head it judged and the body that
//! head frames, no byte more. Anything the client sends after that body (a pipelined or
//! kept-alive second request) is never forwarded; [`Surplus`] keeps its start so the proxy can
//! record it as refused.

use super::scrub::Scrubber;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest request or response head (start line and headers) read.
pub(super) const MAX_HEAD: usize = 32 << 10;

/// Longest chunk-size or trailer line accepted in a chunked body.
const MAX_CHUNK_LINE: usize = 4096;

/// Bytes read at a time while relaying.
const BUF: usize = 64 << 10;

/// Header fields in order: name as written, value trimmed.
type Headers = Vec<(String, String)>;

/// A parsed request head.
#[derive(Debug)]
pub(super) struct Head {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) version: String,
    pub(super) headers: Vec<(String, String)>,
    /// Bytes read past the head (the start of a body or tunnel data).
    pub(super) rest: Vec<u8>,
}

impl Head {
    /// The values of header `name`.
    pub(super) fn all(&self, name: &str) -> Vec<&str> {
        header_values(&self.headers, name)
    }
}

fn header_values<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Read a head (ending with an empty line), bounded in size and time; the bytes of the head
/// and those read past it.
async fn read_raw<R: AsyncRead + Unpin>(
    r: &mut R,
    mut buf: Vec<u8>,
    timeout: Duration,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let end = tokio::time::timeout(timeout, async {
        loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                return Ok(i);
            }
            if buf.len() > MAX_HEAD {
                return Err(format!("the head is larger than {} KiB", MAX_HEAD >> 10));
            }
            let mut chunk = [0u8; 4096];
            match r.read(&mut chunk).await {
                Ok(0) | Err(_) => return Err("the connection closed before a whole head".into()),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .map_err(|_| "the head did not arrive in time".to_string())??;
    let rest = buf[end + 4..].to_vec();
    buf.truncate(end);
    Ok((buf, rest))
}

/// Read the request head, bounded in size and time.
pub(super) async fn read_head<R: AsyncRead + Unpin>(
    client: &mut R,
    timeout: Duration,
) -> Result<Head, String> {
    let (raw, rest) = read_raw(client, Vec::with_capacity(4096), timeout).await?;
    parse_head(&raw, rest)
}

/// Parse a request head (without its final empty line).
pub(super) fn parse_head(raw: &[u8], rest: Vec<u8>) -> Result<Head, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "the request head is not text")?;
    let (line, headers) = parse_lines(text)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("`{line}` is not an HTTP request line"));
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || target.is_empty() {
        return Err(format!("`{line}` is not an HTTP/1 request line"));
    }
    Ok(Head {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        rest,
    })
}

/// The start line and the header fields of a head, refusing what another parser could read
/// differently.
fn parse_lines(text: &str) -> Result<(&str, Headers), String> {
    // A bare CR or LF (or another control character) would let an upstream that splits lines
    // differently see a header or a request this proxy never judged.
    if let Some(l) = text
        .split("\r\n")
        .find(|l| l.chars().any(|c| c.is_control() && c != '\t'))
    {
        return Err(format!(
            "the head line `{}` holds a control character (a bare carriage return or line feed?)",
            l.escape_debug()
        ));
    }
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut headers = Vec::new();
    for l in lines {
        if l.starts_with([' ', '\t']) {
            return Err(format!(
                "the header line `{l}` continues the previous one (obsolete line folding), which servers read differently; refused"
            ));
        }
        let Some((k, v)) = l.split_once(':') else {
            return Err(format!("`{l}` is not a header line"));
        };
        if k.is_empty() || k.contains(|c: char| c.is_whitespace()) {
            return Err(format!("`{l}` is not a header line"));
        }
        headers.push((k.to_string(), v.trim().to_string()));
    }
    Ok((line, headers))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// How a message's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body.
    Empty,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes (responses only).
    Close,
}

/// The framing of a message with these headers, refusing every shape two parsers could read
/// differently: two `Content-Length`s, `Transfer-Encoding` with `Content-Length`, a transfer
/// coding other than exactly `chunked`, a length that is not plain digits.
pub(super) fn framing(headers: &[(String, String)], what: &str) -> Result<Option<Framing>, String> {
    let lengths = header_values(headers, "content-length");
    let codings = header_values(headers, "transfer-encoding");
    let smuggling = "refused: two parsers could read where it ends differently (request smuggling)";
    if !codings.is_empty() && !lengths.is_empty() {
        return Err(format!(
            "{what} has both Transfer-Encoding and Content-Length; {smuggling}"
        ));
    }
    if lengths.len() > 1 {
        return Err(format!(
            "{what} has more than one Content-Length; {smuggling}"
        ));
    }
    if codings.len() > 1 {
        return Err(format!(
            "{what} has more than one Transfer-Encoding; {smuggling}"
        ));
    }
    if let Some(c) = codings.first() {
        if !c.eq_ignore_ascii_case("chunked") {
            return Err(format!(
                "{what} has `Transfer-Encoding: {c}`; only `chunked` alone is accepted, {smuggling}"
            ));
        }
        return Ok(Some(Framing::Chunked));
    }
    if let Some(l) = lengths.first() {
        let n = l
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| l.parse::<u64>().ok())
            .flatten()
            .filter(|_| !l.is_empty())
            .ok_or_else(|| {
                format!("{what} has `Content-Length: {l}`, not a number; {smuggling}")
            })?;
        return Ok(Some(Framing::Length(n)));
    }
    Ok(None)
}

/// The framing of a request's body.
pub(super) fn request_framing(head: &Head) -> Result<Framing, String> {
    let f = framing(&head.headers, "the request")?;
    if f == Some(Framing::Chunked) && head.version == "HTTP/1.0" {
        return Err("an HTTP/1.0 request has Transfer-Encoding, which HTTP/1.0 servers ignore; refused (request smuggling)".into());
    }
    Ok(f.unwrap_or(Framing::Empty))
}

/// A chunked body's parser: where it ends, and its payload.
#[derive(Debug, Default)]
pub(super) struct Chunked {
    state: ChunkState,
    line: Vec<u8>,
}

#[derive(Debug, Default, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    Data(u64),
    DataEnd(u8),
    Trailer,
    Done,
}

impl Chunked {
    /// Whether the last chunk and the trailers have been read.
    pub(super) fn done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Read from `data`: the payload goes to `out`; how many bytes of `data` belong to the
    /// body (fewer than all once it is done).
    pub(super) fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
        let mut i = 0;
        while i < data.len() {
            match &mut self.state {
                ChunkState::Done => break,
                ChunkState::Data(n) => {
                    let take = usize::try_from(*n)
                        .unwrap_or(usize::MAX)
                        .min(data.len() - i);
                    out.extend_from_slice(&data[i..i + take]);
                    i += take;
                    *n -= take as u64;
                    if *n == 0 {
                        self.state = ChunkState::DataEnd(0);
                    }
                }
                ChunkState::DataEnd(k) => {
                    let want = if *k == 0 { b'\r' } else { b'\n' };
                    if data[i] != want {
                        return Err("a chunk of the chunked body does not end with CRLF".into());
                    }
                    i += 1;
                    if *k == 0 {
                        *k = 1;
                    } else {
                        self.state = ChunkState::Size;
                    }
                }
                ChunkState::Size | ChunkState::Trailer => {
                    let b = data[i];
                    i += 1;
                    self.line.push(b);
                    if self.line.len() > MAX_CHUNK_LINE {
                        return Err("a line of the chunked body is too long".into());
                    }
                    if b != b'\n' {
                        continue;
                    }
                    let Some(line) = self.line.strip_suffix(b"\r\n") else {
                        return Err("a line of the chunked body ends with a bare LF".into());
                    };
                    let line = std::str::from_utf8(line)
                        .map_err(|_| "a line of the chunked body is not text".to_string())?
                        .to_string();
                    self.line.clear();
                    if line.contains(|c: char| c.is_control() && c != '\t') {
                        return Err("a line of the chunked body holds a bare CR".into());
                    }
                    self.state = if self.state == ChunkState::Trailer {
                        if line.is_empty() {
                            ChunkState::Done
                        } else {
                            ChunkState::Trailer
                        }
                    } else {
                        let size = line.split(';').next().unwrap_or("").trim_end();
                        if size.is_empty()
                            || size.len() > 15
                            || !size.bytes().all(|b| b.is_ascii_hexdigit())
                        {
                            return Err(format!("`{line}` is not a chunk size"));
                        }
                        match u64::from_str_radix(size, 16).map_err(|e| e.to_string())? {
                            0 => ChunkState::Trailer,
                            n => ChunkState::Data(n),
                        }
                    };
                }
            }
        }
        Ok(i)
    }
}

/// Forward a request body framed by `framing` from `client` (after `rest`, the bytes already
/// read) to `upstream`, and nothing after it: bytes past the body go to `surplus`. `sent`
/// counts what was forwarded.
pub(super) async fn forward_body<R, W>(
    client: &mut R,
    rest: Vec<u8>,
    upstream: &mut W,
    framing: Framing,
    surplus: &mut Vec<u8>,
    sent: &mut u64,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut remaining = match framing {
        Framing::Empty | Framing::Close => 0,
        Framing::Length(n) => n,
        Framing::Chunked => u64::MAX,
    };
    let mut chunked = (framing == Framing::Chunked).then(Chunked::default);
    let mut data = rest;
    let mut buf = vec![0u8; BUF];
    let mut sink = Vec::new();
    loop {
        let body = match &mut chunked {
            Some(c) => {
                sink.clear();
                let n = c.feed(&data, &mut sink)?;
                if c.done() {
                    remaining = 0;
                }
                n
            }
            None => usize::try_from(remaining)
                .unwrap_or(usize::MAX)
                .min(data.len()),
        };
        if chunked.is_none() {
            remaining -= body as u64;
        }
        upstream
            .write_all(&data[..body])
            .await
            .map_err(|e| format!("sending the request body failed ({e})"))?;
        *sent += body as u64;
        if remaining == 0 {
            surplus.extend_from_slice(&data[body..]);
            return Ok(());
        }
        let n = client
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading the request body failed ({e})"))?;
        if n == 0 {
            return Err(
                "the client closed the connection before the end of the request body".into(),
            );
        }
        data = buf[..n].to_vec();
    }
}

/// Relay the response from `upstream` to `client`. Without a scrubber the bytes go as they
/// are; with one (the host is bound to a credential) the head is parsed, a compressed body is
/// refused, and the head and the body are scrubbed on the way. Returns the bytes sent to the
/// client; `Err` says why the relay stopped (`true`: nothing was sent yet, the caller answers).
pub(super) async fn relay_response<R, W>(
    upstream: &mut R,
    client: &mut W,
    scrubber: Option<Scrubber>,
    host: &str,
    request: (&str, &str),
    timeout: Duration,
    received: &mut u64,
) -> Result<(), (String, bool)>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some(mut scrubber) = scrubber else {
        let mut buf = vec![0u8; BUF];
        loop {
            let n = upstream.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                return Ok(());
            }
            client
                .write_all(&buf[..n])
                .await
                .map_err(|e| (format!("the client went away ({e})"), false))?;
            *received += n as u64;
        }
    };
    let (method, version) = request;
    let mut pending = Vec::new();
    let (chunk_out, framing, head_out, rest) = loop {
        let (raw, rest) = read_raw(upstream, std::mem::take(&mut pending), timeout)
            .await
            .map_err(|why| (format!("the response from {host}: {why}"), *received == 0))?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (line, headers) = parse_lines(&text)
            .map_err(|why| (format!("the response from {host}: {why}"), *received == 0))?;
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .filter(|_| line.starts_with("HTTP/1."))
            .ok_or_else(|| {
                (
                    format!("`{line}` from {host} is not an HTTP/1 status line"),
                    *received == 0,
                )
            })?;
        if status == 101 {
            return Err((
                format!("{host} switched protocols, which the proxy does not relay"),
                *received == 0,
            ));
        }
        let coding = header_values(&headers, "content-encoding").join(", ");
        if let Some(why) = super::scrub::compressed(host, Some(&coding)) {
            return Err((why, *received == 0));
        }
        if (100..200).contains(&status) {
            let out = scrubber.whole(format!("{text}\r\n\r\n").as_bytes());
            client
                .write_all(&out)
                .await
                .map_err(|e| (e.to_string(), false))?;
            *received += out.len() as u64;
            pending = rest;
            continue;
        }
        let bodyless = method.eq_ignore_ascii_case("HEAD") || status == 204 || status == 304;
        let body_framing = match framing(&headers, "the response") {
            Err(why) => return Err((format!("{why} (from {host})"), *received == 0)),
            Ok(_) if bodyless => Framing::Empty,
            Ok(f) => f.unwrap_or(Framing::Close),
        };
        // The head the client gets: the body's framing is the proxy's own (scrubbing changes
        // its length), and the connection closes after it.
        let chunk_out = body_framing != Framing::Empty && version != "HTTP/1.0";
        let mut out = format!("{line}\r\n");
        for (k, v) in &headers {
            let hop = ["connection", "keep-alive", "transfer-encoding", "trailer"];
            let k_l = k.to_ascii_lowercase();
            if hop.contains(&k_l.as_str())
                || (k_l == "content-length" && body_framing != Framing::Empty)
            {
                continue;
            }
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        if chunk_out {
            out.push_str("Transfer-Encoding: chunked\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        let out = scrubber.whole(out.as_bytes());
        break (chunk_out, body_framing, out, rest);
    };
    let send = |data: Vec<u8>| {
        let mut framed = Vec::with_capacity(data.len() + 16);
        if chunk_out && !data.is_empty() {
            framed.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
            framed.extend_from_slice(&data);
            framed.extend_from_slice(b"\r\n");
        } else if !chunk_out {
            framed = data;
        }
        framed
    };
    client
        .write_all(&head_out)
        .await
        .map_err(|e| (e.to_string(), false))?;
    *received += head_out.len() as u64;
    let mut remaining = match framing {
        Framing::Length(n) => n,
        Framing::Empty => 0,
        _ => u64::MAX,
    };
    let mut chunked = (framing == Framing::Chunked).then(Chunked::default);
    let mut data = rest;
    let mut buf = vec![0u8; BUF];
    let mut payload = Vec::new();
    loop {
        payload.clear();
        match &mut chunked {
            Some(c) => {
                c.feed(&data, &mut payload)
                    .map_err(|why| (format!("the response from {host}: {why}"), false))?;
                if c.done() {
                    remaining = 0;
                }
            }
            None => {
                let take = usize::try_from(remaining)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                payload.extend_from_slice(&data[..take]);
                if framing != Framing::Close {
                    remaining -= take as u64;
                }
            }
        }
        let out = send(scrubber.push(&payload));
        client
            .write_all(&out)
            .await
            .map_err(|e| (e.to_string(), false))?;
        *received += out.len() as u64;
        if remaining == 0 {
            break;
        }
        let n = upstream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            if framing == Framing::Close {
                break;
            }
            // Not ending the chunked reply tells the client the body was cut short.
            return Err((
                format!("{host} closed the connection before the end of the response body"),
                false,
            ));
        }
        data = buf[..n].to_vec();
    }
    let mut out = send(scrubber.finish());
    if chunk_out {
        out.extend_from_slice(b"0\r\n\r\n");
    }
    client
        .write_all(&out)
        .await
        .map_err(|e| (e.to_string(), false))?;
    *received += out.len() as u64;
    let _ = client.flush().await;
    Ok(())
}

/// The request head to send upstream: origin-form target, hop-by-hop and proxy headers
/// dropped, one request per connection; `identity`: the response must not be compressed (the
/// host is bound to a credential, and its answer is scanned for the value).
pub(super) fn forward_head(head: &Head, identity: bool) -> Vec<u8> {
    let after_scheme = head.target.split_once("://").map(|(_, r)| r).unwrap_or("");
    let path = match after_scheme.find(['/', '?']) {
        Some(i) if after_scheme.as_bytes()[i] == b'/' => after_scheme[i..].to_string(),
        Some(i) => format!("/{}", &after_scheme[i..]),
        None => "/".to_string(),
    };
    let path = path.split('#').next().unwrap_or("/");
    let mut out = format!("{} {path} {}\r\n", head.method, head.version);
    // The Host header is the authority that was judged, whatever the client wrote.
    let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
    out.push_str(&format!("Host: {authority}\r\n"));
    let hop = [
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    ];
    for (k, v) in &head.headers {
        let k_l = k.to_ascii_lowercase();
        if hop.contains(&k_l.as_str()) || (identity && k_l == "accept-encoding") {
            continue;
        }
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if identity {
        out.push_str("Accept-Encoding: identity\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "http1_tests.rs"]
mod tests;
