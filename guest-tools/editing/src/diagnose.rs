//! What to tell the model when `old_string` matches nothing: the closest region of the file with
//! invisible characters made visible, the first differing line, and hints about the usual causes
//! (tabs against spaces, invisible characters, typographic quotes, escaped newlines, line-number
//! prefixes copied from `read` output).

use crate::{normalize_ws, split_lines};
use serde_json::{json, Value};
use toolgate_guest::text::visible;

/// Lines of context shown around the closest region.
const CONTEXT: usize = 2;
/// Most lines of `old_string` compared when scoring a region.
const SCORED_LINES: usize = 6;
/// Most lines shown in the region.
const MAX_SHOWN: usize = 16;
/// Longest line shown (characters).
const MAX_LINE_CHARS: usize = 240;
/// Candidates kept from the first pass.
const CANDIDATES: usize = 8;
/// Below this similarity the region is called unlike `old_string`.
const WEAK: f64 = 0.5;

/// A diagnosis: the message for the model and structured detail.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnosis {
    /// The full error message.
    pub message: String,
    /// `{closest_line, similarity}` or null when the file is empty.
    pub data: Value,
}

/// Diagnose why `old` (already in the document's line endings) is not in `text`.
pub fn diagnose(text: &str, old: &str) -> Diagnosis {
    let mut message = String::from(
        "old_string was not found in the file: there is no exact match, and none when whitespace \
         is ignored either.",
    );
    let file_lines = split_lines(text);
    let old_lines = split_lines(old);
    let mut hints = Vec::new();
    if looks_line_numbered(&old_lines) {
        hints.push(
            "old_string seems to start its lines with line numbers copied from read output \
             (`   12\\t...`); leave the number and the tab after it out."
                .to_string(),
        );
    }
    if file_lines.is_empty() {
        message.push_str(" The file is empty.");
        push_hints(&mut message, &hints);
        return Diagnosis {
            message,
            data: Value::Null,
        };
    }

    let (start, score) = closest(&file_lines, &old_lines);
    let m = old_lines.len().max(1);
    let region_end = (start + m).min(file_lines.len());
    let norm_old: Vec<String> = old_lines.iter().map(|l| normalize_ws(l)).collect();
    let differs = |idx: usize| -> bool {
        match (idx.checked_sub(start), file_lines.get(idx)) {
            (Some(j), Some(line)) if idx < start + m => {
                norm_old.get(j).is_none_or(|o| *o != normalize_ws(line))
            }
            _ => false,
        }
    };

    let show_from = start.saturating_sub(CONTEXT);
    let show_to = (region_end + CONTEXT).min(file_lines.len());
    let shown_to = show_to.min(show_from + MAX_SHOWN);
    message.push_str(&format!(
        "\nClosest region of the file, lines {}-{} (`→` tab, `·` trailing space, `␍` carriage \
         return, `\\u{{…}}` invisible character; `>` marks lines that differ from old_string):\n",
        show_from + 1,
        shown_to
    ));
    for (idx, line) in file_lines.iter().enumerate().take(shown_to).skip(show_from) {
        let marker = if differs(idx) { '>' } else { ' ' };
        message.push_str(&format!(
            "{marker}{:>6}\t{}\n",
            idx + 1,
            clip(&visible(line))
        ));
    }
    if shown_to < show_to {
        message.push_str(&format!("       \t… ({} more lines)\n", show_to - shown_to));
    }

    // The first line of old_string that differs from the region.
    let first_diff = (0..old_lines.len()).find(|&j| {
        file_lines
            .get(start + j)
            .is_none_or(|line| normalize_ws(line) != norm_old[j])
    });
    match first_diff {
        Some(j) if start + j < file_lines.len() => {
            message.push_str(&format!(
                "First difference, old_string line {} against file line {}:\n  old_string: `{}`\n  file:       `{}`\n",
                j + 1,
                start + j + 1,
                clip(&visible(old_lines[j])),
                clip(&visible(file_lines[start + j])),
            ));
        }
        Some(_) => {
            message.push_str(&format!(
                "old_string has {} lines, but the file ends at line {} below the closest region.\n",
                old_lines.len(),
                file_lines.len()
            ));
        }
        None => {}
    }

    let region = &file_lines[start..region_end];
    hints.extend(whitespace_hints(&old_lines, region));
    hints.extend(char_hints(old, region, start));
    if score < WEAK {
        hints.push(
            "Nothing in the file closely resembles old_string: the file may have changed, or \
             this may be the wrong file. Read it again before editing."
                .to_string(),
        );
    }
    push_hints(&mut message, &hints);
    message.push_str("Read the file again and copy old_string exactly from it.");
    Diagnosis {
        message,
        data: json!({
            "closest_line": start + 1,
            "similarity": (score * 100.0).round() / 100.0,
        }),
    }
}

