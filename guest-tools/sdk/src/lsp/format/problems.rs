//! `diagnostics`: one row per problem.

use super::{count, list, named, num, one_line, plural, string, Page};
use crate::{names, Report, Value};
use std::fmt::Write as _;

/// The severities' counts in words: `2 errors, 1 warning`.
fn severity_counts(diags: &[&Value]) -> String {
    let mut n = [0u64; 4];
    for d in diags {
        let i = match string(d, "severity") {
            "warning" => 1,
            "information" => 2,
            "hint" => 3,
            _ => 0,
        };
        n[i] += 1;
    }
    let words = [
        ("error", "errors"),
        ("warning", "warnings"),
        ("information message", "information messages"),
        ("hint", "hints"),
    ];
    let parts: Vec<String> = n
        .iter()
        .zip(words)
        .filter(|(k, _)| **k > 0)
        .map(|(k, (one, many))| plural(*k, one, many))
        .collect();
    parts.join(", ")
}

/// One diagnostic's row: `a.py:2:16: error: undefined name 'x' [pyflakes]`; the message's
/// further lines indented under it.
fn diagnostic_row(path: &str, d: &Value) -> String {
    let mut lines = string(d, "message").lines();
    let first = lines.next().unwrap_or_default();
    let mut row = format!(
        "{}:{}:{}: {}: {}",
        names::display(path),
        num(d, "line"),
        num(d, "column"),
        one_line(string(d, "severity")),
        one_line(first)
    );
    let tag: Vec<&str> = [string(d, "source"), string(d, "code")]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    if !tag.is_empty() {
        let _ = write!(row, " [{}]", one_line(&tag.join(" ")));
    }
    for more in lines.filter(|l| !l.trim().is_empty()) {
        let _ = write!(row, "\n    {}", one_line(more.trim_end()));
    }
    row
}

/// `diagnostics`: one row per problem, by file then position. `asked` is the file asked about
/// (workspace-relative), `None` for the whole workspace.
pub fn diagnostics(answer: &Value, asked: Option<&str>, max_bytes: usize) -> Report {
    let files = list(answer, "files");
    let mut all = Vec::new();
    let mut with_problems = 0u64;
    for f in files {
        let mut ds: Vec<&Value> = list(f, "diagnostics").iter().collect();
        ds.sort_by_key(|d| (num(d, "line"), num(d, "column")));
        if !ds.is_empty() {
            with_problems += 1;
        }
        all.extend(ds.into_iter().map(|d| (string(f, "path"), d)));
    }
    let total = all.len() as u64;
    let timed_out = list(answer, "timed_out");
    let checked = num(answer, "checked");
    let answered = checked.saturating_sub(timed_out.len() as u64);
    let cut = answer.get("cut").and_then(Value::as_str);

    let mut page = Page::new(answer, max_bytes);
    for (path, d) in &all {
        if !page.row(&diagnostic_row(path, d), true) {
            break;
        }
    }
    let shown = page.shown;
    let mut notes = Vec::new();
    if !timed_out.is_empty() {
        notes.push(format!(
            "[no diagnostics arrived in time for {}: {}; call again, with a larger timeout_ms{}]",
            count(timed_out.len() as u64, "file"),
            named(timed_out),
            if asked.is_none() {
                " or `path` for one file"
            } else {
                ""
            }
        ));
    }
    if let Some(cut) = cut {
        notes.push(format!("[{}]", one_line(cut)));
    }
    if shown < total {
        notes.push(format!(
            "[truncated by the output size budget: showing {shown} of {total} diagnostics{}]",
            if asked.is_none() {
                "; give `path` for one file's"
            } else {
                ""
            }
        ));
    }

    let refs: Vec<&Value> = all.iter().map(|(_, d)| *d).collect();
    let mut summary = match asked {
        Some(p) => {
            let name = names::display(p);
            if total > 0 && with_problems > 1 {
                format!(
                    "{} in {}",
                    severity_counts(&refs),
                    count(with_problems, "file")
                )
            } else if total > 0 {
                let file = all.first().map_or(p, |(f, _)| f);
                format!("{} in {}", severity_counts(&refs), names::display(file))
            } else if !timed_out.is_empty() {
                format!("no diagnostics for {name} arrived in time")
            } else {
                format!("no problems in {name}")
            }
        }
        None if total > 0 => format!(
            "{} in {} ({} checked)",
            severity_counts(&refs),
            count(with_problems, "file"),
            answered
        ),
        None if answered == 0 && !timed_out.is_empty() => {
            "no diagnostics arrived in time".to_string()
        }
        None => format!(
            "no problems in the {} checked",
            plural(answered, "file", "files")
        ),
    };
    if asked.is_none() && !timed_out.is_empty() {
        let _ = write!(
            summary,
            "; {} timed out",
            count(timed_out.len() as u64, "file")
        );
    }
    Report {
        summary,
        content: page.finish(&notes),
        truncated: shown < total || cut.is_some(),
        totals: vec![("diagnostics", total, shown)],
        data: answer.clone(),
    }
}
