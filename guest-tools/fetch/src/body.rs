//! What a response body is (an HTML page, other text, or binary) and its text.

use std::borrow::Cow;

use toolgate_guest::text;

/// What kind of body a response has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// An HTML page: converted unless `format` is `raw`.
    Html,
    /// Any other text (JSON, plain text, XML, CSS, ...): passed through as it is.
    Text,
    /// Not text: described, never shown. The description names the type.
    Binary(String),
}

/// Media types that are never text, whatever the bytes look like.
const BINARY_TYPES: &[&str] = &[
    "application/pdf",
    "application/octet-stream",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
    "application/x-bzip2",
    "application/x-xz",
    "application/x-7z-compressed",
    "application/x-rar-compressed",
    "application/vnd.rar",
    "application/zstd",
    "application/wasm",
    "application/java-archive",
    "application/x-msdownload",
    "application/msword",
    "application/x-sqlite3",
    "application/vnd.sqlite3",
    "application/x-protobuf",
    "application/protobuf",
    "application/x-shockwave-flash",
];

/// Media type prefixes that are never text.
const BINARY_PREFIXES: &[&str] = &[
    "image/",
    "audio/",
    "video/",
    "font/",
    "model/",
    "application/vnd.ms-",
    "application/vnd.openxmlformats-",
    "application/vnd.oasis.opendocument.",
];

/// File signatures: leading bytes and what they mean.
const SIGNATURES: &[(&[u8], &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\0asm", "a WebAssembly module"),
    (b"\x7fELF", "an ELF executable"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
];

/// Whether a media type (lower case, no parameters) is binary by its name.
pub fn is_binary_type(media: &str) -> bool {
    media != "image/svg+xml"
        && (BINARY_TYPES.contains(&media) || BINARY_PREFIXES.iter().any(|p| media.starts_with(p)))
}

/// What the body's first bytes say it is, when they are a known file signature.
pub fn signature(body: &[u8]) -> Option<&'static str> {
    if body.len() >= 12 && &body[..4] == b"RIFF" && &body[8..12] == b"WEBP" {
        return Some("a WebP image");
    }
    SIGNATURES
        .iter()
        .find(|(magic, _)| body.starts_with(magic))
        .map(|(_, what)| *what)
}

/// Whether the first 8 KiB are not text: a NUL byte, or more than one byte in eight that is
/// invalid UTF-8 or a control character other than whitespace (when the body is declared
/// Latin-1, any byte is a character: only control characters count).
pub fn looks_binary(body: &[u8], latin1: bool) -> bool {
    if text::has_nul_prefix(body) {
        return true;
    }
    let head = &body[..body.len().min(text::BINARY_SNIFF_BYTES)];
    if head.is_empty() {
        return false;
    }
    let control =
        |b: u8| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c | 0x1b) || b == 0x7f;
    let odd = if latin1 {
        head.iter().filter(|&&b| control(b)).count()
    } else {
        head.utf8_chunks()
            .map(|c| c.invalid().len() + c.valid().bytes().filter(|&b| control(b)).count())
            .sum()
    };
    odd * 8 > head.len()
}

/// The `charset` parameter of a `content-type`, lower case.
pub fn charset(content_type: Option<&str>) -> Option<String> {
    content_type?.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches('"').to_ascii_lowercase())
    })
}

/// The charset a body declares: the `content-type`'s, else a `<meta charset=...>` (or
/// `http-equiv` content) in the first 1024 bytes.
pub fn declared_charset(content_type: Option<&str>, body: &[u8]) -> Option<String> {
    if let Some(c) = charset(content_type) {
        return Some(c);
    }
    let head: Vec<u8> = body.iter().take(1024).map(u8::to_ascii_lowercase).collect();
    let at = head.windows(8).position(|w| w == b"charset=")? + 8;
    let name: String = head[at..]
        .iter()
        .skip_while(|&&b| b == b'"' || b == b'\'' || b == b' ')
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        .map(|&b| char::from(b))
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Whether a charset is one where every byte is one character (read as Latin-1).
pub fn is_latin1(charset: Option<&str>) -> bool {
    matches!(
        charset,
        Some(
            "iso-8859-1"
                | "iso8859-1"
                | "iso_8859-1"
                | "latin1"
                | "latin-1"
                | "l1"
                | "windows-1252"
                | "cp1252"
                | "x-cp1252"
                | "us-ascii"
                | "ascii"
        )
    )
}

/// Whether an untyped body is an HTML page: it starts (after a byte-order mark and
/// whitespace) with `<!doctype html`, `<html`, `<head` or `<body`.
pub fn sniff_html(body: &[u8]) -> bool {
    let b = body.strip_prefix(b"\xef\xbb\xbf").unwrap_or(body);
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let head: Vec<u8> = b[start..]
        .iter()
        .take(14)
        .map(u8::to_ascii_lowercase)
        .collect();
    [&b"<!doctype html"[..], b"<html", b"<head", b"<body"]
        .iter()
        .any(|p| head.starts_with(p))
}

/// Classify a body by its media type and its bytes.
pub fn classify(media: Option<&str>, charset: Option<&str>, body: &[u8]) -> Kind {
    let sig = signature(body);
    let declared_binary = media.is_some_and(is_binary_type);
    if declared_binary || sig.is_some() || looks_binary(body, is_latin1(charset)) {
        let mut what = media.unwrap_or("unknown type").to_string();
        if let Some(s) = sig {
            what.push_str(&format!(" ({s})"));
        }
        return Kind::Binary(what);
    }
    match media {
        Some("text/html" | "application/xhtml+xml") => Kind::Html,
        None => {
            if sniff_html(body) {
                Kind::Html
            } else {
                Kind::Text
            }
        }
        Some(_) => Kind::Text,
    }
}

/// windows-1252's characters for the bytes 0x80 to 0x9F (the rest are Latin-1's); bytes it
/// leaves undefined stay the C1 control characters, as browsers do.
const CP1252_HIGH: [char; 32] = [
    '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8d}', 'Ž', '\u{8f}',
    '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9d}', 'ž', 'Ÿ',
];

/// The body as text: UTF-8 (invalid bytes replaced), or windows-1252 when the charset is one
/// of the Latin-1 labels (which browsers also read as windows-1252).
pub fn decode<'a>(body: &'a [u8], charset: Option<&str>) -> Cow<'a, str> {
    match std::str::from_utf8(body) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) if is_latin1(charset) => Cow::Owned(
            body.iter()
                .map(|&b| match b {
                    0x80..=0x9f => CP1252_HIGH[usize::from(b - 0x80)],
                    _ => char::from(b),
                })
                .collect(),
        ),
        Err(_) => String::from_utf8_lossy(body),
    }
}
