//! LSP base protocol framing: `Content-Length: N\r\n\r\n` then N bytes of JSON, bounded.

use serde_json::Value;
use std::io::{BufRead, Write};

/// Largest message accepted from a server (a workspace's symbols can be large; a flood is not).
pub const MAX_MESSAGE: usize = 16 << 20;

/// Largest header block.
const MAX_HEADER: usize = 8 << 10;

/// Why a message could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The server closed its output.
    Closed,
    /// The stream is not LSP framing, or a message is over the limit: what was wrong.
    Bad(String),
}

/// Read one message.
pub fn read_message(r: &mut impl BufRead) -> Result<Value, ReadError> {
    let mut length: Option<usize> = None;
    let mut header_bytes = 0usize;
    loop {
        let mut line = Vec::new();
        let n = std::io::Read::take(
            &mut *r,
            (MAX_HEADER - header_bytes.min(MAX_HEADER)) as u64 + 1,
        )
        .read_until(b'\n', &mut line)
        .map_err(|e| ReadError::Bad(format!("reading from the language server: {e}")))?;
        if n == 0 {
            return Err(ReadError::Closed);
        }
        header_bytes += n;
        if header_bytes > MAX_HEADER || !line.ends_with(b"\n") {
            return Err(ReadError::Bad(format!(
                "the language server sent a header block over {} KiB",
                MAX_HEADER >> 10
            )));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(ReadError::Bad(format!(
                "the language server sent `{}`, not an LSP header",
                text.escape_debug()
            )));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let v = value.trim().parse::<usize>().map_err(|_| {
                ReadError::Bad(format!(
                    "`Content-Length: {}` is not a number",
                    value.trim()
                ))
            })?;
            length = Some(v);
        }
    }
    let length = length.ok_or_else(|| {
        ReadError::Bad("a message from the language server had no Content-Length".into())
    })?;
    if length > MAX_MESSAGE {
        return Err(ReadError::Bad(format!(
            "the language server sent a message of {length} bytes, over the {} MiB limit",
            MAX_MESSAGE >> 20
        )));
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body).map_err(|_| ReadError::Closed)?;
    serde_json::from_slice(&body).map_err(|e| {
        ReadError::Bad(format!(
            "a message from the language server is not JSON: {e}"
        ))
    })
}

/// Write one message.
pub fn write_message(w: &mut impl Write, msg: &Value) -> std::io::Result<()> {
    let body = serde_json::to_vec(msg)?;
    write!(w, "Content-Length: {}\r\n\r\n", body.len())?;
    w.write_all(&body)?;
    w.flush()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn framed(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write_message(&mut out, v).unwrap();
        out
    }

    #[test]
    fn messages_round_trip_back_to_back() {
        let mut bytes = framed(&json!({"id": 1, "result": "é"}));
        bytes.extend(framed(&json!({"method": "x"})));
        let mut r = std::io::BufReader::new(&bytes[..]);
        assert_eq!(read_message(&mut r).unwrap()["result"], "é");
        assert_eq!(read_message(&mut r).unwrap()["method"], "x");
        assert_eq!(read_message(&mut r), Err(ReadError::Closed));
    }

    #[test]
    fn oversized_garbage_and_missing_length_are_refused_in_words() {
        let big = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE + 1);
        let e = read_message(&mut big.as_bytes()).unwrap_err();
        assert!(
            matches!(&e, ReadError::Bad(w) if w.contains("MiB limit")),
            "{e:?}"
        );
        let e = read_message(&mut &b"hello world\r\n\r\n"[..]).unwrap_err();
        assert!(
            matches!(&e, ReadError::Bad(w) if w.contains("not an LSP header")),
            "{e:?}"
        );
        let e = read_message(&mut &b"X-Other: 1\r\n\r\n{}"[..]).unwrap_err();
        assert!(
            matches!(&e, ReadError::Bad(w) if w.contains("no Content-Length")),
            "{e:?}"
        );
        let flood = vec![b'a'; MAX_HEADER * 4];
        let e = read_message(&mut &flood[..]).unwrap_err();
        assert!(
            matches!(&e, ReadError::Bad(w) if w.contains("header block")),
            "{e:?}"
        );
    }
}
