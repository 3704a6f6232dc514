//! Images: PNG, JPEG, GIF (first frame) and WebP, recognised by their magic bytes.
//!
//! The header's dimensions are checked before anything is decoded (a small file can claim a
//! huge image), the decoder runs under [`image::Limits`], and an image whose long side is over
//! [`MAX_SIDE`] or whose encoding is over [`MAX_SENT_BYTES`] is downscaled here, in the
//! component, so the model only ever receives something it can take.

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, Limits};
use std::io::Cursor;
use toolgate_guest::{json, Report, ToolError};
use toolgate_reading::b64;

/// Longest side sent to the model; larger images are downscaled to it.
pub const MAX_SIDE: u32 = 1568;
/// Largest encoded image sent (about 4.7 MB once in base64).
pub const MAX_SENT_BYTES: usize = 3_500_000;
/// Largest image file `read` opens.
pub const MAX_FILE_BYTES: u64 = 20 << 20;
/// Most pixels an image may have, read from its header before decoding.
pub const MAX_PIXELS: u64 = 50_000_000;
/// Most bytes the decoder may allocate (the decoded pixels count).
const MAX_DECODE_BYTES: u64 = 256 << 20;
/// JPEG quality used when re-encoding.
const JPEG_QUALITY: u8 = 85;

pub use toolgate_reading::ImageKind as Kind;

/// The `image` crate's format for `kind`.
fn format(kind: Kind) -> ImageFormat {
    match kind {
        Kind::Png => ImageFormat::Png,
        Kind::Jpeg => ImageFormat::Jpeg,
        Kind::Gif => ImageFormat::Gif,
        Kind::WebP => ImageFormat::WebP,
    }
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 2)?;
    Some(u32::from(u16::from_le_bytes([s[0], s[1]])))
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 3)?;
    Some(u32::from(s[0]) | u32::from(s[1]) << 8 | u32::from(s[2]) << 16)
}

/// The dimensions an image's header claims, read without decoding anything; `None` when the
/// header is not there (a truncated file is then treated as any other binary file).
pub fn header_dimensions(kind: Kind, head: &[u8]) -> Option<(u32, u32)> {
    match kind {
        Kind::Png => {
            if head.get(12..16)? != b"IHDR" {
                return None;
            }
            Some((be32(head, 16)?, be32(head, 20)?))
        }
        Kind::Gif => Some((le16(head, 6)?, le16(head, 8)?)),
        Kind::WebP => match head.get(12..16)? {
            b"VP8 " => Some((le16(head, 26)? & 0x3FFF, le16(head, 28)? & 0x3FFF)),
            b"VP8L" => {
                let b = head.get(21..25)?;
                let bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
            }
            b"VP8X" => Some((le24(head, 24)? + 1, le24(head, 27)? + 1)),
            _ => None,
        },
        Kind::Jpeg => jpeg_dimensions(head),
    }
}

/// Walk a JPEG's marker segments up to the first start-of-frame.
fn jpeg_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    loop {
        while *b.get(i)? != 0xFF {
            i += 1;
        }
        while *b.get(i)? == 0xFF {
            i += 1;
        }
        let marker = *b.get(i)?;
        i += 1;
        if matches!(marker, 0x01 | 0xD0..=0xD9) {
            continue; // no length
        }
        let len = usize::from(u16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?]));
        let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            let h = u16::from_be_bytes([*b.get(i + 3)?, *b.get(i + 4)?]);
            let w = u16::from_be_bytes([*b.get(i + 5)?, *b.get(i + 6)?]);
            return Some((u32::from(w), u32::from(h)));
        }
        i += len;
    }
}

/// The size an image of `w`×`h` is shown at: its long side at most `max_side`, aspect kept.
pub fn fit(w: u32, h: u32, max_side: u32) -> (u32, u32) {
    let long = w.max(h);
    if long <= max_side {
        return (w, h);
    }
    let scale = f64::from(max_side) / f64::from(long);
    let sw = ((f64::from(w) * scale).round() as u32).clamp(1, max_side);
    let sh = ((f64::from(h) * scale).round() as u32).clamp(1, max_side);
    (sw, sh)
}

fn bad_image(shown: &str, rel: &str, kind: Kind, e: &image::ImageError) -> ToolError {
    let why = match e {
        image::ImageError::Limits(_) => format!(
            "decoding it needs more than the {} MB of memory `read` allows for an image",
            MAX_DECODE_BYTES >> 20
        ),
        other => other.to_string(),
    };
    ToolError::new(
        "bad-image",
        format!(
            "{shown} looks like a {} image but could not be decoded: {why}",
            kind.name()
        ),
    )
    .data(json!({"path": rel, "format": kind.name()}))
}

fn encode(img: &DynamicImage, as_jpeg: bool) -> Result<Vec<u8>, image::ImageError> {
    let mut out = Vec::new();
    if as_jpeg {
        let rgb = DynamicImage::ImageRgb8(img.to_rgb8());
        rgb.write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
            &mut out,
            JPEG_QUALITY,
        ))?;
    } else {
        img.write_with_encoder(image::codecs::png::PngEncoder::new(&mut out))?;
    }
    Ok(out)
}

