//! Secrets recognised by their shape alone: provider tokens (a known prefix and body), PEM
//! private-key blocks and JWTs.

use super::{MAX_JWT, MAX_TOKEN_READ};

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

/// The provider kind of a whole value, when it is a known token, JWT or key block.
pub(super) fn value_kind(value: &str) -> Option<&'static str> {
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
pub(super) fn provider_token(b: &[u8], i: usize) -> Option<(usize, &'static str)> {
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
pub(super) fn pem_block(b: &[u8], i: usize) -> Option<usize> {
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
pub(super) fn jwt(b: &[u8], i: usize) -> Result<usize, usize> {
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
