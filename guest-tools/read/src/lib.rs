//! `read`: a file from the workspace, shown to the model.
//!
//! - Text files ([`lines`]): lines numbered like `cat -n` (`{number:>6}\t{text}`, 1-based).
//!   `offset` is the 0-based index of the first line to return (so `offset=2000` starts at
//!   line 2001) and `limit` the most lines to return (default [`DEFAULT_LIMIT`]). A line longer
//!   than [`MAX_LINE_CHARS`] is cut with a visible marker. When the output stops before the end
//!   of the file, its last line says so and gives the `offset` to continue with. The file is
//!   streamed, so a large file costs only the lines returned plus a newline count of the rest.
//! - Images ([`picture`]): PNG, JPEG, GIF and WebP, by magic bytes, returned as an image
//!   (`data.image_base64`, downscaled in the component when large).
//! - PDFs ([`pdf`]): the text of each page, `pages` choosing which.
//! - Jupyter notebooks ([`notebook`]): cells with their outputs; `offset`/`limit` count cells.
//!
//! Any other binary file is refused.

mod b64;
mod lines;
mod notebook;
mod pdf;
mod picture;

use std::fs::File;
use std::io::{BufReader, Read as _};
use std::path::Path;
use toolgate_guest::text;
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

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
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file to read, relative to the workspace root (or absolute inside it)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "0-based index of the first line to return: 0 starts at line 1, 100 starts at line 101. Default 0."},
                    "limit": {"type": "integer", "minimum": 1, "description": "The most lines to return. Default 2000. In a notebook, offset and limit count cells."},
                    "pages": {"type": "string", "description": "PDF only: the pages to read, like \"3\", \"1-5\" or \"2,4-6\" (\"7-\" reads on to the end). Default: from page 1 as far as the output budget goes."}
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

    // Sniff the head for what the file is before returning anything.
    let mut head = Vec::with_capacity(text::BINARY_SNIFF_BYTES);
    (&mut reader)
        .take(text::BINARY_SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| ToolError::io(&rel, &e))?;
    let budget = cx.max_output_bytes().saturating_sub(NOTE_RESERVE).max(1);
    let pages = input.get("pages").and_then(Value::as_str);
    // A real image or PDF is binary; a text file that only starts like one stays text.
    let binary_head = text::is_binary(&head);
    let is_pdf = pdf::sniff(&head, binary_head);
    if pages.is_some() && !is_pdf {
        return Err(ToolError::new(
            "bad-input",
            format!(
                "`pages` is for PDF files and {shown} is not a PDF; use `offset` and `limit` instead"
            ),
        )
        .data(json!({"path": rel})));
    }

    if let Some(kind) = picture::sniff(&head).filter(|_| binary_head) {
        let bytes = whole(
            head.as_slice().chain(reader),
            size,
            picture::MAX_FILE_BYTES,
            "image",
            &shown,
            &rel,
        )?;
        // A file with an image's magic but no readable header is refused as any binary file.
        match picture::header_dimensions(kind, &bytes) {
            Some(dims) => return picture::read(&bytes, kind, dims, &shown, &rel),
            None => return Err(binary(&shown, &rel, size)),
        }
    }
    if is_pdf {
        let bytes = whole(
            head.as_slice().chain(reader),
            size,
            pdf::MAX_FILE_BYTES,
            "PDF",
            &shown,
            &rel,
        )?;
        return pdf::read(&bytes, pages, budget, &shown, &rel);
    }
    if binary_head {
        return Err(binary(&shown, &rel, size));
    }
    let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let limit = input.get("limit").and_then(Value::as_u64);
    if notebook::is_notebook(path) {
        let bytes = whole(
            head.as_slice().chain(reader),
            size,
            notebook::MAX_FILE_BYTES,
            "notebook",
            &shown,
            &rel,
        )?;
        if let Some(report) = notebook::read(&bytes, offset, limit, budget, &shown, &rel)? {
            return Ok(report);
        }
        // Not a notebook's JSON: shown as the text it is.
        let limit = limit.unwrap_or(DEFAULT_LIMIT).max(1);
        return lines::read(
            std::io::Cursor::new(bytes),
            offset,
            limit,
            size,
            cx,
            &shown,
            &rel,
        );
    }
    let limit = limit.unwrap_or(DEFAULT_LIMIT).max(1);
    lines::read(
        head.as_slice().chain(reader),
        offset,
        limit,
        size,
        cx,
        &shown,
        &rel,
    )
}

/// The refusal of a binary file `read` does not show.
fn binary(shown: &str, rel: &str, size: u64) -> ToolError {
    ToolError::new(
        "binary",
        format!("{shown} is a binary file ({size} bytes); `read` shows text, images (PNG, JPEG, GIF, WebP), PDFs and notebooks only"),
    )
    .data(json!({"path": rel, "size": size}))
}

/// The whole file from `reader`, refused when it is over `max` bytes (`what` names the kind).
fn whole(
    reader: impl std::io::Read,
    size: u64,
    max: u64,
    what: &str,
    shown: &str,
    rel: &str,
) -> Result<Vec<u8>, ToolError> {
    let too_large = |size: u64| {
        ToolError::new(
            "too-large",
            format!(
                "{shown} is {} MB; `read` opens {what} files of at most {} MB",
                mb(size),
                max >> 20
            ),
        )
        .data(json!({"path": rel, "size": size, "max_size": max}))
    };
    if size > max {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    reader
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::io(rel, &e))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// `bytes` in megabytes with one decimal.
fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / f64::from(1u32 << 20))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests_media;
