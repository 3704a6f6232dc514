//! Cutting text to a budget, always visibly (what was left out is said in the text itself),
//! and showing names and text from a guest, a model or a file as plain, unambiguous text.

pub mod forms;

/// Cut `content` to `max` bytes keeping the head and the tail, with a visible marker saying
/// how much was left out and where the whole is. Returns `None` when it already fits.
pub fn cut_head_tail(content: &str, max: usize, full_ref: &str) -> Option<String> {
    if content.len() <= max {
        return None;
    }
    let marker_room = 200;
    let keep = max.saturating_sub(marker_room);
    let head_len = floor_boundary(content, keep * 2 / 3);
    let tail_start = ceil_boundary(
        content,
        content.len() - (keep - head_len).min(content.len()),
    );
    let head = &content[..head_len];
    let tail = &content[tail_start.max(head_len)..];
    let omitted = content.len() - head.len() - tail.len();
    let omitted_lines = content[head_len..tail_start.max(head_len)].lines().count();
    Some(format!(
        "{head}\n[... truncated: {omitted} bytes ({omitted_lines} lines) omitted; the whole output is in {full_ref}: read it with offset/limit ...]\n{tail}"
    ))
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Whether `c` cannot be shown as itself in a name: a control character (newline, tab, ESC,
/// DEL, C1), a bidi control or override, a line or paragraph separator, or an invisible
/// joiner/marker. Any of these in a path could make a prompt read differently from what runs.
/// The same set as the tools' own rendering (`guest-tools/sdk/src/names.rs`): controls, soft
/// hyphen, bidi marks and overrides, zero-width and invisible format characters, line and
/// paragraph separators, interlinear annotations and tag characters.
pub(crate) fn unshowable(c: char) -> bool {
    c.is_control()
        || matches!(
            c as u32,
            0xad | 0x061c
                | 0x180e
                | 0x200b..=0x200f
                | 0x2028..=0x202e
                | 0x2060..=0x206f
                | 0xfeff
                | 0xfff9..=0xfffb
                | 0xe0000..=0xe007f
        )
}

/// A name (a path from the input, a key) as a prompt shows it, on one line and unambiguous.
/// An ordinary name is returned unchanged. A name holding a control character, a bidi
/// control, a line separator or an invisible marker (or starting with `"`) is shown quoted, with `\n`, `\t`, `\r`, `\x1b` (other ASCII controls
/// likewise), `\u{202e}` (anything else), and `\\`, `\"` for a backslash and a quote, so a
/// quoted name is always one that was escaped.
pub fn escape_name(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.starts_with('"') && !name.chars().any(unshowable) {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    out.push('"');
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => push_shown(&mut out, c),
        }
    }
    out.push('"');
    std::borrow::Cow::Owned(out)
}

/// Push `c` as a prompt shows it: `\n`, `\t`, `\r`; `\x1b` for another ASCII character that
/// cannot be shown ([`unshowable`]), `\u{202e}` for any other; else `c` itself.
pub(crate) fn push_shown(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x80 && unshowable(c) => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if unshowable(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        c => out.push(c),
    }
}

/// Remove control characters and ANSI escape sequences so a prompt shows only plain text.
pub fn plain_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ ... final byte in @..~ ; OSC: ESC ] ... BEL or ESC \ ; else skip one.
                match chars.peek() {
                    Some('[') => {
                        chars.next();
                        for c in chars.by_ref() {
                            if ('@'..='~').contains(&c) {
                                break;
                            }
                        }
                    }
                    Some(']') => {
                        chars.next();
                        while let Some(c) = chars.next() {
                            if c == '\u{7}' {
                                break;
                            }
                            if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                                chars.next();
                                break;
                            }
                        }
                    }
                    Some(_) => {
                        chars.next();
                    }
                    None => {}
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            // Bidi overrides can make text read differently from what runs.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {
                out.push_str(&format!("\\u{{{:04x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// The candidate closest to `name` (a mistyped tool name: `eddit`, `edt`), when one is at
/// most two edits away; for a "did you mean" in an error.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_head_and_tail_and_says_so() {
        let text: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
        let cut = cut_head_tail(&text, 4096, ".toolgate/outputs/x.txt").unwrap();
        assert!(cut.len() <= 4096 + 200, "{}", cut.len());
        assert!(cut.starts_with("line 0\n"));
        assert!(cut.trim_end().ends_with("line 9999"));
        assert!(cut.contains("truncated"));
        assert!(cut.contains(".toolgate/outputs/x.txt"));
        assert_eq!(cut_head_tail("short", 4096, "x"), None);
    }

    #[test]
    fn closest_suggests_a_near_name_only() {
        let tools = ["edit", "multiedit", "read", "write"];
        assert_eq!(closest("eddit", tools), Some("edit"));
        assert_eq!(closest("edt", tools), Some("edit"));
        assert_eq!(closest("wirte", tools), Some("write"));
        assert_eq!(closest("deploy", tools), None);
    }
}
