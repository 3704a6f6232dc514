//! Images, PDFs and notebooks, with every file made by the test.

use super::*;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use toolgate_guest::json;

static N: AtomicUsize = AtomicUsize::new(0);

fn tmp() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "toolgate-read-media-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read_file(root: &Path, name: &str, bytes: &[u8], extra: Value) -> Result<Report, ToolError> {
    read_budget(root, name, bytes, extra, 100_000)
}

fn read_budget(
    root: &Path,
    name: &str,
    bytes: &[u8],
    extra: Value,
    max: usize,
) -> Result<Report, ToolError> {
    let p = root.join(name);
    std::fs::write(&p, bytes).unwrap();
    let mut input = json!({"path": p.to_str().unwrap()});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            input[k] = v;
        }
    }
    let cx = Context::for_tests(root, max, &[]);
    run(&input, &cx)
}

fn code(e: &ToolError) -> String {
    let dbg = format!("{e:?}");
    let start = dbg.find("code: \"").unwrap() + 7;
    dbg[start..].split('"').next().unwrap().to_string()
}

fn b64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let mut n = 0u32;
        for &c in chunk {
            n = n << 6 | if c == b'=' { 0 } else { val(c) };
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    out
}

/// A gradient, so the encoders have something to compress.
fn picture(w: u32, h: u32) -> image::RgbImage {
    image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
    })
}

fn encoded(img: image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    out.into_inner()
}

fn png(w: u32, h: u32) -> Vec<u8> {
    encoded(picture(w, h).into(), image::ImageFormat::Png)
}

fn jpeg(w: u32, h: u32) -> Vec<u8> {
    encoded(picture(w, h).into(), image::ImageFormat::Jpeg)
}

/// The image a report carries, decoded.
fn sent(r: &Report) -> image::DynamicImage {
    let bytes = b64_decode(r.data["image_base64"].as_str().unwrap());
    image::load_from_memory(&bytes).unwrap()
}

#[test]
fn a_small_png_is_sent_as_it_is() {
    let root = tmp();
    let bytes = png(40, 30);
    // Magic bytes decide, not the name.
    let r = read_file(&root, "picture.dat", &bytes, json!({})).unwrap();
    assert_eq!(
        r.content,
        format!("picture.dat: PNG image, 40×30, {} bytes\n", bytes.len())
    );
    assert_eq!(r.summary, "read picture.dat: PNG image 40×30");
    assert!(!r.truncated);
    assert_eq!(r.data["kind"], "image");
    assert_eq!(r.data["mime_type"], "image/png");
    assert_eq!(
        (r.data["width"].as_u64(), r.data["height"].as_u64()),
        (Some(40), Some(30))
    );
    assert_eq!(r.data["shown_width"], 40);
    assert_eq!(r.data["shown_height"], 30);
    assert_eq!(r.data["downscaled"], false);
    assert_eq!(b64_decode(r.data["image_base64"].as_str().unwrap()), bytes);
}

#[test]
fn a_large_png_is_downscaled_keeping_its_aspect() {
    let root = tmp();
    let r = read_file(&root, "diagram.png", &png(3000, 2000), json!({})).unwrap();
    assert_eq!(
        r.content,
        "diagram.png: PNG image, 3000×2000, shown at 1568×1045 (downscaled from 3000×2000: the long side is over 1568 px)\n"
    );
    assert!(r.truncated);
    assert_eq!(r.data["width"], 3000);
    assert_eq!(r.data["height"], 2000);
    assert_eq!(r.data["shown_width"], 1568);
    assert_eq!(r.data["shown_height"], 1045);
    assert_eq!(r.data["mime_type"], "image/png");
    let img = sent(&r);
    assert_eq!((img.width(), img.height()), (1568, 1045));
    assert!(r.data["image_bytes"].as_u64().unwrap() <= picture::MAX_SENT_BYTES as u64);
}

