//! `read-media`: the `read` tool with its image and PDF decoders, which the host runs when the
//! `read` component hands a call over ([`toolgate_reading::HAND_OFF`]). It describes itself as
//! `read`, exactly as the other component does (the host checks), and reads every kind of
//! file the same way.
//!
//! - Images ([`picture`]): PNG, JPEG, GIF and WebP, by magic bytes, returned as an image
//!   (`data.image_base64`, downscaled in the component when large).
//! - PDFs ([`pdf`]): the text of each page, `pages` choosing which.

mod pdf;
mod picture;

use toolgate_guest::{Context, Descriptor, Output, Tool, ToolError, Value};
use toolgate_reading::{binary, descriptor, Decoders, Found, ImageKind, Report};

struct ReadMedia;

impl Tool for ReadMedia {
    fn describe() -> Descriptor {
        descriptor()
    }

    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        run(&input, cx).map(Report::into_output)
    }
}

toolgate_guest::register_tool!(ReadMedia);

/// The decoders.
struct Media;

impl Decoders for Media {
    fn image(&self, kind: ImageKind, mut found: Found<'_>) -> Result<Report, ToolError> {
        let bytes = found.whole(picture::MAX_FILE_BYTES, "image")?;
        // A file with an image's magic but no readable header is refused as any binary file.
        match picture::header_dimensions(kind, &bytes) {
            Some(dims) => picture::read(&bytes, kind, dims, found.shown, found.rel),
            None => Err(binary(found.shown, found.rel, found.size)),
        }
    }

    fn pdf(&self, mut found: Found<'_>) -> Result<Report, ToolError> {
        let bytes = found.whole(pdf::MAX_FILE_BYTES, "PDF")?;
        pdf::read(&bytes, found.pages, found.budget, found.shown, found.rel)
    }
}

/// The tool's logic with the decoders, callable outside a component.
pub fn run(input: &Value, cx: &Context) -> Result<Report, ToolError> {
    toolgate_reading::run(input, cx, &Media)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests_media;