fn push_hints(message: &mut String, hints: &[String]) {
    for hint in hints {
        if !message.ends_with('\n') {
            message.push('\n');
        }
        message.push_str("Hint: ");
        message.push_str(hint);
        message.push('\n');
    }
    if !message.ends_with('\n') {
        message.push('\n');
    }
}

fn clip(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        return line.to_string();
    }
    let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
    format!("{cut}… (line cut)")
}

/// The start of the window of file lines most like `old_lines`, and its similarity (0 to 1).
fn closest(file_lines: &[&str], old_lines: &[&str]) -> (usize, f64) {
    // Anchor on old_string's first non-blank line, scored against every file line.
    let anchor = old_lines
        .iter()
        .position(|l| !l.trim().is_empty())
        .unwrap_or(0);
    let anchor_grams = bigrams(&normalize_ws(old_lines.get(anchor).copied().unwrap_or("")));
    let mut candidates: Vec<(f64, usize)> = Vec::with_capacity(CANDIDATES + 1);
    for (i, line) in file_lines.iter().enumerate() {
        let s = dice(&anchor_grams, &bigrams(&normalize_ws(line)));
        if candidates.len() < CANDIDATES || s > candidates[candidates.len() - 1].0 {
            candidates.push((s, i));
            candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            candidates.truncate(CANDIDATES);
        }
    }
    // Score whole windows around the candidates.
    let scored = old_lines.len().clamp(1, SCORED_LINES);
    let old_grams: Vec<Vec<u64>> = old_lines
        .iter()
        .take(scored)
        .map(|l| bigrams(&normalize_ws(l)))
        .collect();
    let mut best = (0usize, -1.0f64);
    for &(_, i) in &candidates {
        let start = i.saturating_sub(anchor);
        let mut total = 0.0;
        for (j, grams) in old_grams.iter().enumerate() {
            total += file_lines
                .get(start + j)
                .map(|l| dice(grams, &bigrams(&normalize_ws(l))))
                .unwrap_or(0.0);
        }
        let score = total / old_grams.len().max(1) as f64;
        if score > best.1 || (score == best.1 && start < best.0) {
            best = (start, score);
        }
    }
    (
        best.0.min(file_lines.len().saturating_sub(1)),
        best.1.max(0.0),
    )
}

/// Sorted character bigrams of `s`; a one-character string is its own gram.
fn bigrams(s: &str) -> Vec<u64> {
    let chars: Vec<char> = s.chars().collect();
    let mut grams: Vec<u64> = if chars.len() < 2 {
        chars.iter().map(|&c| c as u64).collect()
    } else {
        chars
            .windows(2)
            .map(|w| ((w[0] as u64) << 32) | w[1] as u64)
            .collect()
    };
    grams.sort_unstable();
    grams
}

/// Dice similarity of two sorted gram lists (1 for two empty lines).
fn dice(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * common as f64 / (a.len() + b.len()) as f64
}

