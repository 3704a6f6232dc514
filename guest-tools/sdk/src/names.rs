//! Names are data: how a tool prints a file's name in the text the model reads.
//!
//! Whoever made a file chose its name, and a name may hold anything but `/` and NUL: a
//! newline that starts a forged `path:line:text` row, a `:` that moves where the path ends,
//! terminal escapes, a bidi override that shows the name in another order, bytes that are not
//! UTF-8. A tool prints every name through this module, so a reader can always tell where a
//! name starts and ends and what it is:
//!
//! - An **ordinary** name is printed as it is (`src/main.rs`, `my file.txt`, `日本.md`).
//! - Any other name is printed **quoted**: in double quotes, with `\\` and `\"` for a
//!   backslash and a quote, `\n` `\r` `\t` for those controls, `\xNN` (two lowercase hex
//!   digits) for the other ASCII controls and DEL, `\xNN` for each byte that is not UTF-8
//!   (always `\x80` or above, so never confused with an ASCII control), and `\u{X}` (lowercase
//!   hex, as Rust writes it and as the host's approval prompts do) for the other characters
//!   in [`is_escaped`] (C1 controls, bidi controls, invisible format characters, line and
//!   paragraph separators, tag characters). Everything else is printed as it is, inside the
//!   quotes too.
//!
//! A name is quoted ([`needs_quoting`]) when it is empty, starts with `"`, starts or ends with
//! whitespace, contains `:`, or contains a character that is escaped. So a bare name never
//! holds `:` (in `path:line:text` the path ends at the first `:`), never starts with `"` (a
//! leading quote always means the quoted form) and never hides its ends. Two different names
//! never print the same ([`parse`] reads a rendering back).
//!
//! `grep`'s context rows are `path-line-text`: while it prints them, a name that contains a
//! `-` followed by digits and then `-` or the name's end is quoted too ([`display_in_rows`]),
//! so the path of a bare row ends at its first `:` or `-<digits>-`.
//!
//! Names stay exact in a tool's `data`; [`Escaped`] collects the names that were quoted, for
//! `data.escaped_names`.

use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::Write as _;

/// The most quoted names listed in `data.escaped_names` (`escaped_names_total` counts all).
pub const MAX_ESCAPED_NAMES: usize = 20;

/// Whether `c` is printed as an escape inside a quoted name (and so makes a name quoted):
/// control characters (C0, DEL, C1), bidi controls (U+061C, U+200E–U+200F, U+202A–U+202E,
/// U+2066–U+2069), invisible format characters (soft hyphen, U+180E, U+200B–U+200D,
/// U+2060–U+2064, U+206A–U+206F, U+FEFF, U+FFF9–U+FFFB), line and paragraph separators
/// (U+2028, U+2029) and tag characters (U+E0000–U+E007F, which can spell hidden text).
pub fn is_escaped(c: char) -> bool {
    matches!(
        c as u32,
        0x00..=0x1f
            | 0x7f..=0x9f
            | 0xad
            | 0x061c
            | 0x180e
            | 0x200b..=0x200f
            | 0x2028..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0xe0000..=0xe007f
    )
}

/// Whether `name` is printed quoted (see the module documentation).
pub fn needs_quoting(name: &str) -> bool {
    let bytes = name.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return true;
    };
    if first == b'"' {
        return true;
    }
    // ASCII, the usual case, byte by byte; the rest by character.
    let mut ascii = true;
    for &b in bytes {
        if b < 0x20 || b == 0x7f || b == b':' {
            return true;
        }
        ascii &= b < 0x80;
    }
    if ascii {
        return first == b' ' || last == b' ';
    }
    let starts_blank = name.chars().next().is_some_and(char::is_whitespace);
    let ends_blank = name.chars().next_back().is_some_and(char::is_whitespace);
    starts_blank || ends_blank || name.chars().any(is_escaped)
}

