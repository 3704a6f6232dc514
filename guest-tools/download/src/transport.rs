//! One request through `wasi:http`, its body left unread for [`crate::save`] to stream. The
//! SDK's client reads a whole body into memory; this reads it a chunk at a time.

use crate::save::Head;
use toolgate_guest::http::{HttpError, Request};

/// Send `req` (a GET) and return the response head with its body unread.
#[cfg(not(target_arch = "wasm32"))]
pub fn open(req: &Request) -> Result<Head, HttpError> {
    Err(HttpError::new(
        "unsupported",
        format!(
            "cannot request {}: HTTP is only available inside a wasm32-wasip2 component",
            req.url
        ),
    ))
}

/// Send `req` (a GET) and return the response head with its body unread.
#[cfg(target_arch = "wasm32")]
pub fn open(req: &Request) -> Result<Head, HttpError> {
    wasi::open(req)
}

/// A `wasi:http` error code as `(code, message)`: the code is the WIT name
/// (`destination-ip-prohibited`), the message names the host and says what to do.
pub fn describe(code_debug: &str, raw: &str, host: &str) -> (String, String) {
    let code = kebab(code_debug);
    let message = match code.as_str() {
        "http-request-denied" => format!(
            "the host refused the request to {raw}: `download:{host}` is not allowed (a redirect is followed only to a host already allowed for download; download that URL in a call of its own, which is asked about)"
        ),
        "destination-ip-prohibited" => format!(
            "the host refused {raw}: {host} resolves to a private, loopback or link-local address, which the policy does not allow (the policy's `[network] allow_private` would have to name it)"
        ),
        "dns-error" | "destination-not-found" | "destination-unavailable" => {
            format!("could not reach {host} for {raw}; check the host name")
        }
        "connection-refused" => format!(
            "{host} refused the connection for {raw}; check the port and whether the service is up"
        ),
        "connection-terminated" | "http-protocol-error" | "http-response-incomplete" => format!(
            "the connection to {host} ended before the whole body of {raw} arrived"
        ),
        "dns-timeout"
        | "connection-timeout"
        | "connection-read-timeout"
        | "connection-write-timeout"
        | "http-response-timeout" => format!(
            "the download of {raw} timed out ({code}): {host} stopped sending, or the call's time limit ran out"
        ),
        "http-response-body-size" => format!(
            "the body of {raw} is larger than the host lets one download deliver (the policy's `[network] max_response_bytes`, or this call's `max_bytes`)"
        ),
        "tls-protocol-error" | "tls-certificate-error" | "tls-alert-received" => format!(
            "the TLS connection to {host} failed for {raw} ({code}); its certificate or TLS setup is not accepted"
        ),
        _ => format!("the request to {raw} failed ({code_debug})"),
    };
    let code = if code == "http-response-body-size" {
        "too-large".to_string()
    } else {
        code
    };
    (code, message)
}

/// A body read that failed without a `wasi:http` error code, from the host's words (its body
/// budget ends a body this way).
pub fn describe_stream_error(debug: &str, raw: &str, host: &str) -> (String, String) {
    let lower = debug.to_ascii_lowercase();
    if lower.contains("body size") {
        let (code, message) = describe("HttpResponseBodySize", raw, host);
        return (code, format!("{message} ({debug})"));
    }
    if lower.contains("timed out") || lower.contains("timeout") {
        return describe("ConnectionReadTimeout", raw, host);
    }
    (
        "connection-terminated".to_string(),
        format!("reading the body of {raw} from {host} failed ({debug})"),
    )
}

