//! Text files: numbered lines like `cat -n`, within a line and byte budget (the behaviour
//! `read` has always had).

use crate::{MAX_LINE_CHARS, NOTE_RESERVE};
use std::io::BufRead;
use toolgate_guest::text;
use toolgate_guest::{json, Budget, Context, Report, ToolError};

/// Read lines from `reader` (the whole file, from its first byte): from the 0-based line
/// `offset`, at most `limit`, within the call's output budget.
#[allow(clippy::too_many_arguments)]
pub fn read(
    mut reader: impl BufRead,
    offset: u64,
    limit: u64,
    size: u64,
    cx: &Context,
    shown: &str,
    rel: &str,
) -> Result<Report, ToolError> {
    let budget_max = cx.max_output_bytes().saturating_sub(NOTE_RESERVE).max(1);
    let mut budget = Budget::new(budget_max);
    let mut line = Vec::new();
    let mut index: u64 = 0; // 0-based index of the next line
    let mut returned: u64 = 0;
    let mut cut_lines: u64 = 0;
    let mut stopped_at: Option<u64> = None; // first index not returned, if cut short
    let mut row = String::new();

    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| ToolError::io(rel, &e))?;
        if n == 0 {
            break;
        }
        if index >= offset {
            if returned >= limit {
                stopped_at = Some(index);
                index += 1;
                break;
            }
            let mut body = line.as_slice();
            if let Some(b) = body.strip_suffix(b"\n") {
                body = b;
            }
            if let Some(b) = body.strip_suffix(b"\r") {
                body = b;
            }
            let body = String::from_utf8_lossy(body);
            let (kept, full) = text::cut_chars(&body, MAX_LINE_CHARS);
            row.clear();
            use std::fmt::Write as _;
            let _ = write!(row, "{:>6}\t{}", index + 1, kept);
            if let Some(full) = full {
                let _ = write!(
                    row,
                    "… [line cut: {full} characters, showing {MAX_LINE_CHARS}]"
                );
            }
            if !budget.push_line(&row) {
                stopped_at = Some(index);
                index += 1;
                break;
            }
            if full.is_some() {
                cut_lines += 1;
            }
            returned += 1;
        }
        index += 1;
    }
    // Count the lines after the one we stopped at (read whole, counted in `index`): every
    // newline ends one, and a last line without a newline counts too.
    if stopped_at.is_some() {
        let mut last_byte = None;
        loop {
            let buf = reader.fill_buf().map_err(|e| ToolError::io(rel, &e))?;
            if buf.is_empty() {
                break;
            }
            index += memchr::memchr_iter(b'\n', buf).count() as u64;
            last_byte = buf.last().copied();
            let len = buf.len();
            reader.consume(len);
        }
        if last_byte.is_some_and(|b| b != b'\n') {
            index += 1;
        }
    }
    let total_lines = index;

    let mut content = budget.into_string();
    let mut truncated = false;
    let summary;
    if total_lines == 0 {
        content.push_str("[file is empty: 0 lines]\n");
        summary = format!("read {shown}: empty file");
    } else if returned == 0 && offset >= total_lines {
        return Err(ToolError::new(
            "offset-out-of-range",
            format!(
                "offset {offset} is past the end of {shown}, which has {total_lines} lines; use an offset below {total_lines}"
            ),
        )
        .data(json!({"path": rel, "total_lines": total_lines, "offset": offset})));
    } else {
        let first = offset + 1;
        let last = offset + returned;
        match stopped_at {
            Some(next) => {
                truncated = true;
                let why = if returned >= limit {
                    "line limit"
                } else {
                    "output size budget"
                };
                content.push_str(&format!(
                    "[truncated by {why}: showing lines {first}-{last} of {total_lines}; use offset={next} to read more]\n"
                ));
            }
            None if offset > 0 => {
                content.push_str(&format!(
                    "[showing lines {first}-{last} of {total_lines} (end of file)]\n"
                ));
            }
            None => {}
        }
        if cut_lines > 0 {
            truncated = true;
            content.push_str(&format!(
                "[{cut_lines} line(s) longer than {MAX_LINE_CHARS} characters were cut]\n"
            ));
        }
        summary = if returned == total_lines {
            format!("read {shown}: {total_lines} lines")
        } else {
            format!("read {shown}: lines {first}-{last} of {total_lines}")
        };
    }

    Ok(Report {
        summary,
        content,
        truncated,
        totals: vec![("lines", total_lines, returned)],
        data: json!({
            "path": rel,
            "total_lines": total_lines,
            "offset": offset,
            "lines_returned": returned,
            "size": size,
            "long_lines_cut": cut_lines,
        }),
    })
}
