//! A numbered excerpt of the changed region, in `read`'s `{number:>6}\t{text}` format.

use crate::split_lines;

/// Lines of context around the changed region.
pub const CONTEXT: usize = 3;
/// Most lines of the changed region shown before the middle is elided.
const MAX_REGION: usize = 30;
/// Longest line shown (characters).
const MAX_LINE_CHARS: usize = 500;

/// Lines `first..=last` (1-based) of `text` with [`CONTEXT`] lines around them, numbered. A long
/// region shows its start and end with the middle elided; the whole excerpt stays under
/// `max_bytes`.
pub fn snippet(text: &str, first: usize, last: usize, max_bytes: usize) -> String {
    let lines = split_lines(text);
    if lines.is_empty() {
        return "(the file is now empty)\n".to_string();
    }
    let first = first.clamp(1, lines.len());
    let last = last.clamp(first, lines.len());
    let from = first.saturating_sub(CONTEXT).max(1);
    let to = (last + CONTEXT).min(lines.len());
    let mut numbers: Vec<Option<usize>> = Vec::new();
    if last - first + 1 > MAX_REGION {
        let half = MAX_REGION / 2;
        numbers.extend((from..first + half).map(Some));
        numbers.push(None);
        numbers.extend((last + 1 - half..=to).map(Some));
    } else {
        numbers.extend((from..=to).map(Some));
    }
    let mut out = String::new();
    let mut elided = 0;
    for n in numbers {
        let row = match n {
            Some(n) => format!("{n:>6}\t{}\n", clip(lines[n - 1])),
            None => {
                let hidden = last + 1 - MAX_REGION / 2 - (first + MAX_REGION / 2);
                format!("     …\t({hidden} more changed lines)\n")
            }
        };
        if out.len() + row.len() > max_bytes {
            elided += 1;
            continue;
        }
        out.push_str(&row);
    }
    if elided > 0 {
        let note = format!("(excerpt cut: {elided} more lines; read the file to see them)\n");
        if out.len() + note.len() <= max_bytes {
            out.push_str(&note);
        }
    }
    out
}

fn clip(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        return line.to_string();
    }
    let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
    format!("{cut}… (line cut)")
}
