//! Between the tools' places (1-based lines, columns in characters) and LSP's (0-based lines,
//! columns in UTF-16 code units), and a server's text edits applied to a file's text.

use serde_json::Value;

/// The text of line `line0` (0-based) without its line ending, if the text has that line.
pub fn line_text(text: &str, line0: usize) -> Option<&str> {
    let mut lines = text.split('\n');
    let l = lines.nth(line0)?;
    Some(l.strip_suffix('\r').unwrap_or(l))
}

/// UTF-16 units before character `chars` of `line` (past the end: the line's length).
pub fn utf16_of_chars(line: &str, chars: usize) -> u32 {
    let n: usize = line.chars().take(chars).map(char::len_utf16).sum();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Characters before UTF-16 unit `units` of `line`.
pub fn chars_of_utf16(line: &str, units: u64) -> u64 {
    let mut seen = 0u64;
    let mut chars = 0u64;
    for c in line.chars() {
        if seen >= units {
            break;
        }
        seen += c.len_utf16() as u64;
        chars += 1;
    }
    chars
}

/// Byte offset in `text` of the LSP position `(line0, utf16)`; a position past a line's end
/// is its end, past the text's end is the text's end (as LSP says).
pub fn byte_offset(text: &str, line0: u64, utf16: u64) -> usize {
    let mut start = 0usize;
    for _ in 0..line0 {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line = &text[start..end];
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut seen = 0u64;
    for (i, c) in line.char_indices() {
        if seen >= utf16 {
            return start + i;
        }
        seen += c.len_utf16() as u64;
    }
    start + line.len()
}

/// The first whole-word occurrence of `word` in `line`, as a character column (0-based).
pub fn find_word(line: &str, word: &str) -> Option<usize> {
    if word.is_empty() {
        return None;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = line[from..].find(word) {
        let at = from + i;
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
            return Some(line[..at].chars().count());
        }
        from = at + word.len().max(1);
        if from > line.len() {
            break;
        }
        while !line.is_char_boundary(from) {
            from += 1;
        }
    }
    None
}

/// The identifier under character column `col` of `line`, if any.
pub fn word_at(line: &str, col: usize) -> Option<String> {
    let chars: Vec<char> = line.chars().collect();
    let is_word = |c: &char| c.is_alphanumeric() || *c == '_';
    if col >= chars.len() || !is_word(&chars[col]) {
        return None;
    }
    let mut a = col;
    while a > 0 && is_word(&chars[a - 1]) {
        a -= 1;
    }
    let mut b = col;
    while b < chars.len() && is_word(&chars[b]) {
        b += 1;
    }
    Some(chars[a..b].iter().collect())
}

/// Apply a server's `TextEdit`s to `text` (all positions refer to the original text): the new
/// text, or why not (overlapping edits, a malformed one).
pub fn apply_edits(text: &str, edits: &[Value]) -> Result<String, String> {
    let mut spans = Vec::with_capacity(edits.len());
    for e in edits {
        let r = &e["range"];
        let (Some(sl), Some(sc), Some(el), Some(ec)) = (
            r["start"]["line"].as_u64(),
            r["start"]["character"].as_u64(),
            r["end"]["line"].as_u64(),
            r["end"]["character"].as_u64(),
        ) else {
            return Err("the language server sent an edit without a valid range".into());
        };
        let Some(new) = e["newText"].as_str() else {
            return Err("the language server sent an edit without its new text".into());
        };
        let a = byte_offset(text, sl, sc);
        let b = byte_offset(text, el, ec);
        if b < a {
            return Err("the language server sent an edit whose end is before its start".into());
        }
        spans.push((a, b, new));
    }
    spans.sort_by_key(|s| (s.0, s.1));
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err("the language server sent overlapping edits".into());
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (a, b, new) in spans {
        out.push_str(&text[at..a]);
        out.push_str(new);
        at = b;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// LSP's `SymbolKind` in words.
pub fn symbol_kind(k: u64) -> &'static str {
    const KINDS: [&str; 26] = [
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum member",
        "struct",
        "event",
        "operator",
        "type parameter",
    ];
    usize::try_from(k)
        .ok()
        .and_then(|k| k.checked_sub(1))
        .and_then(|i| KINDS.get(i))
        .copied()
        .unwrap_or("symbol")
}

/// LSP's `DiagnosticSeverity` in words (absent: an error, as LSP suggests clients assume).
pub fn severity(s: Option<u64>) -> &'static str {
    match s {
        Some(2) => "warning",
        Some(3) => "information",
        Some(4) => "hint",
        _ => "error",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_count_characters_for_the_tools_and_utf16_for_the_server() {
        let line = "é𝄞x = 1";
        assert_eq!(utf16_of_chars(line, 2), 3);
        assert_eq!(chars_of_utf16(line, 3), 2);
        let text = "a\r\né𝄞x = 1\n";
        assert_eq!(&text[byte_offset(text, 1, 3)..byte_offset(text, 1, 4)], "x");
        assert_eq!(byte_offset(text, 1, 99), text.len() - 1);
        assert_eq!(byte_offset(text, 9, 0), text.len());
        assert_eq!(line_text(text, 0), Some("a"));
    }

    #[test]
    fn words_are_found_whole() {
        assert_eq!(find_word("foo_bar = foo(bar)", "foo"), Some(10));
        assert_eq!(find_word("éfoo foo", "foo"), Some(5));
        assert_eq!(find_word("food", "foo"), None);
        assert_eq!(word_at("x = foo_1(y)", 5).as_deref(), Some("foo_1"));
        assert_eq!(word_at("x = foo(y)", 3), None);
    }

    #[test]
    fn edits_apply_against_the_original_text_and_overlaps_are_refused() {
        let edit = |l, a, b, t: &str| json!({"range": {"start": {"line": l, "character": a}, "end": {"line": l, "character": b}}, "newText": t});
        let text = "def foo():\n    return foo\n";
        let out = apply_edits(text, &[edit(1, 11, 14, "bar"), edit(0, 4, 7, "bar")]).unwrap();
        assert_eq!(out, "def bar():\n    return bar\n");
        let e = apply_edits(text, &[edit(0, 0, 5, "x"), edit(0, 3, 7, "y")]).unwrap_err();
        assert!(e.contains("overlapping"), "{e}");
        assert!(apply_edits(text, &[json!({"newText": "x"})]).is_err());
    }
}
