//! Taking brokered credentials out of what a bound host answers, before a command or a guest
//! sees it.
//!
//! A host a credential is bound to receives the real value, and may give it back: an endpoint
//! that echoes request headers, an error page quoting them, a value it kept from an earlier
//! request. Every response from such a host (whether or not this request carried the value)
//! is scanned for every form of every credential's value ([`crate::text::forms::forms`]: raw,
//! JSON-escaped, percent-encoded, base64 at any offset, hex), in its head and on its body's
//! stream, and each form found is replaced by the credential's placeholder. The stream keeps a
//! carry-over window as long as the longest form, so a value split across reads is still found.
//! Compression would hide the value from the scan: requests to bound hosts ask for
//! `Accept-Encoding: identity`, and a compressed response is refused, not relayed.

use super::creds::Credential;
use bytes::Bytes;
use http_body::{Body, Frame};
use std::pin::Pin;
use std::task::{Context, Poll};
use wasmtime_wasi_http::Error as HttpError;

/// Values shorter than this are not scrubbed (as in the audit's `state::secrets`): they would
/// turn ordinary text into placeholders. They are still never given to a command or a guest.
const MIN_VALUE: usize = 4;

/// A scanner for every form of a set of credentials' values, for one response.
#[derive(Clone)]
pub struct Scrubber {
    /// (form, placeholder), longest form first.
    forms: Vec<(Vec<u8>, Vec<u8>)>,
    /// Bytes that may start a form.
    first: [bool; 256],
    longest: usize,
    /// Undecided bytes kept from the last push (shorter than the longest form).
    carry: Vec<u8>,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the forms: they are the secret.
        f.debug_struct("Scrubber")
            .field("forms", &self.forms.len())
            .finish()
    }
}

impl Scrubber {
    /// A scanner for every value of `creds` (`None`: no credential has a value long enough).
    pub fn new(creds: &[Credential]) -> Option<Scrubber> {
        let mut forms: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for c in creds {
            let Ok(v) = &c.value else { continue };
            if v.len() < MIN_VALUE {
                continue;
            }
            let ph = c.placeholder().into_bytes();
            for f in crate::text::forms::forms(v) {
                if !forms.iter().any(|(g, _)| *g == f.as_bytes()) {
                    forms.push((f.into_bytes(), ph.clone()));
                }
            }
        }
        if forms.is_empty() {
            return None;
        }
        forms.sort_by_key(|(f, _)| std::cmp::Reverse(f.len()));
        let mut first = [false; 256];
        for (f, _) in &forms {
            first[usize::from(f[0])] = true;
        }
        let longest = forms[0].0.len();
        Some(Scrubber {
            forms,
            first,
            longest,
            carry: Vec::new(),
        })
    }

    /// `data` scanned whole (a response head, a header value).
    pub fn whole(&self, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len());
        self.scan(data, data.len(), &mut out);
        out
    }

    /// Whether `data` holds any form.
    pub fn found_in(&self, data: &[u8]) -> bool {
        self.whole(data) != data
    }

    /// The next part of a stream: what can be decided now (the last bytes, which may be the
    /// start of a form that continues in the next part, are kept until then).
    pub fn push(&mut self, data: &[u8]) -> Vec<u8> {
        self.carry.extend_from_slice(data);
        let decide = self.carry.len().saturating_sub(self.longest - 1);
        let mut out = Vec::with_capacity(self.carry.len());
        let buf = std::mem::take(&mut self.carry);
        let used = self.scan(&buf, decide, &mut out);
        self.carry = buf[used..].to_vec();
        out
    }

    /// The end of the stream: what was kept back, scanned.
    pub fn finish(&mut self) -> Vec<u8> {
        let buf = std::mem::take(&mut self.carry);
        let mut out = Vec::with_capacity(buf.len());
        self.scan(&buf, buf.len(), &mut out);
        out
    }

    /// Replace every form starting before `decide` in `buf`, appending to `out`; how many
    /// bytes of `buf` were used (at least `decide`, more when a form ran past it).
    fn scan(&self, buf: &[u8], decide: usize, out: &mut Vec<u8>) -> usize {
        let (mut i, mut plain) = (0, 0);
        while i < decide {
            if self.first[usize::from(buf[i])] {
                let rest = &buf[i..];
                if let Some((f, ph)) = self.forms.iter().find(|(f, _)| rest.starts_with(f)) {
                    out.extend_from_slice(&buf[plain..i]);
                    out.extend_from_slice(ph);
                    i += f.len();
                    plain = i;
                    continue;
                }
            }
            i += 1;
        }
        out.extend_from_slice(&buf[plain..i]);
        i
    }
}

