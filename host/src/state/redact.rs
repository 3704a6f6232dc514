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
//! What is not covered (see docs/decisions.md, "Secrets in the audit"): secrets in a format
//! not listed here that are short or low-entropy, hex-only secrets without a secret-looking
//! name (hex is left alone on purpose: digests and git object ids are everywhere and are not
//! secrets), and secrets split across two strings.

use std::borrow::Cow;

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

/// The kind of secret a name says its value is (`password`, `token`, ...), if it says so.
/// Words are split at `_ - .`, spaces and camelCase; a name whose last word says what it
/// is about instead (`token_count`, `password_file`, `key_id`) is not a secret name.
pub fn secret_name_kind(name: &str) -> Option<&'static str> {
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

/// A provider token format: a fixed prefix, then a body of `charset` of at least `min`
/// bytes (exactly `min` when `exact`).
struct Provider {
    prefix: &'static str,
    kind: &'static str,
    charset: fn(u8) -> bool,
    min: usize,
    exact: bool,
    needs_digit: bool,
}

fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}
fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn alnum_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
fn alnum_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}
fn base64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

const fn p(
    prefix: &'static str,
    kind: &'static str,
    charset: fn(u8) -> bool,
    min: usize,
) -> Provider {
    Provider {
        prefix,
        kind,
        charset,
        min,
        exact: false,
        needs_digit: false,
    }
}

/// Longer prefixes first where one starts another (`sk-ant-` before `sk-`).
static PROVIDERS: &[Provider] = &[
    Provider {
        exact: true,
        ..p("AKIA", "aws-access-key", upper_digit, 16)
    },
    Provider {
        exact: true,
        ..p("ASIA", "aws-access-key", upper_digit, 16)
    },
    p("ghp_", "github-token", alnum, 30),
    p("gho_", "github-token", alnum, 30),
    p("ghu_", "github-token", alnum, 30),
    p("ghs_", "github-token", alnum, 30),
    p("ghr_", "github-token", alnum, 30),
    p("github_pat_", "github-token", alnum_underscore, 22),
    p("glpat-", "gitlab-token", base64url, 20),
    Provider {
        needs_digit: true,
        ..p("xoxa-", "slack-token", alnum_dash, 10)
    },
    Provider {
        needs_digit: true,
        ..p("xoxb-", "slack-token", alnum_dash, 10)
    },
    Provider {
        needs_digit: true,
        ..p("xoxp-", "slack-token", alnum_dash, 10)
    },
    Provider {
        needs_digit: true,
        ..p("xoxr-", "slack-token", alnum_dash, 10)
    },
    Provider {
        needs_digit: true,
        ..p("xoxs-", "slack-token", alnum_dash, 10)
    },
    p("sk_live_", "stripe-key", alnum, 16),
    p("rk_live_", "stripe-key", alnum, 16),
    p("sk_test_", "stripe-key", alnum, 16),
    p("rk_test_", "stripe-key", alnum, 16),
    p("AIza", "google-api-key", base64url, 30),
    p("sk-ant-", "anthropic-key", base64url, 20),
    p("sk-proj-", "openai-key", base64url, 20),
    p("sk-svcacct-", "openai-key", base64url, 20),
    p("sk-admin-", "openai-key", base64url, 20),
    Provider {
        needs_digit: true,
        ..p("sk-", "openai-key", alnum, 32)
    },
];

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

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Base64 and base64url characters (padding only at the end, see [`token_end`]).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'-')
}

