//! The secret scanner: finds secret VALUES in text the host is about to store (the audit log)
//! and replaces each with a marker `[redacted:<kind>:<first 4 chars>…]`.
//!
//! One pass over the bytes, no regular expressions: at each word start it tries, in order, a
//! PEM private key block, a provider token format, a JWT, a `name=value` pair whose name says
//! it is a secret, and finally a high-entropy string; at each `://` it looks for URL userinfo.
//! Every rule is anchored at a position and reads forward a bounded distance, and the two
//! rules that read a whole run (names, high entropy) remember how far they read so a run is
//! read once: the scan is linear in the text.
//!
//! The scanner and the secret names are here; the formats recognised by shape are in
//! `redact/formats.rs`, reading values in `redact/values.rs`, the high-entropy judge in
//! `redact/entropy.rs`.
//!
//! What is not covered (see docs/decisions.md, "Secrets in the audit"): secrets in a format
//! not listed here that are short or low-entropy, hex-only secrets without a secret-looking
//! name (hex is left alone on purpose: digests and git object ids are everywhere and are not
//! secrets), and secrets split across two strings.

mod entropy;
mod formats;
mod values;

use entropy::is_high_entropy;
use formats::{jwt, pem_block, provider_token, value_kind};
use std::borrow::Cow;
use values::{
    is_auth_scheme, is_name_byte, is_token_byte, is_word, looks_like_secret, plausible_value,
    quoted_end, skip_spaces, token_end, unquoted_end,
};

/// Strings shorter than this are never judged by entropy alone: too short to tell random from
/// a word, and a short random id is rarely a credential by itself.
pub const MIN_ENTROPY_LEN: usize = 24;

/// Shannon entropy (bits per character) above which a long mixed-case-and-digit string counts
/// as random. Random base64 of 24 characters has a median of 4.25 and a 1st percentile of
/// 3.89 (the most a 24-character string can reach is log2 24 = 4.58), so 3.75 misses few of
/// them; identifiers like `HttpServerConfig2Builder` reach 4.3 too, which is why
/// [`MAX_WORDINESS`] is also required.
pub const ENTROPY_BITS: f64 = 3.75;

/// The largest share of a high-entropy candidate that may be "words" (runs of 3+ lowercase
/// letters, 4+ capitals or 3+ digits). Identifiers, paths and target triples are 60-90 %
/// words; random base64 rarely passes 50 % (about 3 % of random 32-character strings do, and
/// are missed).
pub const MAX_WORDINESS: f64 = 0.5;

/// Markers show the first characters of a value only when it is at least this long, so a
/// short password is never a quarter revealed; provider tokens show their public prefix.
const SHOW_PREFIX_MIN_LEN: usize = 16;
/// How many characters a marker shows.
const SHOW_PREFIX: usize = 4;
/// The most bytes a value or URL rule reads from its start: bounds the work a rule does when
/// it fails, so a hostile string cannot make the scan quadratic.
const MAX_RULE_READ: usize = 4096;
/// The most bytes a provider token's body is read for (real ones are under 200).
const MAX_TOKEN_READ: usize = 256;
/// The most bytes a JWT or a PEM header may take (a PEM block itself runs to its END line).
const MAX_JWT: usize = 16 << 10;

/// Replace every secret found in `text` with a marker; borrowed when nothing was found.
pub fn scan(text: &str) -> Cow<'_, str> {
    Scanner::new(text).run()
}

/// Names this long or shorter are remembered once decided (see [`secret_name_kind`]).
const MEMO_NAME_MAX: usize = 64;
/// The most names remembered by one thread; the memory is emptied when full.
const MEMO_MAX: usize = 1024;

/// The kind of secret a name says its value is (`password`, `token`, ...), if it says so.
/// Words are split at `_ - .`, spaces and camelCase; a name whose last word says what it
/// is about instead (`token_count`, `password_file`, `key_id`) is not a secret name.
///
/// Each thread remembers the names it decided: the audit writer asks about every key of
/// every event, and the same few dozen keys come back call after call (splitting them into
/// words again was ~14% of the writer's time under the load script).
pub fn secret_name_kind(name: &str) -> Option<&'static str> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static MEMO: RefCell<HashMap<Box<str>, Option<&'static str>>> =
            RefCell::new(HashMap::new());
    }
    if name.len() > MEMO_NAME_MAX {
        return name_kind(name);
    }
    MEMO.try_with(|memo| {
        if let Some(kind) = memo.borrow().get(name) {
            return *kind;
        }
        let kind = name_kind(name);
        let mut memo = memo.borrow_mut();
        if memo.len() >= MEMO_MAX {
            memo.clear();
        }
        memo.insert(name.into(), kind);
        kind
    })
    .unwrap_or_else(|_| name_kind(name))
}