/// `text` with every real value of `creds`, in every form it takes
/// ([`crate::text::forms::forms`]: JSON-escaped, percent-encoded, base64, hex), replaced by
/// its placeholder (`None`: none was in it).
pub fn scrub(creds: &[Credential], text: &str) -> Option<String> {
    scrub_with(&Scrubber::new(creds)?, text)
}

/// [`scrub`] with a scanner made once for many texts.
pub fn scrub_with(scrubber: &Scrubber, text: &str) -> Option<String> {
    let out = scrubber.whole(text.as_bytes());
    (out != text.as_bytes()).then(|| String::from_utf8_lossy(&out).into_owned())
}

/// Every credential's values, when `host:port` (in either scheme) is one a credential is bound
/// to (`None`: it is not, or no value is long enough to scan for).
pub fn for_host(creds: &[Credential], host: &str, port: u16) -> Option<Scrubber> {
    bound_here(creds, host, port)?;
    Scrubber::new(creds)
}

/// The name of a credential bound to `host:port`, in either scheme.
pub fn bound_here<'a>(creds: &'a [Credential], host: &str, port: u16) -> Option<&'a str> {
    creds
        .iter()
        .find(|c| {
            c.hosts
                .iter()
                .any(|p| p.matches("http", host, port) || p.matches("https", host, port))
        })
        .map(|c| c.name.as_str())
}

/// Why a response with `Content-Encoding: coding` from a bound host is not relayed (`None`:
/// no coding, or `identity`).
pub fn compressed(host: &str, coding: Option<&str>) -> Option<String> {
    let coding = coding.map(str::trim).filter(|c| !c.is_empty())?;
    if coding.eq_ignore_ascii_case("identity") {
        return None;
    }
    Some(format!(
        "the response from {host} is compressed (Content-Encoding: {coding}); a credential is bound to {host}, so everything it answers is scanned for the credential's value, which compressed bytes would hide: it was not relayed (the request asked for Accept-Encoding: identity and the server ignored it)"
    ))
}

/// A `wasi:http` response from a bound host with its head scrubbed and its body scrubbed on
/// the way (`Err`: why it is refused). `Content-Length` is dropped (scrubbing changes the
/// length) and trailers are not passed on.
pub fn response<B>(
    host: &str,
    scrubber: Scrubber,
    response: http::Response<B>,
) -> Result<http::Response<Scrubbed<B>>, String> {
    let coding = response
        .headers()
        .get_all(http::header::CONTENT_ENCODING)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    if let Some(why) = compressed(host, Some(&coding)) {
        return Err(why);
    }
    let (mut parts, body) = response.into_parts();
    let mut headers = http::HeaderMap::new();
    for (k, v) in parts.headers.iter() {
        if k == http::header::CONTENT_LENGTH {
            continue;
        }
        let name = scrubber.whole(k.as_str().as_bytes());
        let value = scrubber.whole(v.as_bytes());
        let (Ok(name), Ok(value)) = (
            http::header::HeaderName::from_bytes(&name),
            http::header::HeaderValue::from_bytes(&value),
        ) else {
            return Err(format!(
                "a header of the response from {host} is not valid once its credential is replaced"
            ));
        };
        headers.append(name, value);
    }
    parts.headers = headers;
    Ok(http::Response::from_parts(
        parts,
        Scrubbed {
            inner: body,
            scrubber,
            done: false,
        },
    ))
}

/// A response body with every credential form replaced on the way.
pub struct Scrubbed<B> {
    inner: B,
    scrubber: Scrubber,
    done: bool,
}

impl<B> Body for Scrubbed<B>
where
    B: Body<Data = Bytes, Error = HttpError> + Unpin,
{
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, HttpError>>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers are headers a scan of the body would not see: dropped.
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let out = self.scrubber.push(&data);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                }
                Poll::Ready(None) => {
                    self.done = true;
                    let out = self.scrubber.finish();
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "scrub_tests.rs"]
mod tests;
