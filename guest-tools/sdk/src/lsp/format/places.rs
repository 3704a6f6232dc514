//! Places: definitions, references, a file's outline, workspace symbols.

use super::{
    count, is_outside, list, located, num, one_line, place, plural, short, showing, string, Page,
    OUTSIDE,
};
use crate::{names, Report, Value};
use std::fmt::Write as _;

/// Which lookup a locations answer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// `lsp_definition`.
    Definition,
    /// `lsp_references`.
    References,
}

/// `definition` or `references`: one `path:line:column: text` row per location. `at` names the
/// position asked about (`a.py:3`).
pub fn locations(answer: &Value, lookup: Lookup, at: &str, max_bytes: usize) -> Report {
    let locs = list(answer, "locations");
    let listed = locs.len() as u64;
    let total = num(answer, "total").max(listed);
    let symbol = answer
        .get("symbol")
        .and_then(Value::as_str)
        .map(|s| format!("`{}`", one_line(s)));
    let mut page = Page::new(answer, max_bytes);
    for l in locs {
        if !page.row(&located(l), true) {
            break;
        }
    }
    let shown = page.shown;
    let (one, many, prep) = match lookup {
        Lookup::Definition => ("definition", "definitions", "of"),
        Lookup::References => ("reference", "references", "to"),
    };
    let what = symbol
        .clone()
        .unwrap_or_else(|| format!("the symbol at {at}"));
    let summary = if total == 0 {
        match &symbol {
            Some(s) => format!("no {one} found for {s} (at {at})"),
            None => format!("no {one} found at {at}"),
        }
    } else {
        let mut s = format!("{} {prep} {what}", plural(total, one, many));
        if listed == total && total > 1 {
            let mut files: Vec<&str> = locs.iter().map(|l| string(l, "path")).collect();
            files.sort_unstable();
            files.dedup();
            if files.len() > 1 {
                let _ = write!(s, " in {}", count(files.len() as u64, "file"));
            }
        }
        s
    };
    let mut notes = Vec::new();
    if total == 0 {
        notes.push(format!(
            "[the language server found nothing at {at}: check the line and column with `read` \
             (give `symbol` to point at a name on the line), or search with `grep`]"
        ));
    }
    notes.extend(showing(shown, listed, total, many, ""));
    Report {
        summary,
        content: page.finish(&notes),
        truncated: shown < total,
        totals: vec![("locations", total, shown)],
        data: answer.clone(),
    }
}

/// Whether each symbol is kept when only names containing `query` (case-insensitive) are
/// wanted: the matches and the symbols enclosing them.
fn kept(symbols: &[Value], query: &str) -> Vec<bool> {
    let q = query.to_lowercase();
    let mut keep = vec![false; symbols.len()];
    let mut outer: Vec<usize> = Vec::new();
    for (i, s) in symbols.iter().enumerate() {
        let depth = usize::try_from(num(s, "depth")).unwrap_or(usize::MAX);
        outer.truncate(depth);
        if string(s, "name").to_lowercase().contains(&q) {
            keep[i] = true;
            for &o in &outer {
                keep[o] = true;
            }
        }
        outer.push(i);
    }
    keep
}

/// A document symbol's row: `  method bar: (self, x)  (5:9-12)`, indented two spaces a level.
fn symbol_row(s: &Value) -> String {
    let depth = usize::try_from(num(s, "depth")).unwrap_or(0).min(32);
    let mut row = format!(
        "{}{} {}",
        "  ".repeat(depth),
        one_line(string(s, "kind")),
        short(string(s, "name"))
    );
    if let Some(d) = s.get("detail").and_then(Value::as_str) {
        let _ = write!(row, ": {}", short(d));
    }
    if let Some(c) = s.get("container").and_then(Value::as_str) {
        let _ = write!(row, " (in {})", short(c));
    }
    let (line, end) = (num(s, "line"), num(s, "end_line"));
    let _ = write!(row, "  ({line}:{}", num(s, "column"));
    if end > line {
        let _ = write!(row, "-{end}");
    }
    row.push(')');
    row
}