/// `ErrorCode::DestinationIpProhibited` or `HttpResponseBodySize(Some(5))` as
/// `destination-ip-prohibited` / `http-response-body-size`.
fn kebab(debug: &str) -> String {
    let name = debug.split('(').next().unwrap_or(debug);
    let name = name.rsplit("::").next().unwrap_or(name).trim();
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(target_arch = "wasm32")]
mod wasi {
    use super::{describe, describe_stream_error};
    use crate::save::{BodyReader, Head};
    use toolgate_guest::http::{HttpError, Request, Url};
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, FutureIncomingResponse, IncomingBody, IncomingResponse, Method,
        OutgoingBody, OutgoingRequest, Scheme,
    };
    use wasip2::io::streams::{InputStream, StreamError};

    /// Bytes asked for per read of the body.
    const READ_CHUNK: u64 = 64 * 1024;

    fn from_code(raw: &str, url: &Url, c: &ErrorCode) -> HttpError {
        let (code, message) = describe(&format!("{c:?}"), raw, &url.host);
        HttpError::new(code, message)
    }

    fn internal(raw: &str, what: &str) -> HttpError {
        HttpError::new(
            "internal-error",
            format!("the request to {raw} failed: {what}"),
        )
    }

    pub(super) fn open(req: &Request) -> Result<Head, HttpError> {
        let raw = req.url.as_str();
        let url = Url::parse(raw)?;
        let fields = Fields::new();
        for (name, value) in &req.headers {
            fields.append(name, value.as_bytes()).map_err(|_| {
                HttpError::new(
                    "bad-header",
                    format!("the host does not let the download send header `{name}`"),
                )
            })?;
        }
        let request = OutgoingRequest::new(fields);
        let bad = |what: &str| {
            HttpError::new(
                "bad-url",
                format!("the host rejected the {what} of {raw}; check the URL"),
            )
        };
        request
            .set_method(&Method::Get)
            .map_err(|()| bad("method"))?;
        let scheme = if url.scheme == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        };
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
            .map_err(|()| internal(raw, "the request body was already taken"))?;
        let future =
            outgoing_handler::handle(request, None).map_err(|c| from_code(raw, &url, &c))?;
        if let Err(c) = OutgoingBody::finish(body, None) {
            // A refused request fails the body too; the response says why.
            return Err(match wait(&future, raw, &url) {
                Err(e) => e,
                Ok(_) => from_code(raw, &url, &c),
            });
        }
        let incoming = wait(&future, raw, &url)?;
        drop(future);
        let status = incoming.status();
        let headers: Vec<(String, String)> = incoming
            .headers()
            .entries()
            .into_iter()
            .map(|(n, v)| {
                (
                    n.to_ascii_lowercase(),
                    String::from_utf8_lossy(&v).into_owned(),
                )
            })
            .collect();
        let body = incoming
            .consume()
            .map_err(|()| internal(raw, "the response body was already taken"))?;
        let stream = body
            .stream()
            .map_err(|()| internal(raw, "the response body stream was already taken"))?;
        Ok(Head {
            status,
            headers,
            body: Box::new(Body {
                stream: Some(stream),
                body: Some(body),
                incoming: Some(incoming),
                raw: raw.to_string(),
                url,
            }),
        })
    }

    fn wait(
        future: &FutureIncomingResponse,
        raw: &str,
        url: &Url,
    ) -> Result<IncomingResponse, HttpError> {
        loop {
            match future.get() {
                Some(Ok(Ok(resp))) => return Ok(resp),
                Some(Ok(Err(code))) => return Err(from_code(raw, url, &code)),
                Some(Err(())) => return Err(internal(raw, "the response was already taken")),
                None => future.subscribe().block(),
            }
        }
    }

    /// The body's resources, dropped child first (the stream, the body, the response).
    struct Body {
        stream: Option<InputStream>,
        body: Option<IncomingBody>,
        incoming: Option<IncomingResponse>,
        raw: String,
        url: Url,
    }

    impl Drop for Body {
        fn drop(&mut self) {
            drop(self.stream.take());
            drop(self.body.take());
            drop(self.incoming.take());
        }
    }

    impl BodyReader for Body {
        fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
            let Some(stream) = self.stream.as_ref() else {
                return Ok(None);
            };
            loop {
                match stream.blocking_read(READ_CHUNK) {
                    Ok(chunk) if chunk.is_empty() => continue,
                    Ok(chunk) => return Ok(Some(chunk)),
                    Err(StreamError::Closed) => {
                        drop(self.stream.take());
                        return Ok(None);
                    }
                    Err(StreamError::LastOperationFailed(err)) => {
                        return Err(match wasip2::http::types::http_error_code(&err) {
                            Some(code) => from_code(&self.raw, &self.url, &code),
                            None => {
                                let (code, message) = describe_stream_error(
                                    &err.to_debug_string(),
                                    &self.raw,
                                    &self.url.host,
                                );
                                HttpError::new(code, message)
                            }
                        })
                    }
                }
            }
        }
    }
}