/// `name` as printed: bare when ordinary, else quoted.
pub fn display(name: &str) -> Cow<'_, str> {
    if needs_quoting(name) {
        Cow::Owned(quote(name))
    } else {
        Cow::Borrowed(name)
    }
}

/// Whether a name has `-` + digits + `-` or end, which would be ambiguous in a
/// `path-line-text` row.
fn has_dash_number(name: &str) -> bool {
    let b = name.as_bytes();
    let mut i = 0;
    while let Some(off) = b[i..].iter().position(|&c| c == b'-') {
        let dash = i + off;
        let digits = b[dash + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let after = dash + 1 + digits;
        if digits > 0 && (after == b.len() || b[after] == b'-') {
            return true;
        }
        i = dash + 1;
    }
    false
}

/// Whether `name` is printed quoted in output that has `path-line-text` rows.
pub fn needs_quoting_in_rows(name: &str) -> bool {
    needs_quoting(name) || has_dash_number(name)
}

/// `name` as printed in output with `path-line-text` rows (`grep` with context): as
/// [`display`], and quoted too when it contains `-<digits>-` or ends with `-<digits>`.
pub fn display_in_rows(name: &str) -> Cow<'_, str> {
    if needs_quoting_in_rows(name) {
        Cow::Owned(quote(name))
    } else {
        Cow::Borrowed(name)
    }
}

/// `name` (raw bytes, e.g. a Unix file name) as printed: bare when it is UTF-8 and ordinary,
/// else quoted, each byte that is not UTF-8 as `\xNN`.
pub fn display_bytes(name: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(name) {
        Ok(text) => display(text),
        Err(_) => Cow::Owned(quote_bytes(name)),
    }
}

/// `name` always in the quoted form.
pub fn quote(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    out.push('"');
    push_escaped(&mut out, name);
    out.push('"');
    out
}