/// `document-symbols`: the file's outline; with `query`, only the symbols whose names contain
/// it (case-insensitive) and those enclosing them.
pub fn document_symbols(answer: &Value, query: Option<&str>, max_bytes: usize) -> Report {
    let symbols = list(answer, "symbols");
    let listed = symbols.len() as u64;
    let total = num(answer, "total").max(listed);
    let path = names::display(string(answer, "path")).into_owned();
    let keep = match query {
        Some(q) => kept(symbols, q),
        None => vec![true; symbols.len()],
    };
    let matching = symbols
        .iter()
        .zip(&keep)
        .filter(|(s, k)| **k && query.is_none_or(|q| name_has(s, q)))
        .count() as u64;
    let wanted = keep.iter().filter(|k| **k).count() as u64;
    let mut page = Page::new(answer, max_bytes);
    for (s, _) in symbols.iter().zip(&keep).filter(|(_, k)| **k) {
        if !page.row(&symbol_row(s), true) {
            break;
        }
    }
    let shown = page.shown;
    let summary = match query {
        _ if total == 0 => format!("{path} defines no symbols the language server lists"),
        Some(q) => format!(
            "{path}: {} of {} match `{}`",
            matching,
            count(total, "symbol"),
            one_line(q)
        ),
        None => format!("{path}: {}", count(total, "symbol")),
    };
    let mut notes = Vec::new();
    if listed < total {
        notes.push(format!(
            "[the host lists only the first {listed} of {total} symbols{}]",
            if query.is_none() {
                "; give `query` to find one by name"
            } else {
                ""
            }
        ));
    }
    if shown < wanted {
        notes.push(format!(
            "[truncated by the output size budget: showing {shown} of {wanted} symbols{}]",
            if query.is_none() {
                "; give `query` to find one by name"
            } else {
                ""
            }
        ));
    }
    Report {
        summary,
        content: page.finish(&notes),
        truncated: shown < wanted || listed < total,
        totals: vec![("symbols", total, shown)],
        data: answer.clone(),
    }
}

fn name_has(s: &Value, query: &str) -> bool {
    string(s, "name")
        .to_lowercase()
        .contains(&query.to_lowercase())
}

/// `workspace-symbols`: `path:line:column: kind name (in container)` per symbol.
pub fn workspace_symbols(answer: &Value, max_bytes: usize) -> Report {
    let symbols = list(answer, "symbols");
    let listed = symbols.len() as u64;
    let total = num(answer, "total").max(listed);
    let query = one_line(string(answer, "query"));
    let mut page = Page::new(answer, max_bytes);
    for s in symbols {
        let mut what = format!(
            "{} {}",
            one_line(string(s, "kind")),
            short(string(s, "name"))
        );
        if let Some(c) = s.get("container").and_then(Value::as_str) {
            let _ = write!(what, " (in {})", short(c));
        }
        let mut row = format!("{}: {what}", place(s));
        if is_outside(s) {
            row.push(' ');
            row.push_str(OUTSIDE);
        }
        if !page.row(&row, true) {
            break;
        }
    }
    let shown = page.shown;
    let summary = if total == 0 {
        format!("no symbol in the workspace matches `{query}`")
    } else {
        format!(
            "{} {} `{query}`",
            count(total, "symbol"),
            if total == 1 { "matches" } else { "match" }
        )
    };
    let mut notes = Vec::new();
    if total == 0 {
        notes.push(
            "[the language server found none: try a shorter or different part of the name, \
             `path` for one file's symbols, or `grep`]"
                .to_string(),
        );
    }
    notes.extend(showing(
        shown,
        listed,
        total,
        "symbols",
        "; a longer query finds fewer",
    ));
    Report {
        summary,
        content: page.finish(&notes),
        truncated: shown < total,
        totals: vec![("symbols", total, shown)],
        data: answer.clone(),
    }
}
