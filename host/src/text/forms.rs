//! The forms a secret value takes when a program hands it on: as it is, escaped in JSON,
//! percent-encoded, in base64 (both alphabets, at any alignment inside a longer encoding) and
//! in hex. A value the host must never show (a brokered credential, a deny-listed file's
//! content) is looked for in every one of them, so a reflecting server, `base64` or `jq`
//! cannot carry it past a scrub that only knows the plain bytes.

use base64::Engine as _;

/// Encoded fragments shorter than this are not looked for: an eight-character run of base64
/// occurs by chance in ordinary text far too often to replace.
pub const MIN_FORM: usize = 8;

/// Every form of `value` worth looking for, longest first, without duplicates. The first
/// entry is always `value` itself.
pub fn forms(value: &str) -> Vec<String> {
    let bytes = value.as_bytes();
    let mut out = vec![value.to_string()];
    let mut add = |s: String| {
        if s.len() >= MIN_FORM.min(value.len()) && !out.contains(&s) {
            out.push(s);
        }
    };
    // JSON: serde's escaping, the same with `/` escaped (PHP, some Java encoders), and with
    // everything outside ASCII as `\uXXXX` (Python's json.dumps).
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json[1..json.len().saturating_sub(1).max(1)].to_string();
    add(json.replace('/', "\\/"));
    add(ascii_json(&json).replace('/', "\\/"));
    add(ascii_json(&json));
    // Go's encoding/json also writes `<`, `>` and `&` as `\u003c`, `\u003e`, `\u0026`.
    add(html_safe_json(&json));
    add(json);
    // Percent-encoding of everything but the unreserved characters, in both cases of hex, and
    // the form encoding's `+` for a space.
    let upper = percent(bytes, true);
    add(upper.replace("%20", "+"));
    add(percent(bytes, false));
    add(upper);
    // base64 and base64url, whole (padded or not) and as the run of characters that depends
    // on the value alone when it sits at any offset inside a longer encoded text.
    for engine in [
        &base64::engine::general_purpose::STANDARD,
        &base64::engine::general_purpose::URL_SAFE,
    ] {
        let whole = engine.encode(bytes);
        add(whole.trim_end_matches('=').to_string());
        add(whole);
        for shift in 0..3 {
            add(base64_core(engine, bytes, shift));
        }
    }
    add(hex::encode(bytes));
    add(hex::encode_upper(bytes));
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    // `value` first, then the rest longest first.
    if let Some(i) = out.iter().position(|s| s == value) {
        let v = out.remove(i);
        out.insert(0, v);
    }
    out
}

/// The base64 characters that encode only bits of `bytes` when `shift` bytes come before them
/// and anything may follow.
fn base64_core(engine: &base64::engine::GeneralPurpose, bytes: &[u8], shift: usize) -> String {
    let mut padded = vec![0u8; shift];
    padded.extend_from_slice(bytes);
    let text = engine.encode(&padded);
    let first = (8 * shift).div_ceil(6);
    let end = (8 * (shift + bytes.len())) / 6;
    text.get(first..end.max(first))
        .unwrap_or_default()
        .to_string()
}

fn percent(bytes: &[u8], upper: bool) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            s.push(char::from(b));
        } else if upper {
            s.push_str(&format!("%{b:02X}"));
        } else {
            s.push_str(&format!("%{b:02x}"));
        }
    }
    s
}

/// JSON text with the characters Go escapes for HTML (`<`, `>`, `&`, U+2028, U+2029) as
/// `\uXXXX`.
fn html_safe_json(json: &str) -> String {
    let mut s = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                s.push_str(&format!("\\u{:04x}", u32::from(c)))
            }
            c => s.push(c),
        }
    }
    s
}

/// JSON text with every non-ASCII character as `\uXXXX` (UTF-16 units, as Python writes it).
fn ascii_json(json: &str) -> String {
    let mut s = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            s.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                s.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};

    const SECRET: &str = "ghp_Zq9/x+Y7 wü=Token";

    fn found(text: &str) -> bool {
        forms(SECRET).iter().any(|f| text.contains(f.as_str()))
    }

    #[test]
    fn the_value_itself_comes_first() {
        assert_eq!(forms(SECRET)[0], SECRET);
    }

    #[test]
    fn json_escapes_of_every_kind_are_found() {
        let serde = serde_json::to_string(&serde_json::json!({ "h": SECRET })).unwrap();
        assert!(found(&serde), "{serde}");
        assert!(found(&serde.replace('/', "\\/")));
        assert!(found("{\"h\": \"ghp_Zq9\\/x+Y7 w\\u00fc=Token\"}"));
    }

    #[test]
    fn go_json_escapes_are_found() {
        let value = "tok<en>&more";
        let go = "{\"h\":\"tok\\u003cen\\u003e\\u0026more\"}";
        assert!(forms(value).iter().any(|f| go.contains(f.as_str())), "{go}");
    }

    #[test]
    fn percent_and_form_encodings_are_found() {
        assert!(found("a=ghp_Zq9%2Fx%2BY7%20w%C3%BC%3DToken&b=1"));
        assert!(found("a=ghp_Zq9%2fx%2bY7%20w%c3%bc%3dToken"));
        assert!(found("a=ghp_Zq9%2Fx%2BY7+w%C3%BC%3DToken"));
    }

    #[test]
    fn base64_is_found_at_any_offset_in_either_alphabet() {
        for prefix in ["", "a", "ab", "abc", "Authorization: Bearer "] {
            for suffix in ["", "\n", "x", "xyz"] {
                let whole = format!("{prefix}{SECRET}{suffix}");
                for engine in [&STANDARD, &URL_SAFE] {
                    let text = engine.encode(whole.as_bytes());
                    assert!(found(&text), "{prefix:?}+{suffix:?}: {text}");
                }
            }
        }
    }

    #[test]
    fn hex_is_found_in_either_case() {
        assert!(found(&hex::encode(format!("x{SECRET}y"))));
        assert!(found(&hex::encode_upper(SECRET)));
    }

    #[test]
    fn ordinary_text_matches_no_form() {
        let text = "the quick brown fox, Token=1, ghp_ and Zq9 and d2hhdGV2ZXI=";
        assert!(!found(text));
    }

    #[test]
    fn forms_are_distinct_and_never_shorter_than_the_minimum() {
        let f = forms("sk-live-0123456789");
        let mut seen = f.clone();
        seen.dedup();
        assert_eq!(seen.len(), f.len());
        assert!(f.iter().all(|s| s.len() >= MIN_FORM));
    }
}
