//! What an approval shows for the built-ins `write`, `edit` and `multiedit`: the file as the
//! call would leave it, as a unified diff against what is there now, headed by the
//! workspace-relative path (`--- a/src/x.rs`, `+++ b/src/x.rs`; `--- /dev/null` for a new file).
//!
//! The file is read only through the host's safe open ([`fsutil::read_regular`]: a FIFO or a
//! device is refused before a byte is read, a symlink at the last component is not followed),
//! and only up to [`MAX_FILE_BYTES`]. The edits are computed the way the tools compute them
//! (`preview_doc.rs`, the guest's algorithm); an edit that cannot apply shows why instead of a
//! diff, since the tool will fail the same way. Every line from the file or the input is made
//! plain here (controls, bidi overrides and line separators shown as `\x1b`, `\u{202e}`, ...),
//! so a file cannot repaint the terminal or start a line of its own in the prompt.

use super::approval::escape_name;
use crate::fsutil::{self, OpenError};
use crate::tools::Builtin;
use crate::workspace::ScopedPath;
use serde_json::Value;
use similar::ChangeTag;
use std::time::Duration;

#[path = "preview_doc.rs"]
mod doc;

use doc::Document;

/// Largest current file read for a diff. A bigger one is not read at all (an approval must not
/// make the host load a huge or growing file); the approval still covers the input by its hash.
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 20;
/// Most diff lines shown before the cut note.
pub(crate) const MAX_DIFF_LINES: usize = 200;
/// Most bytes of diff shown before the cut note.
pub(crate) const MAX_DIFF_BYTES: usize = 16 * 1024;
/// Longest diff line shown, in characters (a minified file is one long line).
const MAX_LINE_CHARS: usize = 1000;
/// How long the diff may take before it settles for a longer, still correct, diff: a hostile
/// pair of texts must not hold up the approval.
const DIFF_TIMEOUT: Duration = Duration::from_millis(500);
/// Where the guest SDK looks for a NUL (`guest-tools/sdk/src/text.rs`, `BINARY_SNIFF_BYTES`):
/// the same file counts as binary here and there.
const BINARY_SNIFF_BYTES: usize = 8192;

/// The approval text for a `write`, `edit` or `multiedit` call on `target`: one line saying
/// what happens, then the diff, or a plain line saying why there is none. `None` for another
/// tool, or an input not shaped as the tool's schema says (then the caller shows the input).
pub(crate) fn describe(kind: Builtin, input: &Value, target: &ScopedPath) -> Option<String> {
    let shown = escape_name(&target.rel).into_owned();
    let plan = match kind {
        Builtin::Write => plan_write(input.get("content")?.as_str()?, target, &shown),
        Builtin::Edit => {
            let edit = Edit::from(input)?;
            plan_edits(&[edit], target, &shown, false)
        }
        Builtin::MultiEdit => {
            let edits = input
                .get("edits")?
                .as_array()?
                .iter()
                .map(Edit::from)
                .collect::<Option<Vec<_>>>()?;
            if edits.is_empty() {
                return None;
            }
            plan_edits(&edits, target, &shown, true)
        }
        _ => return None,
    };
    Some(match plan {
        Ok(p) => {
            let mut text = p.summary;
            for note in &p.notes {
                text.push_str(&format!("\n{note}"));
            }
            let a = match &p.old {
                Some(_) => format!("a/{shown}"),
                None => "/dev/null".to_string(),
            };
            let old = p.old.as_deref().unwrap_or("");
            text.push('\n');
            text.push_str(&unified(old, &p.new, &a, &format!("b/{shown}")));
            text
        }
        Err(why) => why,
    })
}

/// One edit of the input: `old_string`, `new_string`, `replace_all`.
struct Edit<'a> {
    old: &'a str,
    new: &'a str,
    replace_all: bool,
}