/// Whether most non-blank lines start with a `read`-style line number (`  12\t`, `12→`, `12│`,
/// `12:`, `12|`).
fn looks_line_numbered(lines: &[&str]) -> bool {
    let non_blank: Vec<&&str> = lines.iter().filter(|l| !l.trim().is_empty()).collect();
    if non_blank.is_empty() {
        return false;
    }
    let numbered = non_blank
        .iter()
        .filter(|l| {
            let t = l.trim_start_matches(' ');
            let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            digits > 0 && {
                let rest = &t[digits..];
                rest.starts_with('\t')
                    || rest.starts_with('→')
                    || rest.starts_with('│')
                    || rest.starts_with(": ")
                    || rest.starts_with('|')
            }
        })
        .count();
    numbered * 2 > non_blank.len()
}

fn indent_kind(lines: &[&str]) -> (usize, usize) {
    let mut tabs = 0;
    let mut spaces = 0;
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        if line.starts_with('\t') {
            tabs += 1;
        } else if line.starts_with(' ') {
            spaces += 1;
        }
    }
    (tabs, spaces)
}

fn whitespace_hints(old_lines: &[&str], region: &[&str]) -> Vec<String> {
    let mut hints = Vec::new();
    let (old_tabs, old_spaces) = indent_kind(old_lines);
    let (file_tabs, file_spaces) = indent_kind(region);
    if file_tabs > 0 && file_spaces == 0 && old_spaces > 0 && old_tabs == 0 {
        hints.push(
            "the file indents these lines with tabs (`→`) and old_string with spaces. \
             Indentation alone is tolerated, so the text itself differs too."
                .to_string(),
        );
    } else if file_spaces > 0 && file_tabs == 0 && old_tabs > 0 && old_spaces == 0 {
        hints.push(
            "the file indents these lines with spaces and old_string with tabs. Indentation \
             alone is tolerated, so the text itself differs too."
                .to_string(),
        );
    }
    hints
}

fn char_name(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{200B}' => "zero-width space",
        '\u{200C}' => "zero-width non-joiner",
        '\u{200D}' => "zero-width joiner",
        '\u{2060}' => "word joiner",
        '\u{FEFF}' => "byte-order mark / zero-width no-break space",
        '\u{00AD}' => "soft hyphen",
        '\u{00A0}' => "no-break space",
        '\r' => "carriage return",
        _ => return None,
    })
}

fn char_hints(old: &str, region: &[&str], start: usize) -> Vec<String> {
    let mut hints = Vec::new();
    // Invisible characters present on one side only.
    for (idx, line) in region.iter().enumerate() {
        if let Some(c) = line
            .chars()
            .find(|&c| char_name(c).is_some() && !old.contains(c))
        {
            hints.push(format!(
                "file line {} contains U+{:04X} ({}), shown as `{}` above, which old_string does \
                 not have. Include it, or choose old_string so it does not span that character.",
                start + idx + 1,
                c as u32,
                char_name(c).unwrap_or("invisible character"),
                visible(&c.to_string()),
            ));
            break;
        }
    }
    let region_text = region.join("\n");
    if let Some(c) = old
        .chars()
        .find(|&c| char_name(c).is_some() && !region_text.contains(c))
    {
        hints.push(format!(
            "old_string contains U+{:04X} ({}) that the file does not have there; remove it.",
            c as u32,
            char_name(c).unwrap_or("invisible character"),
        ));
    }
    let typographic = ['‘', '’', '“', '”'];
    let old_curly = old.chars().any(|c| typographic.contains(&c));
    let file_curly = region_text.chars().any(|c| typographic.contains(&c));
    if old_curly && !file_curly {
        hints.push(
            "old_string has typographic quotes (‘ ’ “ ”) where the file has plain ' or \"."
                .to_string(),
        );
    } else if file_curly && !old_curly {
        hints.push(
            "the file has typographic quotes (‘ ’ “ ”) where old_string has plain ' or \"."
                .to_string(),
        );
    }
    for (escaped, meaning) in [("\\n", "a line break"), ("\\t", "a tab")] {
        if old.contains(escaped) && !region_text.contains(escaped) {
            hints.push(format!(
                "old_string contains a literal backslash sequence `{escaped}` that the file does \
                 not have there; if you meant {meaning}, use the real character."
            ));
        }
    }
    hints
}
