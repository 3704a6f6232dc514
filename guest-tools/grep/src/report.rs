//! The closing note, the summary and `data`, and the rows' text.

use crate::options::Mode;
use crate::search::Searcher;
use crate::{MAX_FILE_BYTES, MAX_HEAD_LIMIT, MAX_LINE_CHARS};
use toolgate_guest::{json, text, Report, Value};

pub(crate) fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// What the call was, for the notes.
pub(crate) struct Asked<'a> {
    pub pattern: &'a str,
    pub start_rel: &'a str,
    pub types: Option<&'a [String]>,
    pub walk_errors: usize,
}

impl Searcher<'_> {
    pub(crate) fn finish(mut self, asked: &Asked) -> Report {
        let pattern = asked.pattern;
        let exact = !self.stopped;
        let at_least = if exact { "" } else { "at least " };
        let files_text = format!(
            "{at_least}{} file{}",
            self.files_matched,
            plural(self.files_matched)
        );
        let total = self.results;
        let shown_to = self.offset.saturating_add(self.returned);
        let more = self.stopped || total > shown_to;
        let next_offset = more.then_some(shown_to);
        let unit = match self.mode {
            Mode::Content => "matching lines",
            Mode::FilesWithMatches | Mode::Count => "files with matches",
        };
        let from = if self.offset > 0 {
            format!(", from offset={}", self.offset)
        } else {
            String::new()
        };
        let total_text = format!("{at_least}{total}");
        let lines_text = format!("{at_least}{} matching lines", self.seen);
        let mut content = self.budget.into_string();
        if total == 0 {
            content.push_str(&format!(
                "No matches for `{pattern}` in {} file{} searched under {}",
                self.files_searched,
                plural(self.files_searched),
                self.escaped.show(asked.start_rel)
            ));
            if let Some(types) = asked.types {
                content.push_str(&format!(" of type {}", types.join(", ")));
            }
            if self.binary_skipped > 0 {
                content.push_str(&format!(
                    " ({} binary file{} skipped)",
                    self.binary_skipped,
                    plural(self.binary_skipped)
                ));
            }
            content.push('\n');
            if !self.multiline && (pattern.contains("\\n") || pattern.contains('\n')) {
                content.push_str(
                    "[the pattern has `\\n` but lines are matched one at a time: pass \
                     multiline=true to match across lines]\n",
                );
            }
        } else if self.returned == 0 && !more {
            content.push_str(&format!(
                "No results at offset={}: there are {total} {unit}{}; results are counted \
                 from 0, so use an offset below {total}\n",
                self.offset,
                match self.mode {
                    Mode::Content => format!(" in {files_text}"),
                    _ => String::new(),
                },
            ));
        } else if more {
            let why = if self.returned >= self.limit {
                format!("head_limit={}", self.limit)
            } else {
                "the output size budget".to_string()
            };
            let raise = if self.returned >= self.limit && self.limit < MAX_HEAD_LIMIT {
                ", raise head_limit"
            } else {
                ""
            };
            let of = match self.mode {
                Mode::Content => format!("{total_text} matching lines in {files_text}"),
                Mode::FilesWithMatches => format!("{total_text} files with matches"),
                Mode::Count => format!("{total_text} files with matches ({lines_text})"),
            };
            let showing = match self.mode {
                Mode::Count => "showing counts for",
                _ => "showing",
            };
            content.push_str(&format!(
                "[truncated: {showing} {} of {of}{from} (limited by {why}); continue with \
                 offset={shown_to}{raise}, or narrow the pattern or use path/include/type]\n",
                self.returned
            ));
        } else if self.offset > 0 {
            content.push_str(&format!(
                "[the last {} of {total} {unit}{from}: no more results]\n",
                self.returned
            ));
        }
        if self.budget_full && !more {
            content.push_str("[the output size budget cut some context lines]\n");
        }
        if self.too_large > 0 {
            content.push_str(&format!(
                "[{} file{} larger than {} MiB not searched]\n",
                self.too_large,
                plural(self.too_large),
                MAX_FILE_BYTES >> 20
            ));
        }
        let summary = if total == 0 {
            format!(
                "grep `{pattern}`: no matches in {} files",
                self.files_searched
            )
        } else {
            match self.mode {
                Mode::Content if more || self.offset > 0 => format!(
                    "grep `{pattern}`: showing {} of {total_text} matching lines in {files_text}{from}",
                    self.returned
                ),
                Mode::Content => {
                    format!("grep `{pattern}`: {total} matching lines in {files_text}")
                }
                Mode::FilesWithMatches if more || self.offset > 0 => format!(
                    "grep `{pattern}`: showing {} of {total_text} files with matches{from}",
                    self.returned
                ),
                Mode::FilesWithMatches => format!("grep `{pattern}`: {total} files with matches"),
                Mode::Count if more || self.offset > 0 => format!(
                    "grep `{pattern}`: showing counts for {} of {total_text} files with matches ({lines_text}){from}",
                    self.returned
                ),
                Mode::Count => format!("grep `{pattern}`: {lines_text} in {files_text}"),
            }
        };
        let counted_lines = |n: u64| match self.mode {
            Mode::FilesWithMatches => Value::Null,
            _ => json!(n),
        };
        let mut data = json!({
            "pattern": pattern,
            "path": asked.start_rel,
            "output_mode": self.mode.name(),
            "offset": self.offset,
            "head_limit": self.limit,
            "next_offset": next_offset,
            "results": total,
            "results_returned": self.returned,
            "matches": counted_lines(self.seen),
            "matches_returned": counted_lines(self.lines_returned),
            "matches_exact": exact,
            "files_searched": self.files_searched,
            "files_matched": self.files_matched,
            "files_returned": self.files_returned,
            "binary_files_skipped": self.binary_skipped,
            "large_files_skipped": self.too_large,
            "unreadable": self.unreadable + asked.walk_errors as u64,
        });
        if let (Some(types), Some(map)) = (asked.types, data.as_object_mut()) {
            map.insert("type".into(), json!(types));
        }
        self.escaped.add_to(&mut data);
        let totals = match self.mode {
            Mode::Content => vec![
                ("matches", self.seen, self.lines_returned),
                ("files", self.files_matched, self.files_returned),
            ],
            Mode::FilesWithMatches => vec![("files", self.files_matched, self.files_returned)],
            Mode::Count => vec![
                ("files", self.files_matched, self.files_returned),
                ("matches", self.seen, self.lines_returned),
            ],
        };
        Report {
            summary,
            content,
            truncated: more,
            totals,
            data,
        }
    }
}

