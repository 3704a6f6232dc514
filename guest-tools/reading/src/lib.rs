//! The `read` tool's logic, shared by its two components.
//!
//! - Text files ([`lines`]): lines numbered like `cat -n` (`{number:>6}\t{text}`, 1-based).
//!   `offset` is the 0-based index of the first line to return (so `offset=2000` starts at
//!   line 2001) and `limit` the most lines to return (default [`DEFAULT_LIMIT`]). A line longer
//!   than [`MAX_LINE_CHARS`] is cut with a visible marker. When the output stops before the end
//!   of the file, its last line says so and gives the `offset` to continue with. The file is
//!   streamed, so a large file costs only the lines returned plus a newline count of the rest.
//! - Images (PNG, JPEG, GIF and WebP, by magic bytes) and PDFs are recognised here and given to
//!   a [`Decoders`]: the `read` component (`guest-tools/read`) carries none and answers
//!   [`HAND_OFF`], on which the host runs the same call in `read-media`
//!   (`guest-tools/read-media`), which carries the image and PDF decoders. So the component
//!   every text read needs stays small and compiles in a fraction of a second on first use.
//! - Jupyter notebooks ([`notebook`]): cells with their outputs; `offset`/`limit` count cells.
//!
//! Any other binary file is refused.

pub mod b64;
mod lines;
pub mod notebook;

use std::fs::File;
use std::io::{BufReader, Read as _};
use std::path::Path;
use toolgate_guest::text;
use toolgate_guest::{json, Context, Descriptor, PathAccess, Risk, ToolError, Value};

pub use toolgate_guest::Report;

/// The error code with which a component without decoders hands an image or a PDF over: the
/// host runs the same call, with the same capabilities, in the `read-media` component. A
/// component that is not the built-in `read` gains nothing by answering it.
pub const HAND_OFF: &str = "hand-off";

/// Lines returned when `limit` is not given.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Longest line (in characters) returned whole.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes kept free in the budget for the closing note.
const NOTE_RESERVE: usize = 256;

/// `read`'s self-description, the same from both components.
pub fn descriptor() -> Descriptor {
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

/// An image format `read` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
    Gif,
    WebP,
}

impl ImageKind {
    /// Its name in messages and `data.format`.
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Png => "PNG",
            ImageKind::Jpeg => "JPEG",
            ImageKind::Gif => "GIF",
            ImageKind::WebP => "WebP",
        }
    }

    /// Its MIME type.
    pub fn mime(self) -> &'static str {
        match self {
            ImageKind::Png => "image/png",
            ImageKind::Jpeg => "image/jpeg",
            ImageKind::Gif => "image/gif",
            ImageKind::WebP => "image/webp",
        }
    }
}

/// The image format `head` starts with, by magic bytes.
pub fn sniff_image(head: &[u8]) -> Option<ImageKind> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageKind::Png)
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageKind::Jpeg)
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some(ImageKind::Gif)
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some(ImageKind::WebP)
    } else {
        None
    }
}

/// Whether `head` is the start of a PDF: it starts with `%PDF-`, or, when it is binary
/// (`binary`), has `%PDF-` within its first 1024 bytes, as readers allow. A text file that
/// only mentions `%PDF-` near its top stays text.
pub fn sniff_pdf(head: &[u8], binary: bool) -> bool {
    let window = &head[..head.len().min(1024)];
    head.starts_with(b"%PDF-") || (binary && window.windows(5).any(|w| w == b"%PDF-"))
}

/// An image or a PDF found by [`run`]: its first bytes, the rest of it, and how it is named.
pub struct Found<'a> {
    /// The bytes sniffed.
    pub head: &'a [u8],
    /// The rest of the file after `head`.
    pub rest: &'a mut dyn std::io::Read,
    /// The file's size when it was opened.
    pub size: u64,
    /// Its name as messages show it.
    pub shown: &'a str,
    /// Its workspace-relative name, exact, for `data`.
    pub rel: &'a str,
    /// The bytes of content the output may have.
    pub budget: usize,
    /// `pages`, for a PDF.
    pub pages: Option<&'a str>,
}

impl Found<'_> {
    /// The whole file, refused when it is over `max` bytes (`what` names the kind).
    pub fn whole(&mut self, max: u64, what: &str) -> Result<Vec<u8>, ToolError> {
        whole(
            self.head.chain(&mut *self.rest),
            self.size,
            max,
            what,
            self.shown,
            self.rel,
        )
    }
}

/// What shows images and PDFs.
pub trait Decoders {
    /// An image: `kind`'s magic starts a binary file.
    fn image(&self, kind: ImageKind, found: Found<'_>) -> Result<Report, ToolError>;
    /// A PDF.
    fn pdf(&self, found: Found<'_>) -> Result<Report, ToolError>;
}

/// No decoders: every image and PDF is answered [`HAND_OFF`] before more than its head is read.
pub struct HandOff;

impl Decoders for HandOff {
    fn image(&self, kind: ImageKind, found: Found<'_>) -> Result<Report, ToolError> {
        Err(hand_off(&format!("a {} image", kind.name()), &found))
    }

    fn pdf(&self, found: Found<'_>) -> Result<Report, ToolError> {
        Err(hand_off("a PDF", &found))
    }
}

fn hand_off(what: &str, found: &Found<'_>) -> ToolError {
    ToolError::new(
        HAND_OFF,
        format!(
            "{} is {what}; this `read` component shows text and notebooks, and hands images and PDFs to the host's image and PDF reader",
            found.shown
        ),
    )
    .data(json!({"path": found.rel}))
}

/// The tool's logic, callable outside a component.
pub fn run(input: &Value, cx: &Context, decoders: &impl Decoders) -> Result<Report, ToolError> {
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
    let is_pdf = sniff_pdf(&head, binary_head);
    if pages.is_some() && !is_pdf {
        return Err(ToolError::new(
            "bad-input",
            format!(
                "`pages` is for PDF files and {shown} is not a PDF; use `offset` and `limit` instead"
            ),
        )
        .data(json!({"path": rel})));
    }

    let image = sniff_image(&head).filter(|_| binary_head);
    if image.is_some() || is_pdf {
        let found = Found {
            head: &head,
            rest: &mut reader,
            size,
            shown: &shown,
            rel: &rel,
            budget,
            pages,
        };
        return match image {
            Some(kind) => decoders.image(kind, found),
            None => decoders.pdf(found),
        };
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
pub fn binary(shown: &str, rel: &str, size: u64) -> ToolError {
    ToolError::new(
        "binary",
        format!("{shown} is a binary file ({size} bytes); `read` shows text, images (PNG, JPEG, GIF, WebP), PDFs and notebooks only"),
    )
    .data(json!({"path": rel, "size": size}))
}

/// The whole file from `reader`, refused when it is over `max` bytes (`what` names the kind).
pub fn whole(
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
pub fn mb(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / f64::from(1u32 << 20))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