#[test]
fn a_tall_jpeg_is_downscaled_as_jpeg() {
    let root = tmp();
    let bytes = jpeg(1000, 2000);
    let r = read_file(&root, "photo.jpg", &bytes, json!({})).unwrap();
    assert_eq!(r.data["mime_type"], "image/jpeg");
    assert_eq!(r.data["shown_width"], 784);
    assert_eq!(r.data["shown_height"], 1568);
    let img = sent(&r);
    assert_eq!((img.width(), img.height()), (784, 1568));
    assert!(r
        .content
        .starts_with("photo.jpg: JPEG image, 1000×2000, shown at 784×1568"));

    // A small JPEG goes as it is.
    let small = jpeg(64, 48);
    let r = read_file(&root, "small.jpeg", &small, json!({})).unwrap();
    assert_eq!(r.data["mime_type"], "image/jpeg");
    assert_eq!(r.data["width"], 64);
    assert_eq!(b64_decode(r.data["image_base64"].as_str().unwrap()), small);
}

#[test]
fn a_png_too_heavy_to_send_is_reencoded_smaller() {
    let root = tmp();
    // Noise does not compress: 1200×1200 RGB is about 4.3 MB as PNG, under the side limit.
    let mut state = 0x2545_f491_u32;
    let noise = image::RgbImage::from_fn(1200, 1200, |_, _| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        image::Rgb([state as u8, (state >> 8) as u8, (state >> 16) as u8])
    });
    let bytes = encoded(noise.into(), image::ImageFormat::Png);
    assert!(bytes.len() > picture::MAX_SENT_BYTES);
    let r = read_file(&root, "noise.png", &bytes, json!({})).unwrap();
    let sent_bytes = b64_decode(r.data["image_base64"].as_str().unwrap());
    assert!(
        sent_bytes.len() <= picture::MAX_SENT_BYTES,
        "{}",
        sent_bytes.len()
    );
    assert_eq!(r.data["width"], 1200);
    assert_eq!(r.data["mime_type"], "image/jpeg");
    assert!(r.content.contains("sent as JPEG"), "{}", r.content);
}

#[test]
fn gif_shows_its_first_frame_and_webp_its_image() {
    let root = tmp();
    let gif = encoded(picture(20, 10).into(), image::ImageFormat::Gif);
    let r = read_file(&root, "anim.gif", &gif, json!({})).unwrap();
    assert_eq!(r.data["mime_type"], "image/png");
    assert_eq!(
        (r.data["width"].as_u64(), r.data["height"].as_u64()),
        (Some(20), Some(10))
    );
    assert_eq!(
        r.content,
        "anim.gif: GIF image, 20×10, ".to_string()
            + &format!("{} bytes, first frame only, sent as PNG\n", gif.len())
    );
    assert_eq!(sent(&r).width(), 20);

    let webp = encoded(
        image::DynamicImage::ImageRgba8(image::DynamicImage::from(picture(33, 17)).to_rgba8()),
        image::ImageFormat::WebP,
    );
    let r = read_file(&root, "p.webp", &webp, json!({})).unwrap();
    assert_eq!(r.data["mime_type"], "image/webp");
    assert_eq!(
        (r.data["width"].as_u64(), r.data["height"].as_u64()),
        (Some(33), Some(17))
    );
}

/// A PNG whose header claims `w`×`h`, with one empty IDAT: nothing to decode.
fn png_header(w: u32, h: u32) -> Vec<u8> {
    let mut v = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = b"IHDR".to_vec();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    v.extend_from_slice(&13u32.to_be_bytes());
    v.extend_from_slice(&ihdr);
    v.extend_from_slice(&[0, 0, 0, 0]); // crc, not checked before the size is
    v.extend_from_slice(b"\0\0\0\0IEND\xaeB`\x82");
    v
}

