//! Jupyter notebooks (`.ipynb`): the cells in order with their outputs, as text.
//!
//! Each cell starts with `# %% [markdown] cell 1` or `# %% [code] cell 2`, then its source, then
//! its outputs: stream text, the `text/plain` of results, other media described by type and size
//! (`[image/png output, 1234 bytes]`), and errors with their traceback, ANSI colours removed.

use crate::b64;
use toolgate_guest::text;
use toolgate_guest::{json, Report, ToolError, Value};

/// Largest notebook file `read` opens.
pub const MAX_FILE_BYTES: u64 = 32 << 20;

/// Whether `path` names a notebook.
pub fn is_notebook(path: &std::path::Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
}

/// A notebook string field: a string or a list of strings joined.
fn joined(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

/// `s` without ANSI escape sequences (CSI `ESC [ ... letter`, OSC `ESC ] ... BEL`, and lone
/// two-byte escapes).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Append `body`'s lines to `out`, long lines cut visibly.
fn push_text(out: &mut String, body: &str) {
    for line in body.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (kept, full) = text::cut_chars(line, crate::MAX_LINE_CHARS);
        out.push_str(kept);
        if let Some(full) = full {
            out.push_str(&format!(
                "… [line cut: {full} characters, showing {}]",
                crate::MAX_LINE_CHARS
            ));
        }
        out.push('\n');
    }
}

/// A `data` bundle of a result or display output: its `text/plain`, and the other types
/// described by size.
fn push_bundle(out: &mut String, data: Option<&Value>) {
    let Some(Value::Object(bundle)) = data else {
        return;
    };
    for (mime, value) in bundle {
        if mime == "text/plain" {
            continue;
        }
        let bytes = match value {
            Value::String(_) | Value::Array(_)
                if mime.starts_with("image/") && mime != "image/svg+xml" =>
            {
                b64::decoded_len(&joined(Some(value)))
            }
            Value::String(_) | Value::Array(_) => joined(Some(value)).len(),
            other => other.to_string().len(),
        };
        out.push_str(&format!("[{mime} output, {bytes} bytes]\n"));
    }
    if let Some(plain) = bundle.get("text/plain") {
        push_text(out, &strip_ansi(&joined(Some(plain))));
    }
}

/// One cell as text.
fn render_cell(cell: &Value, number: usize) -> String {
    let kind = cell
        .get("cell_type")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let mut out = format!("# %% [{kind}] cell {number}\n");
    push_text(&mut out, &joined(cell.get("source")));
    let outputs = cell
        .get("outputs")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for output in outputs {
        let otype = output
            .get("output_type")
            .and_then(Value::as_str)
            .unwrap_or("");
        match otype {
            "stream" => {
                let name = output
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("stdout");
                out.push_str(&format!("# [output: {name}]\n"));
                push_text(&mut out, &strip_ansi(&joined(output.get("text"))));
            }
            "execute_result" | "display_data" => {
                let label = match output.get("execution_count").and_then(Value::as_u64) {
                    Some(n) if otype == "execute_result" => format!("# [output: result {n}]\n"),
                    _ if otype == "execute_result" => "# [output: result]\n".to_string(),
                    _ => "# [output: display]\n".to_string(),
                };
                out.push_str(&label);
                push_bundle(&mut out, output.get("data"));
            }
            "error" => {
                let ename = output
                    .get("ename")
                    .and_then(Value::as_str)
                    .unwrap_or("Error");
                let evalue = output.get("evalue").and_then(Value::as_str).unwrap_or("");
                out.push_str(&format!(
                    "# [output: error] {}: {}\n",
                    strip_ansi(ename),
                    strip_ansi(evalue)
                ));
                if let Some(tb) = output.get("traceback").and_then(Value::as_array) {
                    for frame in tb.iter().filter_map(Value::as_str) {
                        push_text(&mut out, &strip_ansi(frame));
                    }
                }
            }
            other => out.push_str(&format!("# [output: {other}]\n")),
        }
    }
    out
}

/// Read the notebook `bytes`: cells from index `offset`, at most `limit`, within `budget`
/// bytes. `Ok(None)` when the file is not a notebook's JSON (read it as text instead).
pub fn read(
    bytes: &[u8],
    offset: u64,
    limit: Option<u64>,
    budget: usize,
    shown: &str,
    rel: &str,
) -> Result<Option<Report>, ToolError> {
    let Ok(nb) = toolgate_guest::serde_json::from_slice::<Value>(bytes) else {
        return Ok(None);
    };
    let Some(cells) = nb.get("cells").and_then(Value::as_array) else {
        return Ok(None);
    };
    let total = cells.len() as u64;
    let size = bytes.len();
    if total > 0 && offset >= total {
        return Err(ToolError::new(
            "offset-out-of-range",
            format!(
                "offset {offset} is past the end of {shown}, which has {total} cells; use an offset below {total} (offset and limit count cells in a notebook)"
            ),
        )
        .data(json!({"path": rel, "cells": total, "offset": offset})));
    }
    let language = nb
        .pointer("/metadata/language_info/name")
        .or_else(|| nb.pointer("/metadata/kernelspec/language"))
        .and_then(Value::as_str)
        .unwrap_or("");

    let limit = limit.unwrap_or(u64::MAX).max(1);
    let mut content = String::new();
    let mut returned: u64 = 0;
    let mut cut_cell = None;
    let mut next = None;
    for (i, cell) in cells.iter().enumerate().skip(offset as usize) {
        let i = i as u64;
        if returned >= limit {
            next = Some(i);
            break;
        }
        let block = render_cell(cell, i as usize + 1);
        let sep = usize::from(!content.is_empty());
        if content.len() + sep + block.len() <= budget {
            if sep == 1 {
                content.push('\n');
            }
            content.push_str(&block);
            returned += 1;
            continue;
        }
        if returned == 0 {
            let mut end = budget.min(block.len());
            while !block.is_char_boundary(end) {
                end -= 1;
            }
            if let Some(nl) = block[..end].rfind('\n') {
                end = nl + 1;
            }
            content.push_str(&block[..end]);
            returned = 1;
            cut_cell = Some(i + 1);
            if i + 1 < total {
                next = Some(i + 1);
            }
        } else {
            next = Some(i);
        }
        break;
    }
    let first = offset + 1;
    let last = offset + returned;
    let mut truncated = false;
    if total == 0 {
        content.push_str("[notebook has no cells]\n");
    }
    if let Some(n) = cut_cell {
        truncated = true;
        content.push_str(&format!(
            "[cell {n} was cut by the output size budget: it is longer than one call can show]\n"
        ));
    }
    if let Some(next) = next {
        truncated = true;
        let why = if returned >= limit && cut_cell.is_none() {
            "cell limit"
        } else {
            "output size budget"
        };
        content.push_str(&format!(
            "[truncated by {why}: showing cells {first}-{last} of {total}; use offset={next} to read more]\n"
        ));
    } else if offset > 0 {
        content.push_str(&format!(
            "[showing cells {first}-{last} of {total} (end of notebook)]\n"
        ));
    }
    let summary = if returned == total {
        format!("read {shown}: notebook, {total} cells")
    } else {
        format!("read {shown}: notebook, cells {first}-{last} of {total}")
    };
    Ok(Some(Report {
        summary,
        content,
        truncated,
        totals: vec![("cells", total, returned)],
        data: json!({
            "path": rel,
            "size": size,
            "kind": "notebook",
            "cells": total,
            "offset": offset,
            "cells_returned": returned,
            "language": language,
        }),
    }))
}
