//! The edit algorithm of the `edit` and `multiedit` tools (`guest-tools/editing/src/lib.rs`,
//! `Document`), mirrored on the host so an approval shows the file the tool will write.
//!
//! The guest crate cannot be a host dependency (it is built on the guest SDK for
//! `wasm32-wasip2`), so the steps are copied here line for line: line endings normalized to LF
//! for a CRLF file and restored on render, a byte-order mark kept, `old_string` looked up
//! exactly (one occurrence, or all with `replace_all`), then on whole lines with whitespace
//! ignored and `new_string` re-indented to the file's indentation — that part is the guest's
//! own file (`indent.rs`), included as it is, so it cannot drift. A change to
//! `guest-tools/editing/src/lib.rs` must be made here too; `tests/integration/approval_diff.rs`
//! runs the real tools and checks that the diff shown is what they wrote.

use std::borrow::Cow;

#[allow(dead_code)]
#[path = "../../../guest-tools/editing/src/indent.rs"]
mod indent;

/// Most line comparisons the whitespace-ignoring lookup may make (file lines × `old_string`
/// lines) before the preview gives up: a hostile input (a 10,000-line `old_string` over a file
/// of identical lines) must not hold up the approval. The tool itself runs under its own limits.
const NORMALIZED_BUDGET: usize = 20_000_000;

/// Why an edit cannot apply: the guest's error code and a sentence.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct EditError {
    pub(super) code: &'static str,
    pub(super) message: String,
}

impl EditError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        EditError {
            code,
            message: message.into(),
        }
    }
}

/// One edit that applies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Applied {
    /// How many places are replaced.
    pub(super) replacements: usize,
    /// Whether `old_string` matched exactly (false: with whitespace ignored, re-indented).
    pub(super) exact: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LineEnding {
    Lf,
    Crlf,
    Mixed,
    Unknown,
}

/// A file's text being edited, as the guest's `Document` holds it.
#[derive(Clone, Debug)]
pub(super) struct Document {
    bom: bool,
    text: String,
    ending: LineEnding,
}

impl Document {
    pub(super) fn new(raw: &str) -> Self {
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

    /// The file contents the tool writes.
    pub(super) fn render(&self) -> String {
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

    fn normalize<'a>(&self, s: &'a str) -> Cow<'a, str> {
        match self.ending {
            LineEnding::Crlf | LineEnding::Lf if s.contains("\r\n") => {
                Cow::Owned(s.replace("\r\n", "\n"))
            }
            _ => Cow::Borrowed(s),
        }
    }

    /// Apply one edit; on error the document is unchanged.
    pub(super) fn apply(
        &mut self,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<Applied, EditError> {
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
        Err(EditError::new(
            "no-match",
            "old_string does not occur in the file, not even with whitespace ignored",
        ))
    }

    fn fill_empty(&mut self, new: &str) -> Result<Applied, EditError> {
        if !self.text.is_empty() {
            return Err(EditError::new(
                "empty-old-string",
                "old_string is empty, which only creates a new file or fills an empty one, but \
                 this file has content",
            ));
        }
        let bom = self.bom;
        *self = Document::new(new);
        self.bom = self.bom || bom;
        Ok(Applied {
            replacements: 1,
            exact: true,
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
            let lines: Vec<String> = positions
                .iter()
                .take(5)
                .map(|&p| line_at(&self.text, p).to_string())
                .collect();
            let more = if positions.len() > lines.len() {
                ", …"
            } else {
                ""
            };
            return Err(EditError::new(
                "ambiguous-match",
                format!(
                    "old_string matches {} places in the file (at lines {}{more}) and replace_all \
                     is not set",
                    positions.len(),
                    lines.join(", ")
                ),
            ));
        }
        let mut out = String::with_capacity(self.text.len() + new.len() * positions.len());
        let mut last = 0;
        for &p in &positions {
            out.push_str(&self.text[last..p]);
            out.push_str(new);
            last = p + old.len();
        }
        out.push_str(&self.text[last..]);
        if self.text.ends_with('\n') && !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        if out == self.text {
            return Err(no_change_result());
        }
        self.text = out;
        Ok(Some(Applied {
            replacements: positions.len(),
            exact: true,
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
        let m = old_lines.len();
        if file_lines.len().saturating_mul(m) > NORMALIZED_BUDGET {
            return Err(EditError::new(
                "preview-too-costly",
                "old_string does not occur exactly, and looking for it with whitespace ignored \
                 is too much work to preview",
            ));
        }
        let norm_file: Vec<String> = file_lines.iter().map(|l| normalize_ws(l)).collect();
        let norm_old: Vec<String> = old_lines.iter().map(|l| normalize_ws(l)).collect();
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
                .take(5)
                .map(|&s| line_range(s + 1, s + m))
                .collect();
            let more = if starts.len() > ranges.len() {
                ", …"
            } else {
                ""
            };
            return Err(EditError::new(
                "ambiguous-match",
                format!(
                    "old_string does not match the file exactly, and with whitespace ignored it \
                     matches {} places (lines {}{more}) and replace_all is not set",
                    starts.len(),
                    ranges.join(", ")
                ),
            ));
        }
        let new_lines = split_lines(new);
        let file_unit_hint = indent::detect_unit(&file_lines);
        let mut out: Vec<String> = Vec::with_capacity(file_lines.len() + new_lines.len());
        let mut cursor = 0;
        for &s in &starts {
            out.extend(file_lines[cursor..s].iter().map(|l| l.to_string()));
            let adapted = indent::adapt(
                &old_lines,
                &file_lines[s..s + m],
                &new_lines,
                file_unit_hint,
            );
            out.extend(adapted.lines);
            cursor = s + m;
        }
        out.extend(file_lines[cursor..].iter().map(|l| l.to_string()));
        let mut text = out.join("\n");
        if self.text.ends_with('\n') && !text.is_empty() {
            text.push('\n');
        }
        if text == self.text {
            return Err(no_change_result());
        }
        self.text = text;
        Ok(Some(Applied {
            replacements: starts.len(),
            exact: false,
        }))
    }
}

fn no_change_identical() -> EditError {
    EditError::new(
        "no-change",
        "old_string and new_string are identical, so the edit would change nothing",
    )
}

fn no_change_result() -> EditError {
    EditError::new(
        "no-change",
        "the edit would leave the file unchanged (new_string differs from old_string only in \
         ways the file already has)",
    )
}

fn normalize_ws(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for word in line.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

fn split_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    text.strip_suffix('\n')
        .unwrap_or(text)
        .split('\n')
        .collect()
}

fn line_at(text: &str, pos: usize) -> usize {
    let pos = pos.min(text.len());
    text.as_bytes()[..pos]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn line_range(first: usize, last: usize) -> String {
    if first == last {
        first.to_string()
    } else {
        format!("{first}-{last}")
    }
}