impl<'a> Edit<'a> {
    fn from(v: &'a Value) -> Option<Self> {
        Some(Edit {
            old: v.get("old_string")?.as_str()?,
            new: v.get("new_string")?.as_str()?,
            replace_all: v
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

/// What the file is now, as far as a preview may look.
enum Current {
    Missing,
    Text(String),
    Binary(usize),
    TooLarge,
    /// Not readable as a file (a FIFO, a device, a directory, permission): the sentence.
    Refused(String),
}

fn read_current(target: &ScopedPath, shown: &str) -> Current {
    match fsutil::read_regular(&target.host, MAX_FILE_BYTES) {
        Ok(bytes) => {
            let len = bytes.len();
            if is_binary(&bytes) {
                return Current::Binary(len);
            }
            match String::from_utf8(bytes) {
                Ok(text) => Current::Text(text),
                Err(_) => Current::Binary(len),
            }
        }
        Err(e) if e.is_not_found() => Current::Missing,
        // `read_regular`'s only `InvalidData` is its size cap.
        Err(OpenError::Io { ref source, .. })
            if source.kind() == std::io::ErrorKind::InvalidData =>
        {
            Current::TooLarge
        }
        Err(OpenError::Io { ref source, .. }) => {
            Current::Refused(format!("{shown}: {}", fsutil::plain_error(source)))
        }
        Err(e) => Current::Refused(e.message_for(shown)),
    }
}

/// A NUL in the first bytes, as the guest SDK's `is_binary` (invalid UTF-8 is checked by the
/// caller).
fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// The change a call makes: the file now (`None`: it does not exist) and after.
struct Plan {
    summary: String,
    notes: Vec<String>,
    old: Option<String>,
    new: String,
}

fn too_large(shown: &str) -> String {
    format!(
        "{shown} is larger than {} KiB, too large to show a diff; the approval covers the whole \
         input by its hash",
        MAX_FILE_BYTES / 1024
    )
}

fn refused(why: &str) -> String {
    format!(
        "{why}; no diff is shown (the host reads only regular files for one), and the approval \
         covers the whole input by its hash"
    )
}

fn binary_note(shown: &str, len: usize) -> String {
    format!(
        "{shown} is a binary (or not UTF-8) file of {len} bytes; no diff is shown, and the \
         approval covers the whole input by its hash"
    )
}

fn size(text: &str) -> String {
    let lines = text.lines().count();
    format!(
        "{lines} line{}, {} byte{}",
        if lines == 1 { "" } else { "s" },
        text.len(),
        if text.len() == 1 { "" } else { "s" }
    )
}

/// `write`: the content replaces the file as it is (line endings included).
fn plan_write(content: &str, target: &ScopedPath, shown: &str) -> Result<Plan, String> {
    let old = match read_current(target, shown) {
        Current::Missing => None,
        Current::Text(t) => Some(t),
        Current::Binary(len) => {
            return Err(format!(
                "overwrites {shown} ({}) — {}",
                size(content),
                binary_note(shown, len)
            ))
        }
        Current::TooLarge => return Err(too_large(shown)),
        Current::Refused(why) => return Err(refused(&why)),
    };
    if old.as_deref() == Some(content) {
        return Err(format!(
            "{shown} already has exactly this content; the write tool will write nothing and \
             fail with no-change"
        ));
    }
    if is_binary(content.as_bytes()) {
        return Err(format!(
            "{} {shown} with binary content ({} bytes); no diff is shown, and the approval \
             covers the whole input by its hash",
            if old.is_some() {
                "overwrites"
            } else {
                "creates"
            },
            content.len()
        ));
    }
    let mut notes = Vec::new();
    if let Some(o) = &old {
        if uses_crlf(o) && content.contains('\n') && !content.contains("\r\n") {
            notes.push(
                "note: the file uses CRLF line endings now; the new content uses LF".to_string(),
            );
        }
    }
    let summary = match &old {
        None => format!("new file {shown} ({}):", size(content)),
        Some(o) => format!("overwrites {shown} ({}, was {}):", size(content), size(o)),
    };
    Ok(Plan {
        summary,
        notes,
        old,
        new: content.to_string(),
    })
}

/// `edit` (one edit) and `multiedit` (`multi`): the edits in order on the text in memory, as
/// the tools apply them; the first failing one is shown instead of a diff.
fn plan_edits(
    edits: &[Edit<'_>],
    target: &ScopedPath,
    shown: &str,
    multi: bool,
) -> Result<Plan, String> {
    let tool = if multi { "multiedit" } else { "edit" };
    let fails = |code: &str, why: &str| {
        format!("the {tool} tool will fail ({code}) and change nothing: {shown}: {why}")
    };
    let first = &edits[0];
    // `edit` refuses identical strings before it looks at the file.
    if !multi && first.old == first.new {
        return Err(fails(
            "no-change",
            "old_string and new_string are identical, so the edit would change nothing",
        ));
    }
    let (mut doc, old) = match read_current(target, shown) {
        Current::Text(t) => (Document::new(&t), Some(t)),
        Current::Missing if first.old.is_empty() => (Document::new(""), None),
        Current::Missing => {
            return Err(fails(
                "not-found",
                "the file does not exist (to create it, the first old_string must be empty)",
            ))
        }
        Current::Binary(_) => {
            return Err(fails(
                "binary-file",
                "it is a binary (or not UTF-8) file; it cannot be edited as text",
            ))
        }
        Current::TooLarge => return Err(too_large(shown)),
        Current::Refused(why) => return Err(refused(&why)),
    };
    let total = edits.len();
    let mut notes = Vec::new();
    let mut replacements = 0;
    for (i, e) in edits.iter().enumerate() {
        match doc.apply(e.old, e.new, e.replace_all) {
            Ok(applied) => {
                replacements += applied.replacements;
                if !applied.exact {
                    let which = if multi {
                        format!("edit {i}: ")
                    } else {
                        String::new()
                    };
                    notes.push(format!(
                        "note: {which}old_string matched only with whitespace ignored; the tool \
                         re-indents new_string to the file's indentation, as shown"
                    ));
                }
            }
            Err(err) if err.code == "preview-too-costly" => {
                return Err(format!(
                    "no diff: {}; the approval covers the whole input by its hash",
                    err.message
                ))
            }
            Err(err) if multi => {
                let earlier = if i == 0 {
                    String::new()
                } else {
                    format!(", matched against the text after edits 0-{}", i - 1)
                };
                return Err(fails(
                    err.code,
                    &format!("edit {i} of {total}{earlier}: {}", err.message),
                ));
            }
            Err(err) => return Err(fails(err.code, &err.message)),
        }
    }
    let new = doc.render();
    if multi && old.as_deref() == Some(new.as_str()) {
        return Err(fails(
            "no-change",
            "the edits together leave the file unchanged",
        ));
    }
    let what = if replacements == 1 {
        "1 replacement".to_string()
    } else {
        format!("{replacements} replacements")
    };
    let summary = match (&old, multi) {
        (None, _) => format!("new file {shown} ({}):", size(&new)),
        (Some(_), true) => format!("changes {shown} ({total} edits in order, {what}):"),
        (Some(_), false) => format!("changes {shown} ({what}):"),
    };
    Ok(Plan {
        summary,
        notes,
        old,
        new,
    })
}

/// Every line ends with CRLF (and there is one).
fn uses_crlf(text: &str) -> bool {
    let lf = text.matches('\n').count();
    lf > 0 && text.matches("\r\n").count() == lf
}

/// The unified diff of `old` → `new` under the headers `a` and `b`, three lines of context,
/// each line made plain, cut past [`MAX_DIFF_LINES`] or [`MAX_DIFF_BYTES`] with a note. When
/// both sides use CRLF throughout, the `\r`s are not shown.
pub(crate) fn unified(old: &str, new: &str, a: &str, b: &str) -> String {
    let crlf = (old.is_empty() || uses_crlf(old)) && uses_crlf(new);
    // Lines end at `\n` only, as the tools count them (the diff crate's own splitting also
    // ends a line at a lone `\r`, which would number lines differently).
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let diff = similar::TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_slices(&old_lines, &new_lines);
    let mut out = Cut::default();
    if crlf {
        out.push("note: every line ends with CRLF; the diff does not show the \\r".to_string());
    }
    out.push(format!("--- {a}"));
    out.push(format!("+++ {b}"));
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        out.push(hunk.header().to_string());
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
                ChangeTag::Equal => ' ',
            };
            let value = change.value();
            let mut line = value.strip_suffix('\n').unwrap_or(value);
            if crlf {
                line = line.strip_suffix('\r').unwrap_or(line);
            }
            out.push(format!("{sign}{}", shown_line(line)));
            if !value.ends_with('\n') {
                out.push("\\ No newline at end of file".to_string());
            }
        }
    }
    out.finish()
}

/// Diff lines up to the limits, then a count of the rest.
#[derive(Default)]
struct Cut {
    text: String,
    lines: usize,
    more: usize,
}

impl Cut {
    fn push(&mut self, line: String) {
        if self.more > 0
            || self.lines >= MAX_DIFF_LINES
            || self.text.len() + line.len() + 1 > MAX_DIFF_BYTES
        {
            self.more += 1;
            return;
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.text.push_str(&line);
        self.lines += 1;
    }

    fn finish(mut self) -> String {
        if self.more > 0 {
            self.text.push_str(&format!(
                "\n… diff cut: {} more line{}; the approval covers the whole input by its hash",
                self.more,
                if self.more == 1 { "" } else { "s" }
            ));
        }
        self.text
    }
}

/// One line of the file as the prompt shows it: tabs kept, every other character that cannot
/// be shown as itself (`text::unshowable`, the set names are escaped for) escaped (`\r`,
/// `\x1b`, `\u{202e}`, ...), cut past [`MAX_LINE_CHARS`].
pub(crate) fn shown_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len().min(MAX_LINE_CHARS * 2));
    for (count, c) in line.chars().enumerate() {
        if count == MAX_LINE_CHARS {
            let rest = line.chars().count() - count;
            out.push_str(&format!("… (line cut: {rest} more characters)"));
            break;
        }
        match c {
            '\t' => out.push('\t'),
            c => crate::text::push_shown(&mut out, c),
        }
    }
    out
}

#[cfg(test)]
#[path = "preview_tests.rs"]
mod tests;