/// [`secret_name_kind`], decided afresh.
fn name_kind(name: &str) -> Option<&'static str> {
    let words = split_words(name);
    let last = words.last()?;
    if BENIGN_LAST_WORDS.contains(&last.as_str()) {
        return None;
    }
    let joined: String = words.concat();
    let has = |w: &str| words.iter().any(|x| x == w);
    if joined.contains("aws") && joined.contains("secret") {
        Some("aws-secret-key")
    } else if joined.contains("password")
        || joined.contains("passwd")
        || joined.contains("passphrase")
        || has("pass")
        || has("pwd")
    {
        Some("password")
    } else if joined.contains("token") {
        Some("token")
    } else if joined.contains("secret") {
        Some("secret")
    } else if joined.contains("credential") || has("creds") {
        Some("credential")
    } else if joined.contains("authorization") || joined.contains("cookie") || has("auth") {
        Some("auth")
    } else if joined.contains("apikey")
        || joined.contains("privatekey")
        || joined.contains("accesskey")
        || has("key")
    {
        Some("key")
    } else {
        None
    }
}

/// Last words that make a name about a secret rather than the secret itself.
const BENIGN_LAST_WORDS: &[&str] = &[
    "count", "counts", "len", "length", "file", "files", "path", "paths", "dir", "url", "uri",
    "name", "names", "id", "ids", "type", "kind", "hash", "sha", "sha256", "digest", "size", "ttl",
    "expiry", "expires", "env", "var", "header", "field", "prompt", "hint", "policy", "required",
    "enabled", "mode", "format", "limit", "max", "min",
];

fn split_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// The marker for `value` of `kind`.
pub fn marker(kind: &str, value: &str) -> String {
    if value.chars().count() >= SHOW_PREFIX_MIN_LEN {
        let shown: String = value.chars().take(SHOW_PREFIX).collect();
        format!("[redacted:{kind}:{shown}…]")
    } else {
        format!("[redacted:{kind}:…]")
    }
}

