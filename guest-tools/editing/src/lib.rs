//! The edit algorithm shared by the `edit` and `multiedit` tools.
//!
//! A [`Document`] holds a file's text with its line endings normalized to LF (a CRLF file is
//! converted back when rendered) and applies one edit at a time:
//!
//! 1. `old_string` is looked up exactly. One occurrence is replaced; several are an
//!    `ambiguous-match` error unless `replace_all` is set.
//! 2. Without an exact occurrence, `old_string`'s lines are compared to every window of whole
//!    file lines with whitespace normalized (trimmed, runs collapsed). A unique window (or every
//!    window with `replace_all`) is replaced line by line, and `new_string` is re-indented to the
//!    file's indentation ([`indent`]). The result carries a note saying the match was not exact.
//! 3. Without any match the error is `no-match` with a diagnosis of the closest region
//!    ([`diagnose`]).
//!
//! A trailing newline at the end of the file is kept. [`fsio`] has the atomic write the tools
//! use and [`snippet`] the numbered excerpt they show.

pub mod diagnose;
pub mod fsio;
pub mod indent;
pub mod snippet;

use serde_json::{json, Value};
use std::borrow::Cow;
use toolgate_guest::ToolError;

/// How many occurrence line numbers an ambiguity error lists.
const AMBIGUOUS_LINES_SHOWN: usize = 5;

/// An edit that could not be applied: a stable code, a message for the model and detail.
#[derive(Clone, Debug, PartialEq)]
pub struct EditError {
    /// Machine-readable code: `no-change`, `ambiguous-match`, `no-match`, `empty-old-string`.
    pub code: &'static str,
    /// What went wrong and what to do about it.
    pub message: String,
    /// Structured detail.
    pub data: Value,
}

impl EditError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        EditError {
            code,
            message: message.into(),
            data: Value::Null,
        }
    }

    /// The error as a tool error, its message prefixed with `prefix` when that is not empty.
    pub fn into_tool_error(self, prefix: &str) -> ToolError {
        let message = if prefix.is_empty() {
            self.message
        } else {
            format!("{prefix}{}", self.message)
        };
        ToolError::new(self.code, message).data(self.data)
    }
}

/// One successful edit.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    /// How many places were replaced.
    pub replacements: usize,
    /// Whether `old_string` matched exactly (false: whitespace-normalized fallback).
    pub exact: bool,
    /// First line (1-based) of the changed region in the new text.
    pub first_line: usize,
    /// Last line (1-based) of the changed region in the new text (equal to `first_line` when
    /// lines were only deleted).
    pub last_line: usize,
    /// Whether the edit filled an empty (or new) file.
    pub filled_empty: bool,
    /// A note for the model when the match was not exact.
    pub note: Option<String>,
}

/// The line endings of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineEnding {
    /// Every line ends with LF.
    Lf,
    /// Every line ends with CRLF; the text is held with LF and converted back on render.
    Crlf,
    /// Both kinds occur; the text is held as it is.
    Mixed,
    /// No line ending at all (empty or one line); the text is held as it is.
    Unknown,
}

/// A file's text being edited.
#[derive(Clone, Debug)]
pub struct Document {
    bom: bool,
    text: String,
    ending: LineEnding,
}

impl Document {
    /// A document for the file contents `raw`.
    pub fn new(raw: &str) -> Self {
        let (bom, body) = match raw.strip_prefix('\u{FEFF}') {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        let lf = body.bytes().filter(|&b| b == b'\n').count();
        let crlf = body.matches("\r\n").count();
        let ending = if lf == 0 {
            LineEnding::Unknown
        } else if crlf == lf {
            LineEnding::Crlf
        } else if crlf == 0 {
            LineEnding::Lf
        } else {
            LineEnding::Mixed
        };
        let text = if ending == LineEnding::Crlf {
            body.replace("\r\n", "\n")
        } else {
            body.to_string()
        };
        Document { bom, text, ending }
    }

    /// The text being edited (LF line endings when the file uses CRLF).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The file's line endings.
    pub fn ending(&self) -> LineEnding {
        self.ending
    }

    /// The file contents to write: original line endings and byte-order mark restored.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.text.len() + 16);
        if self.bom {
            out.push('\u{FEFF}');
        }
        if self.ending == LineEnding::Crlf {
            out.push_str(&self.text.replace('\n', "\r\n"));
        } else {
            out.push_str(&self.text);
        }
        out
    }