fn token_end(b: &[u8], i: usize) -> usize {
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
fn skip_spaces(b: &[u8], j: &mut usize) -> usize {
    let start = *j;
    while *j < b.len() && (b[*j] == b' ' || b[*j] == b'\t') {
        *j += 1;
    }
    *j - start
}

/// The end of a value quoted by `q` starting at `start`: the closing quote (a backslash
/// escapes it), the end of the line, or [`MAX_RULE_READ`] bytes.
fn quoted_end(b: &[u8], start: usize, q: u8) -> usize {
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
fn unquoted_end(b: &[u8], start: usize) -> usize {
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
fn plausible_value(value: &str) -> bool {
    !value.is_empty() && !value.starts_with(['$', '%', '{', '(', '[', '<', '&', '*', '-'])
}

/// A loose `name: value`: at least 6 characters with a digit, and nothing that reads as code.
fn looks_like_secret(value: &str) -> bool {
    value.len() >= 6
        && value.bytes().any(|c| c.is_ascii_digit())
        && !value.contains(['(', ')', '<', '>', '&', '[', ']', '{', '}', '$'])
        && !value.contains("::")
}

/// `Bearer` / `Basic` / `Token`: the credential is the next word.
fn is_auth_scheme(value: &str) -> bool {
    ["bearer", "basic", "token", "digest"]
        .iter()
        .any(|s| value.eq_ignore_ascii_case(s))
}

/// The provider kind of a whole value, when it is a known token, JWT or key block.
fn value_kind(value: &str) -> Option<&'static str> {
    let b = value.as_bytes();
    if let Some((_, kind)) = provider_token(b, 0) {
        return Some(kind);
    }
    if b.starts_with(b"eyJ") && jwt(b, 0).is_ok() {
        return Some("jwt");
    }
    None
}

/// A provider token starting at `i`: its end and kind.
fn provider_token(b: &[u8], i: usize) -> Option<(usize, &'static str)> {
    let rest = &b[i..];
    let first = *rest.first()?;
    for prov in PROVIDERS {
        let prefix = prov.prefix.as_bytes();
        if prefix[0] != first || !rest.starts_with(prefix) {
            continue;
        }
        let start = i + prefix.len();
        let limit = (start + MAX_TOKEN_READ).min(b.len());
        let mut end = start;
        while end < limit && (prov.charset)(b[end]) {
            end += 1;
        }
        let len = end - start;
        let len_ok = if prov.exact {
            len == prov.min && !matches!(b.get(end), Some(c) if c.is_ascii_alphanumeric())
        } else {
            len >= prov.min
        };
        if !len_ok {
            continue;
        }
        if prov.needs_digit && !b[start..end].iter().any(u8::is_ascii_digit) {
            continue;
        }
        return Some((end, prov.kind));
    }
    None
}

/// `-----BEGIN … PRIVATE KEY-----` at `i`: the end of its END line (or of the text).
fn pem_block(b: &[u8], i: usize) -> Option<usize> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const DASHES: &[u8] = b"-----";
    if !b[i..].starts_with(BEGIN) {
        return None;
    }
    let h = i + BEGIN.len();
    let limit = (h + 64).min(b.len());
    let close = find(&b[h..limit], DASHES)? + h;
    if !b[h..close].ends_with(b"PRIVATE KEY") {
        return None;
    }
    let body = close + DASHES.len();
    let Some(end_at) = find(&b[body..], b"-----END ").map(|k| k + body) else {
        return Some(b.len());
    };
    let after = end_at + b"-----END ".len();
    let limit = (after + 64).min(b.len());
    Some(
        find(&b[after..limit], DASHES)
            .map(|k| after + k + DASHES.len())
            .unwrap_or(b.len()),
    )
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A JWT at `i`: three base64url parts joined by dots (the signature may be empty), the first
/// decoding to a JSON object. `Err(read)` says how far it read before failing.
fn jwt(b: &[u8], i: usize) -> Result<usize, usize> {
    let limit = (i + MAX_JWT).min(b.len());
    let part = |from: usize| {
        let mut j = from;
        while j < limit && base64url(b[j]) {
            j += 1;
        }
        j
    };
    let p1 = part(i);
    if p1 - i < 10 || b.get(p1) != Some(&b'.') {
        return Err(p1);
    }
    let p2 = part(p1 + 1);
    if p2 - (p1 + 1) < 2 || b.get(p2) != Some(&b'.') {
        return Err(p2);
    }
    let p3 = part(p2 + 1);
    let header = base64url_decode(&b[i..p1]).ok_or(p3)?;
    match serde_json::from_slice::<serde_json::Value>(&header) {
        Ok(serde_json::Value::Object(_)) => Ok(p3),
        _ => Err(p3),
    }
}

fn base64url_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &c in s {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// A random-looking string: long enough, upper and lower case and digits, not hex, high
/// Shannon entropy, and not mostly words.
fn is_high_entropy(token: &str) -> bool {
    let t = token.trim_end_matches('=');
    let b = t.as_bytes();
    if b.len() < MIN_ENTROPY_LEN {
        return false;
    }
    let (mut upper, mut lower, mut digit, mut non_hex_letter) = (false, false, false, false);
    let mut counts = [0u32; 128];
    for &c in b {
        upper |= c.is_ascii_uppercase();
        lower |= c.is_ascii_lowercase();
        digit |= c.is_ascii_digit();
        non_hex_letter |= c.is_ascii_alphabetic() && !c.is_ascii_hexdigit();
        counts[usize::from(c & 0x7f)] += 1;
    }
    if !(upper && lower && digit && non_hex_letter) {
        return false;
    }
    let n = b.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&k| k > 0)
        .map(|&k| {
            let p = f64::from(k) / n;
            -p * p.log2()
        })
        .sum();
    entropy >= ENTROPY_BITS && wordiness(b) <= MAX_WORDINESS
}

/// The share of `b` in runs of 3+ lowercase letters, 4+ capitals or 3+ digits.
fn wordiness(b: &[u8]) -> f64 {
    let class = |c: u8| {
        if c.is_ascii_lowercase() {
            1
        } else if c.is_ascii_uppercase() {
            2
        } else if c.is_ascii_digit() {
            3
        } else {
            0
        }
    };
    let mut in_words = 0usize;
    let mut j = 0;
    while j < b.len() {
        let k = class(b[j]);
        let mut e = j + 1;
        while e < b.len() && class(b[e]) == k {
            e += 1;
        }
        let run = e - j;
        let long = match k {
            1 | 3 => run >= 3,
            2 => run >= 4,
            _ => false,
        };
        if long {
            in_words += run;
        }
        j = e;
    }
    in_words as f64 / b.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// (input, expected output) for every rule.
    #[test]
    fn each_kind_is_replaced_by_its_marker() {
        let cases: &[(&str, &str)] = &[
            (
                "key AKIAIOSFODNN7EXAMPLE here",
                "key [redacted:aws-access-key:AKIA…] here",
            ),
            (
                "ASIAY34FZKBOKMUTVV7A",
                "[redacted:aws-access-key:ASIA…]",
            ),
            (
                "aws_secret_access_key = \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"",
                "aws_secret_access_key = \"[redacted:aws-secret-key:wJal…]\"",
            ),
            (
                "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "AWS_SECRET_ACCESS_KEY=[redacted:aws-secret-key:wJal…]",
            ),
            (
                "push ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 now",
                "push [redacted:github-token:ghp_…] now",
            ),
            (
                "gho_16C7e42F292c6912E7710c838347Ae178B4a",
                "[redacted:github-token:gho_…]",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "[redacted:github-token:gith…]",
            ),
            (
                "glpat-xYz12345678901234567",
                "[redacted:gitlab-token:glpa…]",
            ),
            (
                "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
                "[redacted:slack-token:xoxb…]",
            ),
            (
                "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
                "[redacted:stripe-key:sk_l…]",
            ),
            (
                "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
                "[redacted:stripe-key:sk_t…]",
            ),
            (
                "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
                "[redacted:google-api-key:AIza…]",
            ),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
                "[redacted:anthropic-key:sk-a…]",
            ),
            (
                "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
                "[redacted:openai-key:sk-p…]",
            ),
            (
                "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH",
                "[redacted:openai-key:sk-a…]",
            ),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "Authorization: Bearer [redacted:jwt:eyJh…]",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nafter",
                "[redacted:private-key:----…]\nafter",
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA (cut)",
                "[redacted:private-key:----…]",
            ),
            ("password=hunter2 next", "password=[redacted:password:…] next"),
            ("db_passwd: hunter22", "db_passwd: [redacted:password:…]"),
            (
                r#"{"api_key": "abc", "client_secret": "s3cr3t-v4lue-long-enough"}"#,
                r#"{"api_key": "[redacted:key:…]", "client_secret": "[redacted:secret:s3cr…]"}"#,
            ),
            (
                "TOKEN=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 echo hi",
                "TOKEN=[redacted:github-token:ghp_…] echo hi",
            ),
            (
                "export API_KEY=abc123def; make",
                "export API_KEY=[redacted:key:…]; make",
            ),
            (
                "mysql --password hunter2 db",
                "mysql --password [redacted:password:…] db",
            ),
            (
                "curl -H 'Authorization: Basic dXNlcjpwYXNz' x",
                "curl -H 'Authorization: Basic [redacted:auth:…]' x",
            ),
            (
                "git clone https://alice:hunter2@example.com/r.git",
                "git clone https://alice:[redacted:url-credential:…]@example.com/r.git",
            ),
            (
                "https://example.com/a?x=1&token=abc123&access_key=zzz#f",
                "https://example.com/a?x=1&token=[redacted:token:…]&access_key=[redacted:key:…]#f",
            ),
            (
                "blob Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTBBQkNERUZHSA== end",
                "blob [redacted:high-entropy:Zm9v…] end",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(scan(input), *want, "input: {input}");
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let texts = [
            // Prose.
            "The token is refreshed every hour; see the password policy in docs/security.md.",
            "Set the key to something memorable, then press Enter.",
            // Paths and target triples.
            "/home/alice/work/toolgate/host/src/state/redact.rs",
            "target/x86_64-unknown-linux-gnu/release/deps/toolgate-3f2a1b4c5d6e7f80",
            "C:\\Users\\Alice\\AppData\\Local\\Temp\\tmpA1b2C3\\file.txt",
            // Rust code that names secrets without holding one.
            "pub struct Creds { pub token: String, pub api_key: Option<String> }",
            "let key = self.key.clone();\nfn auth(password: &str) -> Result<()> { check(password) }",
            "if token.len() > MAX_TOKEN_LEN { return Err(Error::TooLong) }",
            "let secret = std::env::var(\"SECRET\")?; env!(\"CARGO_PKG_VERSION\")",
            "HttpServerConfig2BuilderFactory::new().with_timeout(Duration::from_secs(30))",
            // References to a secret, not the secret.
            "TOKEN=$GITHUB_TOKEN cargo publish && echo ${{ secrets.NPM_TOKEN }}",
            "token_count=42 password_file=/run/secrets/db key_id=7",
            // Digests and ids: hex is never judged by entropy.
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "commit 6ea7f46c0a7d4e0b9a7b1f0e2c3d4e5f60718293 Author: A <a@b.c>",
            "uuid 123e4567-e89b-12d3-a456-426614174000",
            "ssh://git@github.com/owner/repo.git and https://example.com/x?page=2",
            // Markers are not scanned again.
            "password=[redacted:password:…] [redacted:github-token:ghp_…]",
        ];
        for t in texts {
            assert_eq!(scan(t), t);
        }
    }

    #[test]
    fn secret_names_are_told_apart_from_names_about_secrets() {
        let cases = [
            ("GITHUB_TOKEN", Some("token")),
            ("accessToken", Some("token")),
            ("DB_PASSWORD", Some("password")),
            ("x-api-key", Some("key")),
            ("Authorization", Some("auth")),
            ("client_secret", Some("secret")),
            ("AWS_SECRET_ACCESS_KEY", Some("aws-secret-key")),
            ("token_count", None),
            ("password_file", None),
            ("key_id", None),
            ("author", None),
            ("monkey", None),
            ("input_sha256", None),
            ("path", None),
        ];
        for (name, kind) in cases {
            assert_eq!(secret_name_kind(name), kind, "{name}");
        }
    }

    #[test]
    fn markers_show_a_prefix_only_of_long_values() {
        assert_eq!(marker("password", "hunter2"), "[redacted:password:…]");
        assert_eq!(
            marker("token", "0123456789abcdefXYZ"),
            "[redacted:token:0123…]"
        );
        assert_eq!(
            marker("token", "ééééééééééééééééé"),
            "[redacted:token:éééé…]"
        );
    }

    #[test]
    fn a_jwt_needs_a_json_header() {
        // Three dotted base64url parts whose first part is not JSON: not a JWT.
        let t = "eyJub3QganNvbg.abc.def";
        assert_eq!(scan(t), t);
    }

    #[test]
    fn hostile_input_is_scanned_in_linear_time() {
        // Each of these would make a naive anchored scan quadratic; they must just finish.
        for unit in ["xoxb-", "eyJa.", "key:", "a-", "-----BEGIN ", "://a:"] {
            let s = unit.repeat(200_000 / unit.len());
            let _ = scan(&s);
        }
    }

    #[test]
    fn non_ascii_text_keeps_its_characters() {
        let t = "mot de passe: «secret» — password=pässwörd123 fin";
        assert_eq!(
            scan(t),
            "mot de passe: «secret» — password=[redacted:password:…] fin"
        );
    }
}