struct Scanner<'a> {
    text: &'a str,
    b: &'a [u8],
    out: String,
    /// Bytes of `text` before this are in `out` (or replaced there).
    copied: usize,
    /// Name and high-entropy runs already judged end here: positions inside them are not
    /// judged again.
    names_until: usize,
    entropy_until: usize,
    jwt_until: usize,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Self {
        Scanner {
            text,
            b: text.as_bytes(),
            out: String::new(),
            copied: 0,
            names_until: 0,
            entropy_until: 0,
            jwt_until: 0,
        }
    }

    fn run(mut self) -> Cow<'a, str> {
        let mut i = 0;
        while i < self.b.len() {
            match self.at(i) {
                Some(next) => i = next,
                None => i += 1,
            }
        }
        if self.copied == 0 {
            return Cow::Borrowed(self.text);
        }
        self.out.push_str(&self.text[self.copied..]);
        Cow::Owned(self.out)
    }

    /// Replace `start..end` with a marker for it; returns where scanning continues.
    fn replace(&mut self, start: usize, end: usize, kind: &str) -> usize {
        self.out.push_str(&self.text[self.copied..start]);
        self.out.push_str(&marker(kind, &self.text[start..end]));
        self.copied = end;
        end
    }

    /// Try every rule at `i`; `Some(next)` when one matched.
    fn at(&mut self, i: usize) -> Option<usize> {
        let c = self.b[i];
        if !c.is_ascii() {
            return None;
        }
        if c == b':' {
            return self.url_userinfo(i);
        }
        let boundary = i == 0 || !is_word(self.b[i - 1]);
        if !boundary {
            return None;
        }
        if c == b'-' {
            if let Some(end) = pem_block(self.b, i) {
                return Some(self.replace(i, end, "private-key"));
            }
        }
        if let Some((end, kind)) = provider_token(self.b, i) {
            return Some(self.replace(i, end, kind));
        }
        if i >= self.jwt_until && self.b[i..].starts_with(b"eyJ") {
            match jwt(self.b, i) {
                Ok(end) => return Some(self.replace(i, end, "jwt")),
                Err(read) => self.jwt_until = read,
            }
        }
        if i >= self.names_until && is_name_byte(c) {
            if let Some(next) = self.name_value(i) {
                return Some(next);
            }
        }
        if i >= self.entropy_until && is_token_byte(c) {
            let end = token_end(self.b, i);
            self.entropy_until = end;
            if is_high_entropy(&self.text[i..end]) {
                return Some(self.replace(i, end, "high-entropy"));
            }
        }
        None
    }

    /// `scheme://user:password@host`: the password is replaced.
    fn url_userinfo(&mut self, i: usize) -> Option<usize> {
        if !self.b[i..].starts_with(b"://") {
            return None;
        }
        let start = i + 3;
        let limit = (start + MAX_RULE_READ).min(self.b.len());
        let mut colon = None;
        for j in start..limit {
            match self.b[j] {
                b'@' => {
                    let c = colon?;
                    let value = &self.text[c + 1..j];
                    if value.is_empty() || value.starts_with("[redacted") {
                        return None;
                    }
                    let kind = value_kind(value).unwrap_or("url-credential");
                    return Some(self.replace(c + 1, j, kind));
                }
                b':' if colon.is_none() => colon = Some(j),
                b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'`' => return None,
                b if b.is_ascii_whitespace() => return None,
                _ => {}
            }
        }
        None
    }

    /// `name=value`, `name: value`, `"name": "value"`, `--name value`, `export NAME=value`:
    /// when the name says secret, the value is replaced.
    fn name_value(&mut self, i: usize) -> Option<usize> {
        let b = self.b;
        let mut name_end = i;
        while name_end < b.len() && name_end - i < 256 && is_name_byte(b[name_end]) {
            name_end += 1;
        }
        self.names_until = name_end;
        let name = &self.text[i..name_end];
        let kind = secret_name_kind(name)?;
        let mut j = name_end;
        // A quoted name closes its quote.
        if i > 0 && (b[i - 1] == b'"' || b[i - 1] == b'\'') && b.get(j) == Some(&b[i - 1]) {
            j += 1;
        }
        let spaced_before = skip_spaces(b, &mut j);
        let sep = match (b.get(j), b.get(j + 1)) {
            (Some(b'='), Some(b'=')) | (Some(b':'), Some(b':')) => return None,
            (Some(b':'), Some(b'=')) => {
                j += 2;
                b':'
            }
            (Some(b'='), _) => {
                j += 1;
                b'='
            }
            (Some(b':'), _) => {
                j += 1;
                b':'
            }
            _ => {
                // `--password value`
                let flag = name.starts_with("--");
                if !(flag && spaced_before == 1) {
                    return None;
                }
                b' '
            }
        };
        let spaced_after = skip_spaces(b, &mut j);
        let (start, end) = match b.get(j) {
            Some(&q @ (b'"' | b'\'' | b'`')) => {
                let start = j + 1;
                let end = quoted_end(b, start, q);
                (start, end)
            }
            Some(_) => {
                let end = unquoted_end(b, j);
                let value = &self.text[j..end];
                let tight = sep == b'=' && spaced_before == 0 && spaced_after == 0;
                if tight || sep == b' ' {
                    if !plausible_value(value) {
                        self.names_until = end;
                        return None;
                    }
                    (j, end)
                } else {
                    // `name: value` / `name = value`: code often looks like this (`token:
                    // String`, `key = self.key`), so only a scheme-prefixed credential or a
                    // value that looks like one counts.
                    if is_auth_scheme(value) {
                        let mut k = end;
                        skip_spaces(b, &mut k);
                        let end = unquoted_end(b, k);
                        if k == end {
                            return None;
                        }
                        (k, end)
                    } else if looks_like_secret(value) {
                        (j, end)
                    } else {
                        self.names_until = end;
                        return None;
                    }
                }
            }
            None => return None,
        };
        let value = &self.text[start..end];
        if value.is_empty() || value.starts_with("[redacted") {
            return None;
        }
        let kind = value_kind(value).unwrap_or(kind);
        self.names_until = end;
        Some(self.replace(start, end, kind))
    }
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
