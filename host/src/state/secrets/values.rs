//! The secret values in a deny-listed file's text, each with a label saying which it is (a
//! key's name, `password`, `private key`, ...).
//!
//! - `.env`-style files (`.env`, `.env.*`, `.envrc`): every `KEY=VALUE` (an `export ` before
//!   it allowed), the value's quotes stripped, values of [`MIN_VALUE`] characters or more.
//! - Any other file: `KEY=VALUE`, `KEY = VALUE` and `KEY: VALUE` lines whose key names a secret
//!   (`password`, `token`, `secret`, `*_key`, ...; as the audit's redaction judges names),
//!   JSON string fields whose key names a secret, `.netrc`-style `password X` (and `login`'s
//!   password in one line), the body lines of a PEM block (each line, so a key copied with
//!   other line breaks or escaped in JSON is found), and a file that is one line without
//!   spaces (a token file: `.vault-token`, `.git-credentials`).

use crate::state::redact::secret_name_kind;

/// Shorter values are not kept: they occur in ordinary text.
pub const MIN_VALUE: usize = 8;
/// Most values kept from one file.
pub const MAX_VALUES: usize = 256;

/// The values in `text`, the content of the deny-listed file `rel`, with their labels.
pub fn values_of(rel: &str, text: &str) -> Vec<(String, String)> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let dotenv = name == ".env" || name.starts_with(".env.") || name == ".envrc";
    let mut out: Vec<(String, String)> = Vec::new();
    let mut push = |value: &str, label: &str| {
        let value = value.trim();
        if value.len() >= MIN_VALUE
            && out.len() < MAX_VALUES
            && !out.iter().any(|(v, _)| v == value)
        {
            out.push((value.to_string(), label.to_string()));
        }
    };
    let trimmed = text.trim();
    if !trimmed.is_empty() && !trimmed.contains(char::is_whitespace) && !trimmed.contains('=') {
        push(trimmed, "whole file");
    }
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(text) {
        json_values(&json, None, &mut push);
    }
    let mut in_pem = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("-----BEGIN ") {
            in_pem = true;
            continue;
        }
        if line.starts_with("-----END ") {
            in_pem = false;
            continue;
        }
        if in_pem {
            if !line.contains(':') {
                push(line, "private key");
            }
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        // `.netrc`: `machine m login l password p` in any layout.
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if matches!(pair[0], "password" | "passwd") {
                push(pair[1], "password");
            }
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some(at) = line.find(['=', ':']) else {
            continue;
        };
        let key = line[..at].trim().trim_matches('"');
        if key.is_empty() || key.contains(char::is_whitespace) {
            continue;
        }
        let value = unquote(line[at + 1..].trim());
        if dotenv || secret_name_kind(key).is_some() {
            push(value, key);
        }
    }
    out
}

/// A value without its quotes (and without a trailing comment when unquoted).
fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(rest) = v.strip_prefix(q) {
            return rest.find(q).map_or(rest, |end| &rest[..end]);
        }
    }
    v.split(" #").next().unwrap_or(v).trim_end_matches(',')
}

fn json_values(v: &serde_json::Value, key: Option<&str>, push: &mut impl FnMut(&str, &str)) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                json_values(v, Some(k), push);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| json_values(i, key, push)),
        serde_json::Value::String(s) => {
            if let Some(k) = key.filter(|k| secret_name_kind(k).is_some()) {
                if s.contains("-----BEGIN ") {
                    for line in s.lines() {
                        let line = line.trim();
                        if !line.starts_with("-----") {
                            push(line, k);
                        }
                    }
                } else {
                    push(s, k);
                }
            }
        }
        _ => {}
    }
}
