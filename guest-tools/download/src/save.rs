//! The download itself, over any way of opening one request ([`Open`]): redirects followed by
//! the SDK's [`fetch_with`] (every hop a new request the host checks), the final body streamed
//! into a temporary file with its sha256, and the file renamed over the target only when the
//! whole body arrived within the cap. On any failure the temporary file is removed here; the
//! host removes it too after the call, for a guest that was stopped mid-download.

use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;
use toolgate_guest::http::{fetch_with, is_redirect, HttpError, Request, Response, Url};

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: u32 = 5;
/// Bytes of a failed response's body kept for the error message.
const SNIPPET_BYTES: usize = 1024;

/// The body of one response, read a chunk at a time.
pub trait BodyReader {
    /// The next chunk (`None`: the body is complete). An error means the body did not arrive
    /// whole: the server closed early, the host's byte budget or a timeout ended it.
    fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpError>;
}

/// A response head and its body, not read yet.
pub struct Head {
    /// The status code.
    pub status: u16,
    /// Response headers (names lower-case), in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Box<dyn BodyReader>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Send one request and return its head (the transport: `wasi:http` in a component).
pub type Open<'a> = dyn FnMut(&Request) -> Result<Head, HttpError> + 'a;

/// A body that landed in the temporary file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Landed {
    /// Bytes written.
    pub bytes: u64,
    /// Hex sha256 of those bytes.
    pub sha256: String,
    /// The final response's status (2xx).
    pub status: u16,
    /// Its headers.
    pub headers: Vec<(String, String)>,
    /// The URL the body came from (after redirects).
    pub final_url: String,
    /// The URLs redirected to, in order.
    pub redirects: Vec<String>,
}

impl Landed {
    /// The first value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a download failed: a stable code, the message, and how far it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    /// `too-large`, `bad-status`, `write-error`, or the `wasi:http` code of a network error.
    pub code: String,
    /// What went wrong (the caller adds what was, or was not, written).
    pub message: String,
    /// The status of the final response, when one came.
    pub status: Option<u16>,
    /// Body bytes received before it failed.
    pub received: u64,
}

/// The state of the one body being written, shared by every hop of [`fetch_with`].
struct Sink<'f> {
    file: &'f mut File,
    hasher: Sha256,
    written: u64,
    max_bytes: u64,
    status: Option<u16>,
    /// A failure that is not an HTTP error (the cap, a write), kept whole.
    failed: Option<Failed>,
}

impl Sink<'_> {
    fn fail(&mut self, code: &str, message: String) -> HttpError {
        self.failed = Some(Failed {
            code: code.to_string(),
            message: message.clone(),
            status: self.status,
            received: self.written,
        });
        HttpError::new(code, message)
    }

    /// One hop: a redirect or a failure status is returned as it is (a failure with the start
    /// of its body); a success has its body streamed into the file.
    fn hop(&mut self, req: &Request, open: &mut Open<'_>) -> Result<Response, HttpError> {
        let mut head = open(req)?;
        let response = |head: &Head, body: Vec<u8>, seen: u64| Response {
            status: head.status,
            headers: head.headers.clone(),
            body,
            truncated: false,
            body_bytes_seen: seen,
            url: req.url.clone(),
            redirects: Vec::new(),
        };
        let location = head
            .header("location")
            .is_some_and(|l| !l.trim().is_empty());
        if is_redirect(head.status) && location {
            return Ok(response(&head, Vec::new(), 0));
        }
        if !(200..300).contains(&head.status) || head.status == 206 {
            // The start of the body says why (an error page); a body that fails is no reason
            // to hide the status.
            let mut snippet = Vec::new();
            while snippet.len() < SNIPPET_BYTES {
                match head.body.next_chunk() {
                    Ok(Some(chunk)) => snippet.extend_from_slice(&chunk),
                    Ok(None) | Err(_) => break,
                }
            }
            snippet.truncate(SNIPPET_BYTES);
            return Ok(response(&head, snippet, 0));
        }
        self.status = Some(head.status);
        let host = Url::parse(&req.url).map(|u| u.host).unwrap_or_default();
        let announced = head
            .header("content-length")
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(len) = announced.filter(|&n| n > self.max_bytes) {
            return Err(self.fail(
                "too-large",
                format!(
                    "{host} announced {len} bytes (Content-Length) for {}, more than max_bytes={}",
                    req.url, self.max_bytes
                ),
            ));
        }
        loop {
            let chunk = match head.body.next_chunk() {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) => {
                    let message = match announced {
                        Some(len) if e.code == "connection-terminated" => format!(
                            "{host} sent {} of the {len} bytes it announced for {}, then the body broke off{}",
                            self.written,
                            req.url,
                            detail(&e.message)
                        ),
                        _ => e.message.clone(),
                    };
                    self.failed = Some(Failed {
                        code: e.code.clone(),
                        message,
                        status: self.status,
                        received: self.written,
                    });
                    return Err(e);
                }
            };
            let len = chunk.len() as u64;
            if self.written + len > self.max_bytes {
                return Err(self.fail(
                    "too-large",
                    format!(
                        "the body of {} from {host} is longer than max_bytes={} (the download was stopped after {} bytes)",
                        req.url,
                        self.max_bytes,
                        self.written + len
                    ),
                ));
            }
            if let Err(e) = self.file.write_all(&chunk) {
                return Err(self.fail(
                    "write-error",
                    format!(
                        "writing the download failed after {} bytes: {}",
                        self.written,
                        toolgate_guest::plain_io_error(&e)
                    ),
                ));
            }
            self.hasher.update(&chunk);
            self.written += len;
        }
        if let Some(len) = announced.filter(|&n| n != self.written) {
            return Err(self.fail(
                "connection-terminated",
                format!(
                    "{host} announced {len} bytes for {} but sent {}; the body was cut short",
                    req.url, self.written
                ),
            ));
        }
        Ok(response(&head, Vec::new(), self.written))
    }
}

