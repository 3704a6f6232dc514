//! The host's answers (see [`super`]) as observations: pure functions from the answer's JSON
//! to a [`Report`], so they are tested natively.
//!
//! Places print as `path:line:column` (1-based; the path as [`crate::names::display`] prints
//! it). A place outside the workspace says `(outside the workspace; not readable with these
//! tools)`. A server that had stopped and was started again for the call is said first. Every
//! list says when it is cut, by the host (`showing 200 of 950`) or by the output budget, and
//! the answer itself is the report's `data`.

use crate::{names, text, Budget, Report, Value};
use std::fmt::Write as _;

mod calls;
mod places;
mod problems;

pub use calls::calls;
pub use places::{document_symbols, locations, workspace_symbols, Lookup};
pub use problems::diagnostics;

/// Bytes of the budget kept for the closing notes.
const NOTE_RESERVE: usize = 512;
/// The longest detail (a signature) or line text shown, in characters.
const MAX_DETAIL_CHARS: usize = 160;
/// The most file names a note lists.
const MAX_NAMED: usize = 20;
/// What a place outside the workspace says.
pub const OUTSIDE: &str = "(outside the workspace; not readable with these tools)";

/// `n thing` or `n things`.
fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `n` with an `s` when it is not one.
fn count(n: u64, noun: &str) -> String {
    plural(n, noun, &format!("{noun}s"))
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn string<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn list<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

/// A server's words on one line: control characters escaped (a newline cannot start a row).
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// [`one_line`], cut to [`MAX_DETAIL_CHARS`] with `…`.
fn short(s: &str) -> String {
    let (kept, cut) = text::cut_chars(s, MAX_DETAIL_CHARS);
    let mut out = one_line(kept);
    if cut.is_some() {
        out.push('…');
    }
    out
}

/// `path:line:column` of a place.
pub fn place(v: &Value) -> String {
    format!(
        "{}:{}:{}",
        names::display(string(v, "path")),
        num(v, "line"),
        num(v, "column")
    )
}

fn is_outside(v: &Value) -> bool {
    v.get("outside").and_then(Value::as_bool).unwrap_or(false)
}

/// `path:line:column: text` of a location (its line's text), or the outside note.
fn located(v: &Value) -> String {
    let mut row = place(v);
    if is_outside(v) {
        row.push_str(": ");
        row.push_str(OUTSIDE);
    } else if let Some(t) = v.get("text").and_then(Value::as_str) {
        row.push_str(": ");
        row.push_str(&short(t));
    }
    row
}

/// The notes for servers that had stopped and were started again for this answer.
pub fn server_notes(answer: &Value) -> Vec<String> {
    list(answer, "servers")
        .iter()
        .filter(|s| s.get("restarted").and_then(Value::as_bool) == Some(true))
        .map(|s| {
            format!(
                "(the {} language server had stopped and was restarted)",
                one_line(string(s, "language"))
            )
        })
        .collect()
}

/// Content being assembled: the server notes, then rows while they fit the budget, then notes.
struct Page {
    head: String,
    rows: Budget,
    shown: u64,
}

impl Page {
    fn new(answer: &Value, max_bytes: usize) -> Self {
        let mut head = String::new();
        for n in server_notes(answer) {
            head.push_str(&n);
            head.push('\n');
        }
        let room = max_bytes.saturating_sub(head.len() + NOTE_RESERVE).max(1);
        Page {
            head,
            rows: Budget::new(room),
            shown: 0,
        }
    }

    /// Add a row (it may span lines); false once the budget is full. `counted` rows count as
    /// shown items.
    fn row(&mut self, row: &str, counted: bool) -> bool {
        let fits = self.rows.push_line(row);
        if fits && counted {
            self.shown += 1;
        }
        fits
    }

    fn finish(self, notes: &[String]) -> String {
        let mut out = self.head;
        out.push_str(&self.rows.into_string());
        for n in notes {
            out.push_str(n);
            out.push('\n');
        }
        out
    }
}

/// A list of names for a note: the first [`MAX_NAMED`], then how many more.
fn named(paths: &[Value]) -> String {
    let mut out: Vec<String> = paths
        .iter()
        .take(MAX_NAMED)
        .map(|p| names::display(p.as_str().unwrap_or_default()).into_owned())
        .collect();
    if paths.len() > MAX_NAMED {
        out.push(format!("and {} more", paths.len() - MAX_NAMED));
    }
    out.join(", ")
}

/// `[showing X of Y things: why]` when not all were shown, else nothing.
fn showing(shown: u64, listed: u64, total: u64, what: &str, budget_hint: &str) -> Option<String> {
    if shown >= total {
        return None;
    }
    let mut why = Vec::new();
    if listed < total {
        why.push(format!("the host lists at most the first {listed}"));
    }
    if shown < listed {
        why.push(format!(
            "the rest did not fit the output size budget{budget_hint}"
        ));
    }
    Some(format!(
        "[showing {shown} of {total} {what}: {}]",
        why.join("; ")
    ))
}

/// [`super::apply`]'s answer: `headline across N files, M edits`, then `path: K edits` per
/// file. `headline` says what was done (``renamed to `bar` ``).
pub fn applied(answer: &Value, headline: &str, max_bytes: usize) -> Report {
    let files = list(answer, "files");
    let edits = num(answer, "edits");
    let mut page = Page::new(answer, max_bytes);
    for f in files {
        let row = format!(
            "{}: {}",
            names::display(string(f, "path")),
            count(num(f, "edits"), "edit")
        );
        if !page.row(&row, true) {
            break;
        }
    }
    let shown = page.shown;
    let n = files.len() as u64;
    let mut notes = Vec::new();
    if shown < n {
        notes.push(format!(
            "[truncated by the output size budget: showing {shown} of {n} files changed]"
        ));
    }
    Report {
        summary: format!(
            "{headline} across {}, {}",
            count(n, "file"),
            count(edits, "edit")
        ),
        content: page.finish(&notes),
        truncated: shown < n,
        totals: vec![("files", n, shown)],
        data: answer.clone(),
    }
}

/// [`super::restart`]'s answer.
pub fn restarted(answer: &Value) -> Report {
    let names = |key: &str| -> Vec<String> {
        list(answer, key)
            .iter()
            .map(|l| one_line(l.as_str().unwrap_or_default()))
            .collect()
    };
    let (done, idle) = (names("restarted"), names("not_running"));
    let summary = match done.len() {
        0 if idle.is_empty() => "no language server is configured".to_string(),
        0 => "no language server was running; each starts on its first use".to_string(),
        1 => format!(
            "stopped the {} language server; it starts again on its next use",
            done[0]
        ),
        _ => format!(
            "stopped the language servers of {}; each starts again on its next use",
            done.join(", ")
        ),
    };
    let mut content = String::new();
    if !done.is_empty() {
        let _ = writeln!(content, "restarted: {}", done.join(", "));
    }
    if !idle.is_empty() {
        let _ = writeln!(content, "not running: {}", idle.join(", "));
    }
    Report {
        summary,
        content,
        truncated: false,
        totals: Vec::new(),
        data: answer.clone(),
    }
}
