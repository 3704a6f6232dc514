//! Text helpers shared by the tools: binary detection, line endings, visible whitespace.

/// How many leading bytes are inspected to decide whether a file is binary.
pub const BINARY_SNIFF_BYTES: usize = 8192;

/// Whether `bytes` look like a binary file: a NUL byte in the first [`BINARY_SNIFF_BYTES`], or
/// text that is not UTF-8 there (allowing a character cut at the end of the window).
pub fn is_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(BINARY_SNIFF_BYTES)];
    if memchr_nul(head) {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        // A multi-byte character cut by the window is fine; anything else is not text.
        Err(e) => e.error_len().is_some(),
    }
}

fn memchr_nul(bytes: &[u8]) -> bool {
    bytes.contains(&0)
}

/// Whether the text uses CRLF line endings (the first line ending decides).
pub fn uses_crlf(text: &str) -> bool {
    match text.find('\n') {
        Some(i) => i > 0 && text.as_bytes()[i - 1] == b'\r',
        None => false,
    }
}

/// Make invisible characters visible, for diagnostics: tab `→`, carriage return `␍`,
/// a trailing space `·`, and other control or unusual space characters as `\u{XXXX}`.
pub fn visible(line: &str) -> String {
    let trimmed_len = line.trim_end_matches(' ').len();
    let mut out = String::with_capacity(line.len() + 8);
    for (i, c) in line.char_indices() {
        match c {
            '\t' => out.push('→'),
            '\r' => out.push('␍'),
            ' ' if i >= trimmed_len => out.push('·'),
            ' ' => out.push(' '),
            c if c.is_control() || (c.is_whitespace() && c != ' ') || is_invisible(c) => {
                out.push_str(&format!("\\u{{{:04X}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{00AD}'
    )
}

/// Whether a NUL byte occurs in the first [`BINARY_SNIFF_BYTES`] of `bytes` (the test `grep`
/// uses, like ripgrep: text that is not UTF-8 is still searched).
pub fn has_nul_prefix(bytes: &[u8]) -> bool {
    memchr_nul(&bytes[..bytes.len().min(BINARY_SNIFF_BYTES)])
}

/// `line` cut to at most `max_chars` characters: the kept prefix, and the line's full length
/// in characters when it was cut (`None` when the whole line fits).
pub fn cut_chars(line: &str, max_chars: usize) -> (&str, Option<usize>) {
    if line.len() <= max_chars {
        return (line, None);
    }
    match line.char_indices().nth(max_chars) {
        Some((i, _)) => (&line[..i], Some(line.chars().count())),
        None => (line, None),
    }
}