/// Read the image file `bytes` (already checked to start with `kind`'s magic and to claim
/// `dims` in its header).
pub fn read(
    bytes: &[u8],
    kind: Kind,
    dims: (u32, u32),
    shown: &str,
    rel: &str,
) -> Result<Report, ToolError> {
    let size = bytes.len();
    let (w0, h0) = dims;
    let pixels = u64::from(w0) * u64::from(h0);
    if pixels > MAX_PIXELS {
        return Err(ToolError::new(
            "image-too-large",
            format!(
                "{shown} is a {} image of {w0}×{h0} ({} megapixels); `read` decodes images of at most {} megapixels",
                kind.name(),
                pixels / 1_000_000,
                MAX_PIXELS / 1_000_000
            ),
        )
        .data(json!({"path": rel, "width": w0, "height": h0, "max_pixels": MAX_PIXELS})));
    }

    let mut limits = Limits::default();
    limits.max_image_width = Some(w0.max(1));
    limits.max_image_height = Some(h0.max(1));
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format(kind));
    reader.limits(limits);
    let mut decoder = reader
        .into_decoder()
        .map_err(|e| bad_image(shown, rel, kind, &e))?;
    if decoder.total_bytes() > MAX_DECODE_BYTES {
        let e = image::ImageError::Limits(image::error::LimitError::from_kind(
            image::error::LimitErrorKind::InsufficientMemory,
        ));
        return Err(bad_image(shown, rel, kind, &e));
    }
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut img =
        DynamicImage::from_decoder(decoder).map_err(|e| bad_image(shown, rel, kind, &e))?;
    let rotated = orientation != image::metadata::Orientation::NoTransforms;
    if rotated {
        img.apply_orientation(orientation);
    }
    let (width, height) = (img.width(), img.height());

    // Send the file as it is when the model can take it; otherwise re-encode, smaller each
    // time, until it fits.
    let (mut sw, mut sh) = fit(width, height, MAX_SIDE);
    let resized = (sw, sh) != (width, height);
    let as_is = !resized && !rotated && kind != Kind::Gif && size <= MAX_SENT_BYTES;
    let (sent, sent_kind) = if as_is {
        (bytes.to_vec(), kind)
    } else {
        // Photos (JPEG, or anything too big as PNG) go as JPEG; the rest as PNG.
        let mut as_jpeg = kind == Kind::Jpeg;
        let mut attempt = 0;
        loop {
            let small = if (sw, sh) == (width, height) {
                img.clone()
            } else {
                img.thumbnail_exact(sw, sh)
            };
            let out = encode(&small, as_jpeg).map_err(|e| bad_image(shown, rel, kind, &e))?;
            if out.len() <= MAX_SENT_BYTES || attempt >= 8 {
                break (out, if as_jpeg { Kind::Jpeg } else { Kind::Png });
            }
            attempt += 1;
            if !as_jpeg && !small.color().has_alpha() {
                as_jpeg = true;
            } else {
                (sw, sh) = fit(sw, sh, (sw.max(sh) * 3 / 4).max(1));
            }
            if attempt == 4 {
                as_jpeg = true;
            }
        }
    };
    let downscaled = (sw, sh) != (width, height);

    let mut line = format!("{shown}: {} image, {width}×{height}", kind.name());
    if downscaled {
        let mut why = Vec::new();
        if resized {
            why.push(format!("the long side is over {MAX_SIDE} px"));
        }
        if (sw, sh) != fit(width, height, MAX_SIDE) {
            why.push(format!(
                "the encoded image was over {:.1} MB",
                MAX_SENT_BYTES as f64 / 1e6
            ));
        }
        line.push_str(&format!(
            ", shown at {sw}×{sh} (downscaled from {width}×{height}: {})",
            why.join(" and ")
        ));
    } else {
        line.push_str(&format!(", {size} bytes"));
    }
    if kind == Kind::Gif {
        line.push_str(", first frame only");
    }
    if rotated {
        line.push_str(", turned upright as its EXIF orientation says");
    }
    if sent_kind != kind {
        line.push_str(&format!(", sent as {}", sent_kind.name()));
    }
    let summary = if downscaled {
        format!(
            "read {shown}: {} image {width}×{height}, shown at {sw}×{sh}",
            kind.name()
        )
    } else {
        format!("read {shown}: {} image {width}×{height}", kind.name())
    };
    Ok(Report {
        summary,
        content: format!("{line}\n"),
        truncated: downscaled,
        totals: Vec::new(),
        data: json!({
            "path": rel,
            "size": size,
            "kind": "image",
            "format": kind.name(),
            "mime_type": sent_kind.mime(),
            "width": width,
            "height": height,
            "shown_width": sw,
            "shown_height": sh,
            "downscaled": downscaled,
            "image_bytes": sent.len(),
            "image_base64": b64::encode(&sent),
        }),
    })
}