/// Get `url` (following redirects) into the new file `temp`, at most `max_bytes` of body. The
/// file holds the whole body when this returns `Ok`; on `Err` it has been removed.
pub fn download_to(
    url: &str,
    headers: &[(&str, &str)],
    max_bytes: u64,
    temp: &Path,
    open: &mut Open<'_>,
) -> Result<Landed, Failed> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| Failed {
            code: "write-error".into(),
            message: format!(
                "cannot create the temporary file beside the target: {}",
                toolgate_guest::plain_io_error(&e)
            ),
            status: None,
            received: 0,
        })?;
    let result = fetch_into(url, headers, max_bytes, &mut file, open);
    let result = result.and_then(|landed| match finish(file) {
        Ok(()) => Ok(landed),
        Err(e) => Err(Failed {
            code: "write-error".into(),
            message: format!(
                "saving the download failed: {}",
                toolgate_guest::plain_io_error(&e)
            ),
            status: Some(landed.status),
            received: landed.bytes,
        }),
    });
    if result.is_err() {
        let _ = fs::remove_file(temp);
    }
    result
}

fn fetch_into(
    url: &str,
    headers: &[(&str, &str)],
    max_bytes: u64,
    file: &mut File,
    open: &mut Open<'_>,
) -> Result<Landed, Failed> {
    let mut req = Request::get(url);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    let mut sink = Sink {
        file,
        hasher: Sha256::new(),
        written: 0,
        max_bytes,
        status: None,
        failed: None,
    };
    let result = fetch_with(req, MAX_REDIRECTS, |r| sink.hop(r, open));
    let resp = match result {
        Ok(resp) => resp,
        Err(e) => {
            return Err(sink.failed.take().unwrap_or(Failed {
                code: e.code,
                message: e.message,
                status: None,
                received: 0,
            }))
        }
    };
    if sink.status.is_none() {
        // The last hop was not a success: nothing was written.
        let reason = reason_phrase(resp.status);
        let mut message = format!(
            "{} answered {}{} for {}",
            Url::parse(&resp.url).map(|u| u.host).unwrap_or_default(),
            resp.status,
            if reason.is_empty() {
                String::new()
            } else {
                format!(" {reason}")
            },
            resp.url
        );
        if is_redirect(resp.status) {
            message.push_str(" without a Location to follow");
        }
        let text = String::from_utf8_lossy(&resp.body);
        let text: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !text.is_empty() {
            let cut: String = text.chars().take(300).collect();
            message.push_str(&format!(" (the body begins: {cut:?})"));
        }
        return Err(Failed {
            code: "bad-status".into(),
            message,
            status: Some(resp.status),
            received: 0,
        });
    }
    let digest = std::mem::take(&mut sink.hasher).finalize();
    Ok(Landed {
        bytes: sink.written,
        sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
        status: resp.status,
        headers: resp.headers,
        final_url: resp.url,
        redirects: resp.redirects,
    })
}

/// The last parenthesised part of a message, with a space before it (`""` when there is none).
fn detail(message: &str) -> String {
    match (message.rfind('('), message.ends_with(')')) {
        (Some(i), true) => format!(" {}", &message[i..]),
        _ => String::new(),
    }
}

/// Flush the file to the disk: a full disk is a failure; a sandbox that cannot sync is not (the
/// rename still makes the file all-or-nothing).
fn finish(mut file: File) -> std::io::Result<()> {
    file.flush()?;
    match file.sync_all() {
        Err(e) if e.kind() == ErrorKind::StorageFull => Err(e),
        _ => Ok(()),
    }
}

/// The usual reason phrase of a status, for messages.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        204 => "No Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        410 => "Gone",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}
