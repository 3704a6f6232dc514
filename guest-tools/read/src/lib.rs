//! `read`: a text file's lines, numbered like `cat -n`, within a line and byte budget.
//!
//! Output lines are `{number:>6}\t{text}` with 1-based numbers. `offset` is the 0-based index
//! of the first line to return (so `offset=2000` starts at line 2001) and `limit` the most
//! lines to return (default [`DEFAULT_LIMIT`]). A line longer than [`MAX_LINE_CHARS`] is cut
//! with a visible marker. When the output stops before the end of the file, its last line says
//! so and gives the `offset` to continue with. The file is streamed, so a large file costs only
//! the lines returned plus a newline count of the rest.

use std::fs::File;
use std::io::{BufRead, BufReader, Read as _};
use std::path::Path;
use toolgate_guest::text;
use toolgate_guest::{
    json, Budget, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value,
};

/// Lines returned when `limit` is not given.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Longest line (in characters) returned whole.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes kept free in the budget for the closing note.
const NOTE_RESERVE: usize = 256;

struct Read;

impl Tool for Read {
    fn describe() -> Descriptor {
        Descriptor::new(
            "read",
            "Read a text file from the workspace. Returns numbered lines like `cat -n` \
             (`     1\\tfirst line`), at most 2000 lines per call by default; lines longer than \
             2000 characters are cut with a marker. Use `offset` and `limit` to page through \
             large files: when the output is cut, its last line says which offset to use next. \
             Binary files are refused; use `ls` for directories.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to read, relative to the workspace root (or absolute inside it)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "0-based index of the first line to return: 0 starts at line 1, 100 starts at line 101. Default 0."},
                    "limit": {"type": "integer", "minimum": 1, "description": "The most lines to return. Default 2000."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            Risk::ReadOnly,
        )
        .path("path", PathAccess::Read)
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx).map(Report::into_output)
    }
}

toolgate_guest::register_tool!(Read);

pub use toolgate_guest::Report;

/// The tool's logic, callable outside a component.
pub fn run(input: &Value, cx: &Context) -> Result<Report, ToolError> {
    let path = match input.get("path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => Path::new(p),
        _ => {
            return Err(ToolError::new(
                "bad-input",
                "`path` is required: the file to read",
            ))
        }
    };
    let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let limit = input
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_LIMIT)
        .max(1);
    let rel = cx.relative(path);
    // Names in messages as `names` prints them; exact in `data`.
    let shown = toolgate_guest::names::display(&rel);

    let meta = std::fs::metadata(path).map_err(|e| ToolError::io_at(cx, path, &rel, &e))?;
    if meta.is_dir() {
        return Err(ToolError::new(
            "is-directory",
            format!("{shown} is a directory, not a file; use `ls` to list it"),
        )
        .data(json!({"path": rel})));
    }
    let size = meta.len();
    let file = File::open(path).map_err(|e| ToolError::io_at(cx, path, &rel, &e))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);

    // Sniff the head for binary content before returning anything.
    let mut head = Vec::with_capacity(text::BINARY_SNIFF_BYTES);
    (&mut reader)
        .take(text::BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| ToolError::io(&rel, &e))?;
    if text::is_binary(&head) {
        return Err(ToolError::new(
            "binary",
            format!("{shown} is a binary file ({size} bytes); `read` shows text files only"),
        )
        .data(json!({"path": rel, "size": size})));
    }
    let mut reader = head.chain(reader);

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
            .map_err(|e| ToolError::io(&rel, &e))?;
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
            let buf = reader.fill_buf().map_err(|e| ToolError::io(&rel, &e))?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
