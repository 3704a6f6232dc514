//! Call hierarchy: a function's callers and callees.

use super::{
    is_outside, list, num, one_line, place, plural, server_notes, short, string, Page, OUTSIDE,
};
use crate::{Report, Value};
use std::fmt::Write as _;

/// One call's row: `b.py:10:1: function bar — calls it at 12:5, 14:9`.
fn call_row(c: &Value, incoming: bool) -> String {
    let mut row = format!(
        "  {}: {} {}",
        place(c),
        one_line(string(c, "kind")),
        short(string(c, "name"))
    );
    if is_outside(c) {
        row.push(' ');
        row.push_str(OUTSIDE);
    }
    let at: Vec<String> = list(c, "at")
        .iter()
        .map(|p| format!("{}:{}", num(p, "line"), num(p, "column")))
        .collect();
    if !at.is_empty() {
        let _ = write!(
            row,
            " — {} {}",
            if incoming { "calls it at" } else { "called at" },
            at.join(", ")
        );
    }
    row
}

/// `incoming-calls` and/or `outgoing-calls` answers (for the same position `at`): the function,
/// then its callers and its callees.
pub fn calls(
    incoming: Option<&Value>,
    outgoing: Option<&Value>,
    at: &str,
    max_bytes: usize,
) -> Report {
    let item = [incoming, outgoing]
        .into_iter()
        .flatten()
        .find_map(|a| a.get("item").filter(|i| i.is_object()));
    let mut data = serde_json::Map::new();
    for (key, a) in [("incoming", incoming), ("outgoing", outgoing)] {
        if let Some(a) = a {
            data.insert(key.into(), a.clone());
        }
    }
    // The server notes once: from the first answer, or the second when only it restarted one.
    let notes_from = match (incoming, outgoing) {
        (Some(i), Some(o)) if server_notes(i).is_empty() => o,
        (Some(a), _) | (None, Some(a)) => a,
        (None, None) => &Value::Null,
    };
    let mut page = Page::new(notes_from, max_bytes);
    let Some(item) = item else {
        return Report {
            summary: format!("no function or method at {at}"),
            content: page.finish(&[format!(
                "[the language server found nothing callable at {at}: give the line of a \
                 function's name with `symbol` (or its column), as `read` shows it]"
            )]),
            truncated: false,
            totals: Vec::new(),
            data: Value::Object(data),
        };
    };
    let name = format!("`{}`", short(string(item, "name")));
    let mut head = format!(
        "{name} ({}) at {}",
        one_line(string(item, "kind")),
        place(item)
    );
    if is_outside(item) {
        head.push(' ');
        head.push_str(OUTSIDE);
    }
    page.row(&head, false);
    let sections: Vec<(&[Value], bool)> = [(incoming, true), (outgoing, false)]
        .into_iter()
        .filter_map(|(a, inc)| a.map(|a| (list(a, "calls"), inc)))
        .collect();
    let total: u64 = sections.iter().map(|(cs, _)| cs.len() as u64).sum();
    let parts: Vec<String> = sections
        .iter()
        .map(|(cs, inc)| match inc {
            true => plural(cs.len() as u64, "caller", "callers"),
            false => plural(cs.len() as u64, "callee", "callees"),
        })
        .collect();
    for (cs, inc) in &sections {
        let n = cs.len();
        let title = match (inc, n) {
            (true, 0) => "called by: no callers found".to_string(),
            (true, _) => format!("called by ({n}):"),
            (false, 0) => "calls: nothing found".to_string(),
            (false, _) => format!("calls ({n}):"),
        };
        if !page.row(&title, false) {
            break;
        }
        for c in cs.iter() {
            if !page.row(&call_row(c, *inc), true) {
                break;
            }
        }
    }
    let shown = page.shown;
    let summary = match (incoming.is_some(), outgoing.is_some()) {
        (true, true) => format!("{name}: {}", parts.join(", ")),
        _ => format!("{} of {name}", parts.join("")),
    };
    let mut notes = Vec::new();
    if shown < total {
        notes.push(format!(
            "[truncated by the output size budget: showing {shown} of {total} calls; ask for \
             one `direction`]"
        ));
    }
    Report {
        summary,
        content: page.finish(&notes),
        truncated: shown < total,
        totals: vec![("calls", total, shown)],
        data: Value::Object(data),
    }
}
