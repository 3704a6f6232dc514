//! Reading names and values: byte classes, where a value ends, and whether a value reads as a
//! credential or as a reference to one.

use super::MAX_RULE_READ;

pub(super) fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub(super) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Base64 and base64url characters (padding only at the end, see [`token_end`]).
pub(super) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'-')
}

pub(super) fn token_end(b: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < b.len() && is_token_byte(b[j]) {
        j += 1;
    }
    while j < b.len() && b[j] == b'=' {
        j += 1;
    }
    j
}

/// Skip spaces and tabs; returns how many.
pub(super) fn skip_spaces(b: &[u8], j: &mut usize) -> usize {
    let start = *j;
    while *j < b.len() && (b[*j] == b' ' || b[*j] == b'\t') {
        *j += 1;
    }
    *j - start
}

/// The end of a value quoted by `q` starting at `start`: the closing quote (a backslash
/// escapes it), the end of the line, or [`MAX_RULE_READ`] bytes.
pub(super) fn quoted_end(b: &[u8], start: usize, q: u8) -> usize {
    let limit = (start + MAX_RULE_READ).min(b.len());
    let mut j = start;
    while j < limit {
        match b[j] {
            b'\\' if j + 1 < limit => j += 2,
            c if c == q || c == b'\n' => return j,
            _ => j += 1,
        }
    }
    limit.min(b.len())
}

/// The end of an unquoted value: whitespace, a quote, or a separator of URLs, shells and
/// lists. Always at an ASCII byte or the end, so a char boundary.
pub(super) fn unquoted_end(b: &[u8], start: usize) -> usize {
    let limit = (start + MAX_RULE_READ).min(b.len());
    let mut j = start;
    while j < limit {
        let c = b[j];
        if c.is_ascii_whitespace()
            || matches!(
                c,
                b'"' | b'\'' | b'`' | b'&' | b';' | b',' | b'#' | b')' | b'}' | b']' | b'<' | b'>'
            )
        {
            return j;
        }
        j += 1;
    }
    // Stop at an ASCII byte so the cut is a char boundary.
    while j > start && j < b.len() && !b[j].is_ascii() {
        j -= 1;
    }
    j
}

/// A tight `name=value`: anything but a reference to somewhere else (`$VAR`, `%VAR%`,
/// `${{ secrets.X }}`, `<placeholder>`, `(expr)`).
pub(super) fn plausible_value(value: &str) -> bool {
    !value.is_empty() && !value.starts_with(['$', '%', '{', '(', '[', '<', '&', '*', '-'])
}

/// A loose `name: value`: at least 6 characters with a digit, and nothing that reads as code.
pub(super) fn looks_like_secret(value: &str) -> bool {
    value.len() >= 6
        && value.bytes().any(|c| c.is_ascii_digit())
        && !value.contains(['(', ')', '<', '>', '&', '[', ']', '{', '}', '$'])
        && !value.contains("::")
}

/// `Bearer` / `Basic` / `Token`: the credential is the next word.
pub(super) fn is_auth_scheme(value: &str) -> bool {
    ["bearer", "basic", "token", "digest"]
        .iter()
        .any(|s| value.eq_ignore_ascii_case(s))
}