#[test]
fn a_decompression_bomb_is_refused_from_its_header() {
    let root = tmp();
    let e = read_file(&root, "bomb.png", &png_header(100_000, 100_000), json!({})).unwrap_err();
    assert_eq!(code(&e), "image-too-large");
    let dbg = format!("{e:?}");
    assert!(
        dbg.contains("bomb.png is a PNG image of 100000×100000 (10000 megapixels); `read` decodes images of at most 50 megapixels"),
        "{dbg}"
    );
    // A corrupt image under the limit is a plain error naming the file.
    let e = read_file(&root, "broken.png", &png_header(10, 10), json!({})).unwrap_err();
    assert_eq!(code(&e), "bad-image");
    assert!(format!("{e:?}").contains("broken.png looks like a PNG image but could not be decoded"));
}

#[test]
fn big_files_are_refused_with_the_limit_named() {
    let root = tmp();
    let p = root.join("huge.png");
    std::fs::write(&p, png(4, 4)).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(21 << 20).unwrap(); // sparse
    drop(f);
    let cx = Context::for_tests(&root, 100_000, &[]);
    let e = run(&json!({"path": p.to_str().unwrap()}), &cx).unwrap_err();
    assert_eq!(code(&e), "too-large");
    assert!(
        format!("{e:?}").contains("huge.png is 21.0 MB; `read` opens image files of at most 20 MB"),
        "{e:?}"
    );
}

#[test]
fn other_binary_files_are_still_refused() {
    let root = tmp();
    let mut state = 7u32;
    let junk: Vec<u8> = (0..4096)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (state >> 16) as u8
        })
        .chain([0])
        .collect();
    let e = read_file(&root, "blob.bin", &junk, json!({})).unwrap_err();
    assert_eq!(code(&e), "binary");
    assert!(format!("{e:?}").contains("blob.bin is a binary file (4097 bytes)"));
    // A PNG signature with no header to read is not an image `read` can show.
    let e = read_file(
        &root,
        "img.bin",
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        json!({}),
    )
    .unwrap_err();
    assert_eq!(code(&e), "binary");
    // `pages` is for PDFs only.
    let e = read_file(&root, "a.txt", b"text\n", json!({"pages": "1"})).unwrap_err();
    assert_eq!(code(&e), "bad-input");
    assert!(format!("{e:?}").contains("`pages` is for PDF files and a.txt is not a PDF"));
}

#[test]
fn header_dimensions_of_each_format() {
    use picture::{header_dimensions, Kind};
    use toolgate_reading::sniff_image as sniff;
    let j = jpeg(123, 45);
    assert_eq!(sniff(&j), Some(Kind::Jpeg));
    assert_eq!(header_dimensions(Kind::Jpeg, &j), Some((123, 45)));
    let g = encoded(picture(7, 9).into(), image::ImageFormat::Gif);
    assert_eq!(header_dimensions(Kind::Gif, &g), Some((7, 9)));
    let w = encoded(picture(300, 200).into(), image::ImageFormat::WebP);
    assert_eq!(sniff(&w), Some(Kind::WebP));
    assert_eq!(header_dimensions(Kind::WebP, &w), Some((300, 200)));
    assert_eq!(picture::fit(3000, 2000, 1568), (1568, 1045));
    assert_eq!(picture::fit(100, 50, 1568), (100, 50));
    assert_eq!(picture::fit(100_000, 1, 1568), (1568, 1));
}

#[path = "tests_docs.rs"]
mod docs;

#[test]
fn text_that_only_looks_like_an_image_or_a_pdf_stays_text() {
    let root = tmp();
    let r = read_file(
        &root,
        "note.txt",
        b"GIF89a is the format's signature\n",
        json!({}),
    )
    .unwrap();
    assert_eq!(r.content, "     1\tGIF89a is the format's signature\n");
    let src = format!("{}\nlet pdf = b\"%PDF-1.4\";\n", "// header\n".repeat(20));
    let r = read_file(&root, "make_pdf.rs", src.as_bytes(), json!({})).unwrap();
    assert_eq!(r.totals, vec![("lines", 22, 22)]);
    assert!(r.content.ends_with("    22\tlet pdf = b\"%PDF-1.4\";\n"));
}