/// Raw bytes always in the quoted form; bytes that are not UTF-8 as `\xNN`.
pub fn quote_bytes(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    out.push('"');
    for chunk in name.utf8_chunks() {
        push_escaped(&mut out, chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out.push('"');
    out
}

fn push_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_escaped(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// Read back a name printed at the start of `text`: the quoted form up to its closing quote,
/// or a bare name of `bare_len` bytes. Returns the name's bytes and the text after it; `None`
/// when a quoted form is malformed. (The inverse of [`display_bytes`]; tests use it to show
/// that a rendering names exactly one name.)
pub fn parse(text: &str, bare_len: impl FnOnce(&str) -> usize) -> Option<(Vec<u8>, &str)> {
    let Some(body) = text.strip_prefix('"') else {
        let n = bare_len(text).min(text.len());
        return Some((text.as_bytes()[..n].to_vec(), text.get(n..)?));
    };
    let mut out = Vec::with_capacity(body.len());
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &body[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => out.push(b'\n'),
                'r' => out.push(b'\r'),
                't' => out.push(b'\t'),
                '\\' => out.push(b'\\'),
                '"' => out.push(b'"'),
                'x' => {
                    let hi = chars.next()?.1.to_digit(16)?;
                    let lo = chars.next()?.1.to_digit(16)?;
                    out.push((hi * 16 + lo) as u8);
                }
                'u' => {
                    if chars.next()?.1 != '{' {
                        return None;
                    }
                    let mut code = 0u32;
                    loop {
                        let h = chars.next()?.1;
                        if h == '}' {
                            break;
                        }
                        code = code.checked_mul(16)?.checked_add(h.to_digit(16)?)?;
                    }
                    let c = char::from_u32(code)?;
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => return None,
            },
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    None
}

/// The names a call printed quoted, for its `data`: each exact name once, in the order
/// first printed, at most [`MAX_ESCAPED_NAMES`], and how many there were in all.
#[derive(Debug, Default)]
pub struct Escaped {
    listed: Vec<String>,
    seen: HashSet<String>,
}

impl Escaped {
    /// No names yet.
    pub fn new() -> Self {
        Escaped::default()
    }

    /// `name` as printed ([`display`]), recording it when it is quoted.
    pub fn show<'a>(&mut self, name: &'a str) -> Cow<'a, str> {
        let shown = display(name);
        if let Cow::Owned(_) = shown {
            self.note(name);
        }
        shown
    }

    /// Record that `name` was printed quoted.
    pub fn note(&mut self, name: &str) {
        if self.seen.contains(name) {
            return;
        }
        self.seen.insert(name.to_string());
        if self.listed.len() < MAX_ESCAPED_NAMES {
            self.listed.push(name.to_string());
        }
    }

    /// Whether no name was quoted.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// How many different names were quoted.
    pub fn total(&self) -> usize {
        self.seen.len()
    }

    /// Add `escaped_names` (the exact names, at most [`MAX_ESCAPED_NAMES`]) and
    /// `escaped_names_total` to `data` (an object) when any name was quoted; otherwise leave
    /// `data` as it is, so ordinary output is unchanged.
    pub fn add_to(&self, data: &mut Value) {
        if self.is_empty() {
            return;
        }
        if let Some(map) = data.as_object_mut() {
            map.insert("escaped_names".into(), Value::from(self.listed.clone()));
            map.insert("escaped_names_total".into(), Value::from(self.total()));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The name a rendering names, read back.
    fn back(shown: &str) -> Vec<u8> {
        let (name, rest) = parse(shown, |s| s.len()).expect("malformed");
        assert_eq!(rest, "", "{shown:?}");
        name
    }

    #[test]
    fn ordinary_names_stay_bare() {
        for name in [
            "src/main.rs",
            "my file.txt",
            "a\"b",
            "back\\slash",
            "日本/テスト.md",
            "émoji-😀.txt",
            "2024-01-02-notes.md",
            "[slug]/page.tsx",
            "-",
            "a'b",
        ] {
            assert!(!needs_quoting(name), "{name:?}");
            assert_eq!(display(name), name);
            assert!(matches!(display(name), Cow::Borrowed(_)));
        }
    }

    #[test]
    fn each_c0_control_del_and_c1_is_escaped() {
        for c in (0u32..0x20).chain([0x7f]).chain(0x80..0xa0) {
            let c = char::from_u32(c).unwrap();
            let name = format!("a{c}b");
            assert!(needs_quoting(&name), "{c:?}");
            let shown = display(&name);
            assert!(!shown.contains(c), "{c:?} raw in {shown:?}");
            assert!(shown.chars().all(|s| !s.is_control()), "{shown:?}");
            assert_eq!(back(&shown), name.as_bytes(), "{c:?}");
        }
        assert_eq!(display("a\nb"), "\"a\\nb\"");
        assert_eq!(display("a\rb"), "\"a\\rb\"");
        assert_eq!(display("a\tb"), "\"a\\tb\"");
        assert_eq!(display("\x1b[31mred"), "\"\\x1b[31mred\"");
        assert_eq!(display("a\x7f"), "\"a\\x7f\"");
        assert_eq!(display("a\0"), "\"a\\x00\"");
        assert_eq!(display("a\u{85}"), "\"a\\u{85}\"");
        assert_eq!(display("a\u{9b}31m"), "\"a\\u{9b}31m\"");
    }

    #[test]
    fn bidi_and_invisible_characters_are_escaped() {
        let bidi = [
            0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068,
            0x2069,
        ];
        let other = [
            0xad, 0x180e, 0x200b, 0x200c, 0x200d, 0x2028, 0x2029, 0x2060, 0x2064, 0x206a, 0x206f,
            0xfeff, 0xfff9, 0xfffb, 0xe0000, 0xe0041, 0xe007f,
        ];
        for c in bidi.into_iter().chain(other) {
            let c = char::from_u32(c).unwrap();
            let name = format!("x{c}y.txt");
            let shown = display(&name);
            assert!(!shown.contains(c), "{c:?} raw in {shown:?}");
            assert_eq!(shown, format!("\"x\\u{{{:x}}}y.txt\"", c as u32));
            assert_eq!(back(&shown), name.as_bytes());
        }
        assert_eq!(display("gpj\u{202e}exe.txt"), "\"gpj\\u{202e}exe.txt\"");
        // Neighbours that are ordinary characters stay as they are.
        for c in [
            '\u{2065}',
            '\u{2070}',
            '\u{2027}',
            '\u{fff8}',
            '\u{e0080}',
            '\u{a0}',
        ] {
            assert!(!is_escaped(c), "{c:?}");
        }
    }

    #[test]
    fn colon_leading_quote_and_blank_ends_are_quoted() {
        assert_eq!(
            display("src/a.txt:1:FORGED hello world\nnormal.txt"),
            "\"src/a.txt:1:FORGED hello world\\nnormal.txt\""
        );
        assert_eq!(display("a:b"), "\"a:b\"");
        assert_eq!(display("\"quoted\""), "\"\\\"quoted\\\"\"");
        assert_eq!(display(" lead"), "\" lead\"");
        assert_eq!(display("trail "), "\"trail \"");
        assert_eq!(display("\u{3000}wide"), "\"\u{3000}wide\"");
        assert_eq!(display("wide\u{a0}"), "\"wide\u{a0}\"");
        assert_eq!(display(""), "\"\"");
        // A backslash is literal in a bare name and escaped in a quoted one.
        assert_eq!(display("a\\n:"), "\"a\\\\n:\"");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_hex_escaped() {
        assert_eq!(display_bytes(b"bad\xff.txt"), "\"bad\\xff.txt\"");
        assert_eq!(display_bytes(b"\xc3"), "\"\\xc3\"");
        assert_eq!(display_bytes("ok-é.txt".as_bytes()), "ok-é.txt");
        assert_eq!(display_bytes(b"a\n\xfe"), "\"a\\n\\xfe\"");
        assert_eq!(back(&display_bytes(b"bad\xff.txt")), b"bad\xff.txt");
        // A byte that is not UTF-8 and the character U+FFFD are different names.
        assert_ne!(display_bytes(b"a\xff"), display("a\u{fffd}"));
        // A lone invalid byte and a C1 character of the same number differ too.
        assert_ne!(display_bytes(b"a\x85"), display("a\u{85}"));
    }

    #[test]
    fn dash_numbers_are_quoted_in_rows_only() {
        for name in ["normal.txt-1-FORGED", "a-12", "x-3-", "2024-01-02.log"] {
            assert!(!needs_quoting(name), "{name:?}");
            assert!(needs_quoting_in_rows(name), "{name:?}");
            assert_eq!(display_in_rows(name), quote(name));
        }
        for name in ["my-module.ts", "a-b-c", "x-", "-x", "a--1x", "v1-x", "a-1x"] {
            assert!(!needs_quoting_in_rows(name), "{name:?}");
            assert_eq!(display_in_rows(name), name);
        }
        assert!(needs_quoting_in_rows("a:b"));
    }

    /// Names built from pieces that matter (separators, quotes, escapes, controls, bidi,
    /// invalid bytes): every rendering reads back as its own name, so no two differ only in
    /// their names and print the same.
    #[test]
    fn two_different_names_never_render_the_same() {
        let pieces: &[&[u8]] = &[
            b"a",
            b":",
            b"\"",
            b"\\",
            b"\\n",
            b"\n",
            b"\r",
            b"\t",
            b" ",
            b"-1-",
            b"\x1b",
            b"\x7f",
            "\u{85}".as_bytes(),
            "\u{202e}".as_bytes(),
            "\u{fffd}".as_bytes(),
            b"\xff",
            b"\x85",
            b"x",
            "é".as_bytes(),
            b"\\x1b",
            b"\\u{202e}",
        ];
        let mut names: Vec<Vec<u8>> = vec![Vec::new()];
        for a in pieces {
            names.push(a.to_vec());
            for b in pieces {
                names.push([*a, *b].concat());
                for c in [b"a".as_slice(), b":", b"\"", b"\n", b"\xff"] {
                    names.push([*a, *b, c].concat());
                    names.push([c, *a, *b].concat());
                }
            }
        }
        names.sort();
        names.dedup();
        let mut shown: HashSet<String> = HashSet::new();
        for name in &names {
            for (s, rows) in [
                (display_bytes(name).into_owned(), false),
                (row_form(name), true),
            ] {
                assert_eq!(back(&s), *name, "{s:?} reads back wrong");
                assert!(
                    s.chars().all(|c| !is_escaped(c)),
                    "{s:?} holds a raw escaped char"
                );
                if !rows {
                    assert!(shown.insert(s.clone()), "{s:?} printed for two names");
                }
                // A bare rendering never holds `:` and never starts with `"`.
                if !s.starts_with('"') {
                    assert!(!s.contains(':') && !s.is_empty(), "{s:?}");
                }
            }
        }
        assert!(names.len() > 4000, "{}", names.len());
    }

    fn row_form(name: &[u8]) -> String {
        match std::str::from_utf8(name) {
            Ok(t) => display_in_rows(t).into_owned(),
            Err(_) => quote_bytes(name),
        }
    }

    /// A row `P:N:T` or `P-N-T` with a bare `P` is read back by cutting at the first `:` or
    /// `-<digits>-`: for every name the rows form prints bare, that cut finds the name.
    #[test]
    fn bare_names_in_rows_end_at_the_first_separator() {
        fn cut(row: &str) -> usize {
            let colon = row.find(':').unwrap_or(row.len());
            let b = row.as_bytes();
            let mut dash = row.len();
            for i in 0..b.len() {
                if b[i] == b'-' {
                    let d = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    if d > 0 && b.get(i + 1 + d) == Some(&b'-') {
                        dash = i;
                        break;
                    }
                }
            }
            colon.min(dash)
        }
        let parts = ["a", "-", "1", "-1", "1-", "x-2", "--", "3", "b-c", ".rs"];
        for a in parts {
            for b in parts {
                for c in parts {
                    let name = format!("{a}{b}{c}");
                    let shown = display_in_rows(&name);
                    for row in [format!("{shown}:7:t-1-x:y"), format!("{shown}-7-t:1:x")] {
                        let (got, _) = parse(&row, cut).unwrap();
                        assert_eq!(got, name.as_bytes(), "{row:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn escaped_collects_each_quoted_name_once_with_a_cap() {
        let mut e = Escaped::new();
        assert_eq!(e.show("plain.rs"), "plain.rs");
        let mut data = serde_json::json!({"k": 1});
        e.add_to(&mut data);
        assert_eq!(
            data,
            serde_json::json!({"k": 1}),
            "ordinary output unchanged"
        );
        assert_eq!(e.show("a:b"), "\"a:b\"");
        e.show("a:b");
        for i in 0..30 {
            e.show(&format!("n\n{i}"));
        }
        e.add_to(&mut data);
        assert_eq!(
            data["escaped_names"].as_array().unwrap().len(),
            MAX_ESCAPED_NAMES
        );
        assert_eq!(data["escaped_names"][0], "a:b");
        assert_eq!(data["escaped_names"][1], "n\n0");
        assert_eq!(data["escaped_names_total"], 31);
    }

    #[test]
    fn parse_refuses_malformed_quotes() {
        assert!(parse("\"open", |s| s.len()).is_none());
        assert!(parse("\"\\q\"", |s| s.len()).is_none());
        assert!(parse("\"\\x4\"", |s| s.len()).is_none());
        assert!(parse("\"\\u{110000}\"", |s| s.len()).is_none());
        assert_eq!(
            parse("\"a:b\":3:text", |s| s.len()).unwrap(),
            (b"a:b".to_vec(), ":3:text")
        );
        assert_eq!(
            parse("a.rs:3:x", |s| s.find(':').unwrap()).unwrap(),
            (b"a.rs".to_vec(), ":3:x")
        );
    }
}