    /// Bring an `old_string`/`new_string` to the document's line endings.
    fn normalize<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match self.ending {
            LineEnding::Crlf | LineEnding::Lf if s.contains("\r\n") => {
                Cow::Owned(s.replace("\r\n", "\n"))
            }
            _ => Cow::Borrowed(s),
        }
    }

    /// Apply one edit. On error the document is unchanged.
    pub fn apply(&mut self, old: &str, new: &str, replace_all: bool) -> Result<Applied, EditError> {
        if old == new {
            return Err(no_change_identical());
        }
        if old.is_empty() {
            return self.fill_empty(new);
        }
        let old = self.normalize(old).into_owned();
        let new = self.normalize(new).into_owned();
        if old == new {
            return Err(no_change_identical());
        }
        if let Some(applied) = self.apply_exact(&old, &new, replace_all)? {
            return Ok(applied);
        }
        if let Some(applied) = self.apply_normalized(&old, &new, replace_all)? {
            return Ok(applied);
        }
        let diagnosis = diagnose::diagnose(&self.text, &old);
        Err(EditError {
            code: "no-match",
            message: diagnosis.message,
            data: diagnosis.data,
        })
    }

    fn fill_empty(&mut self, new: &str) -> Result<Applied, EditError> {
        if !self.text.is_empty() {
            return Err(EditError::new(
                "empty-old-string",
                "old_string is empty, which only creates a new file or fills an empty one, but \
                 this file has content. To change it, set old_string to the exact text to \
                 replace (include a few surrounding lines so it is unique); to replace the whole \
                 file, use the write tool.",
            ));
        }
        let bom = self.bom;
        *self = Document::new(new);
        self.bom = self.bom || bom;
        let lines = line_count(&self.text).max(1);
        Ok(Applied {
            replacements: 1,
            exact: true,
            first_line: 1,
            last_line: lines,
            filled_empty: true,
            note: None,
        })
    }

    fn apply_exact(
        &mut self,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<Option<Applied>, EditError> {
        let positions: Vec<usize> = self.text.match_indices(old).map(|(i, _)| i).collect();
        if positions.is_empty() {
            return Ok(None);
        }
        if positions.len() > 1 && !replace_all {
            let lines: Vec<usize> = positions
                .iter()
                .take(AMBIGUOUS_LINES_SHOWN)
                .map(|&p| line_at(&self.text, p))
                .collect();
            let shown = join_numbers(&lines);
            let more = if positions.len() > lines.len() {
                ", …"
            } else {
                ""
            };
            return Err(EditError {
                code: "ambiguous-match",
                message: format!(
                    "old_string matches {} places in the file (at lines {shown}{more}). Add \
                     surrounding lines to old_string so that it matches exactly one place, or \
                     set replace_all to true to replace every occurrence.",
                    positions.len()
                ),
                data: json!({"matches": positions.len(), "lines": lines, "exact": true}),
            });
        }
        let mut out = String::with_capacity(self.text.len() + new.len() * positions.len());
        let mut ranges = Vec::with_capacity(positions.len());
        let mut last = 0;
        for &p in &positions {
            out.push_str(&self.text[last..p]);
            let start = out.len();
            out.push_str(new);
            ranges.push((start, out.len()));
            last = p + old.len();
        }
        out.push_str(&self.text[last..]);
        if self.text.ends_with('\n') && !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        if out == self.text {
            return Err(no_change_result());
        }
        let (first_start, _) = ranges[0];
        let (last_start, last_end) = ranges[ranges.len() - 1];
        let first_line = line_at(&out, first_start);
        let last_line = if last_end > last_start {
            line_at(&out, last_end - 1)
        } else {
            line_at(&out, last_start)
        };
        self.text = out;
        Ok(Some(Applied {
            replacements: positions.len(),
            exact: true,
            first_line,
            last_line,
            filled_empty: false,
            note: None,
        }))
    }

    fn apply_normalized(
        &mut self,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<Option<Applied>, EditError> {
        let old_lines = split_lines(old);
        if old_lines.iter().all(|l| l.trim().is_empty()) {
            return Ok(None);
        }
        let file_lines = split_lines(&self.text);
        let norm_file: Vec<String> = file_lines.iter().map(|l| normalize_ws(l)).collect();
        let norm_old: Vec<String> = old_lines.iter().map(|l| normalize_ws(l)).collect();
        let m = old_lines.len();
        let mut starts = Vec::new();
        let mut i = 0;
        while i + m <= file_lines.len() {
            if (0..m).all(|j| norm_file[i + j] == norm_old[j]) {
                starts.push(i);
                i += m;
            } else {
                i += 1;
            }
        }
        if starts.is_empty() {
            return Ok(None);
        }
        if starts.len() > 1 && !replace_all {
            let ranges: Vec<String> = starts
                .iter()
                .take(AMBIGUOUS_LINES_SHOWN)
                .map(|&s| line_range(s + 1, s + m))
                .collect();
            let more = if starts.len() > ranges.len() {
                ", …"
            } else {
                ""
            };
            let lines: Vec<usize> = starts
                .iter()
                .take(AMBIGUOUS_LINES_SHOWN)
                .map(|s| s + 1)
                .collect();
            return Err(EditError {
                code: "ambiguous-match",
                message: format!(
                    "old_string does not match the file exactly, and with whitespace ignored it \
                     matches {} places (lines {}{more}). Copy old_string exactly from the file and \
                     add surrounding lines so that it matches one place, or set replace_all to \
                     true to replace every occurrence.",
                    starts.len(),
                    ranges.join(", ")
                ),
                data: json!({"matches": starts.len(), "lines": lines, "exact": false}),
            });
        }

        let new_lines = split_lines(new);
        let file_unit_hint = indent::detect_unit(&file_lines);
        let mut out: Vec<String> = Vec::with_capacity(file_lines.len() + new_lines.len());
        let mut cursor = 0;
        let mut first_line = 0;
        let mut last_line = 0;
        let mut adaptation: Option<indent::Adaptation> = None;
        for (k, &s) in starts.iter().enumerate() {
            out.extend(file_lines[cursor..s].iter().map(|l| l.to_string()));
            let adapted = indent::adapt(
                &old_lines,
                &file_lines[s..s + m],
                &new_lines,
                file_unit_hint,
            );
            let block_start = out.len() + 1;
            let count = adapted.lines.len();
            out.extend(adapted.lines.iter().cloned());
            if k == 0 {
                first_line = block_start;
            }
            last_line = if count == 0 {
                block_start
            } else {
                block_start + count - 1
            };
            if adaptation.is_none() {
                adaptation = Some(adapted);
            }
            cursor = s + m;
        }
        out.extend(file_lines[cursor..].iter().map(|l| l.to_string()));
        let total = out.len().max(1);
        let first_line = first_line.min(total);
        let last_line = last_line.min(total);
        let mut text = out.join("\n");
        if self.text.ends_with('\n') && !text.is_empty() {
            text.push('\n');
        }
        if text == self.text {
            return Err(no_change_result());
        }
        let where_ = starts
            .iter()
            .take(AMBIGUOUS_LINES_SHOWN)
            .map(|&s| line_range(s + 1, s + m))
            .collect::<Vec<_>>()
            .join(", ");
        let mut note = format!(
            "Note: old_string did not match the file exactly; it matched line{} {where_} of the \
             original file only when whitespace is ignored (indentation, runs of spaces, trailing \
             spaces), and the edit was applied there line by line.",
            if starts.len() == 1 && m == 1 { "" } else { "s" },
        );
        if let Some(a) = adaptation {
            note.push(' ');
            note.push_str(&a.describe());
        }
        note.push_str(" Check the result above.");
        self.text = text;
        Ok(Some(Applied {
            replacements: starts.len(),
            exact: false,
            first_line,
            last_line,
            filled_empty: false,
            note: Some(note),
        }))
    }
}

fn no_change_identical() -> EditError {
    EditError::new(
        "no-change",
        "old_string and new_string are identical, so the edit would change nothing. Give the new \
         text in new_string.",
    )
}

fn no_change_result() -> EditError {
    EditError::new(
        "no-change",
        "the edit would leave the file unchanged (new_string differs from old_string only in \
         ways the file already has). Nothing was written.",
    )
}

/// Collapse every run of whitespace to one space and trim both ends.
pub fn normalize_ws(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for word in line.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The lines of `text`, without their `\n`; a final newline does not start another line.
pub fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

/// How many lines `text` has (a last line without a newline counts).
pub fn line_count(text: &str) -> usize {
    split_lines(text).len()
}

/// The 1-based line number of byte offset `pos` in `text`.
pub fn line_at(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    text.as_bytes()[..pos]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn join_numbers(numbers: &[usize]) -> String {
    numbers
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn line_range(first: usize, last: usize) -> String {
    if first == last {
        first.to_string()
    } else {
        format!("{first}-{last}")
    }
}

/// The region of `new` that differs from `old`, as 1-based lines of `new` (`None` when equal):
/// the lines between the common leading and trailing lines.
pub fn changed_range(old: &str, new: &str) -> Option<(usize, usize)> {
    if old == new {
        return None;
    }
    let a = split_lines(old);
    let b = split_lines(new);
    let prefix = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    let first = prefix + 1;
    let last = b.len().saturating_sub(suffix).max(first);
    let total = b.len().max(1);
    Some((first.min(total), last.min(total)))
}

#[cfg(test)]
mod tests;