/// Append `rel{sep}no{sep}text` to `row`, the text without its `\r`, shown lossily as UTF-8
/// and cut to [`MAX_LINE_CHARS`]; when the match is far into a long line, the shown part starts
/// shortly before it.
pub(crate) fn push_row(
    row: &mut String,
    rel: &str,
    sep: char,
    no: u64,
    line: &[u8],
    match_col: usize,
) {
    use std::fmt::Write as _;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let _ = write!(row, "{rel}{sep}{no}{sep}");
    // Cheap path: short ASCII/UTF-8 lines.
    if line.len() <= MAX_LINE_CHARS {
        row.push_str(&String::from_utf8_lossy(line));
        return;
    }
    let mut from = 0;
    if match_col > MAX_LINE_CHARS / 2 {
        from = match_col - 100;
        // Do not start inside a UTF-8 sequence.
        while from < line.len() && (line[from] & 0xC0) == 0x80 {
            from += 1;
        }
    }
    let window = &line[from..line.len().min(from + MAX_LINE_CHARS * 4)];
    let shown = String::from_utf8_lossy(window);
    let (kept, _) = text::cut_chars(&shown, MAX_LINE_CHARS);
    if kept.len() == shown.len() && from + window.len() == line.len() && from == 0 {
        row.push_str(kept);
        return;
    }
    if from > 0 {
        let _ = write!(row, "[…{from} bytes] ");
    }
    row.push_str(kept);
    let _ = write!(
        row,
        " […line cut at {MAX_LINE_CHARS} chars; the line has {} bytes]",
        line.len()
    );
}
