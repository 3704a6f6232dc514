//! `read` of images, PDFs and notebooks through the gate, with every file made by the test.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use toolgate::Status;

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// An RGB PNG of `w`×`h` written by hand: zlib with stored (uncompressed) blocks.
pub(crate) fn png(w: u32, h: u32) -> Vec<u8> {
    let mut raw = Vec::with_capacity((w as usize * 3 + 1) * h as usize);
    for y in 0..h {
        raw.push(0); // filter: none
        for x in 0..w {
            raw.extend_from_slice(&[(x % 256) as u8, (y % 256) as u8, 0x80]);
        }
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());

    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// A 16×8 baseline JPEG (652 bytes), made once with the `image` crate's encoder at quality 50.
const JPEG_HEX: &[&str] = &[
    "ffd8ffe000104a46494600010200000100010000ffc00011080008001003011100021101031101ffdb004300100b0c0e",
    "0c0a100e0d0e1211101318281a181616183123251d283a333d3c3933383740485c4e404457453738506d51575f626768",
    "673e4d71797064785c656763ffdb0043011112121815182f1a1a2f634238426363636363636363636363636363636363",
    "636363636363636363636363636363636363636363636363636363636363636363ffc4001f0000010501010101010100",
    "000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d010203000411051221",
    "31410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a",
    "434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a9293949596979899",
    "9aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1",
    "f2f3f4f5f6f7f8f9faffc4001f0100030101010101010101010000000000000102030405060708090a0bffc400b51100",
    "020102040403040705040400010277000102031104052131061241510761711322328108144291a1b1c109233352f015",
    "6272d10a162434e125f11718191a262728292a35363738393a434445464748494a535455565758595a63646566676869",
    "6a737475767778797a82838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4",
    "c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda000c03010002110311003f00a1",
    "6fa174f92ba278b3870f8ef334edf42e9f2572cf167bd87c7799ffd9",
];

fn jpeg() -> Vec<u8> {
    let hex: String = JPEG_HEX.concat();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// The image the observation carries for the model: the host took it out of `data` (which
/// keeps only its size), and MCP sends it as an image content block after the text.
fn sent(o: &toolgate::Observation) -> (usize, Option<Vec<u8>>) {
    use base64::Engine as _;
    assert!(
        o.data.get("image_base64").is_none(),
        "the pixels stayed in data"
    );
    assert_eq!(o.images.len(), 1, "one image for the model");
    let image = &o.images[0];
    assert_eq!(o.data["mime_type"], image.mime_type.as_str());
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(&image.base64)
        .unwrap();
    assert_eq!(o.data["image_bytes"], bytes.len());
    // Over MCP: the text, then the image; structuredContent without the pixels.
    let r = toolgate::mcp::render(o);
    let blocks = serde_json::to_value(&r.content).unwrap();
    assert_eq!(blocks[0]["type"], "text", "{blocks:#}");
    assert_eq!(blocks[1]["type"], "image", "{blocks:#}");
    assert_eq!(blocks[1]["mimeType"], image.mime_type.as_str());
    assert_eq!(blocks[1]["data"], image.base64.as_str());
    let structured = r.structured_content.unwrap().to_string();
    assert!(
        !structured.contains(&image.base64),
        "structuredContent carries the pixels"
    );
    (bytes.len(), Some(bytes))
}

#[tokio::test]
async fn read_shows_a_png_and_a_jpeg_with_their_dimensions() {
    let ws = Ws::new();
    let small = png(40, 30);
    ws.write("img/chart.png", &small)
        .write("img/photo.jpg", jpeg());
    let gate = ws.gate(false).await;

    let o = ok(&gate, "read", json!({"path": "img/chart.png"})).await;
    assert_eq!(
        o.content,
        format!("img/chart.png: PNG image, 40×30, {} bytes\n", small.len())
    );
    assert_eq!(o.summary, "read img/chart.png: PNG image 40×30");
    assert!(!o.truncated);
    for (key, want) in [
        ("kind", json!("image")),
        ("mime_type", json!("image/png")),
        ("width", json!(40)),
        ("height", json!(30)),
        ("shown_width", json!(40)),
        ("shown_height", json!(30)),
    ] {
        assert_eq!(o.data[key], want, "data.{key}");
    }
    let (len, bytes) = sent(&o);
    assert_eq!(len, small.len());
    if let Some(bytes) = bytes {
        assert_eq!(bytes, small);
    }

    let o = ok(&gate, "read", json!({"path": "img/photo.jpg"})).await;
    assert_eq!(o.content, "img/photo.jpg: JPEG image, 16×8, 652 bytes\n");
    assert_eq!(o.data["mime_type"], "image/jpeg");
    assert_eq!(
        (o.data["width"].clone(), o.data["height"].clone()),
        (json!(16), json!(8))
    );
    let (len, bytes) = sent(&o);
    assert_eq!(len, 652);
    if let Some(bytes) = bytes {
        assert_eq!(bytes, jpeg());
    }
}

#[tokio::test]
async fn read_downscales_a_wide_image_in_the_component() {
    let ws = Ws::new();
    ws.write("wide.png", png(2000, 100));
    let gate = ws.gate(false).await;
    let o = ok(&gate, "read", json!({"path": "wide.png"})).await;
    assert_eq!(
        o.content,
        "wide.png: PNG image, 2000×100, shown at 1568×78 (downscaled from 2000×100: the long side is over 1568 px)\n"
    );
    assert!(o.truncated);
    assert_eq!(o.data["width"], 2000);
    assert_eq!(o.data["shown_width"], 1568);
    assert_eq!(o.data["shown_height"], 78);
    assert_eq!(o.data["mime_type"], "image/png");
    // What is sent is the smaller image, re-encoded (the file itself is 600 kB).
    let (len, bytes) = sent(&o);
    assert!(len > 0 && len < 1568 * 78 * 3, "{len}");
    if let Some(bytes) = bytes {
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR"));
        assert_eq!(&bytes[16..24], &[0, 0, 6, 32, 0, 0, 0, 78]); // 1568×78
    }
}

#[tokio::test]
async fn read_refuses_an_image_bomb_before_decoding_and_other_binary_files() {
    let ws = Ws::new();
    // A header claiming 100000×100000 and no pixel data.
    let mut bomb = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&100_000u32.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut bomb, b"IHDR", &ihdr);
    chunk(&mut bomb, b"IEND", &[]);
    ws.write("bomb.png", bomb);
    let noise: Vec<u8> = (0u32..3000)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    ws.write("data.bin", noise);
    let gate = ws.gate(false).await;

    let o = call(&gate, "read", json!({"path": "bomb.png"})).await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "image-too-large");
    assert_eq!(
        o.reason.as_deref(),
        Some("bomb.png is a PNG image of 100000×100000 (10000 megapixels); `read` decodes images of at most 50 megapixels")
    );

    let o = call(&gate, "read", json!({"path": "data.bin"})).await;
    assert_eq!(code(&o), "binary");
    assert_eq!(
        o.reason.as_deref(),
        Some("data.bin is a binary file (3000 bytes); `read` shows text, images (PNG, JPEG, GIF, WebP), PDFs and notebooks only")
    );
}

/// A minimal valid PDF with one page per entry of `pages` (each line drawn in Helvetica) and
/// its cross-reference table computed.
fn pdf(pages: &[&str]) -> Vec<u8> {
    let n = pages.len();
    let font = 3 + 2 * n;
    let kids: Vec<String> = (0..n).map(|i| format!("{} 0 R", 3 + 2 * i)).collect();
    let mut objects = vec![
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        format!("<< /Type /Pages /Kids [{}] /Count {n} >>", kids.join(" ")),
    ];
    for (i, text) in pages.iter().enumerate() {
        objects.push(format!(
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R >> >> /Contents {} 0 R >>",
            4 + 2 * i
        ));
        let stream: String = text
            .lines()
            .enumerate()
            .map(|(k, line)| format!("BT /F1 12 Tf 72 {} Td ({line}) Tj ET\n", 700 - 14 * k))
            .collect();
        objects.push(format!(
            "<< /Length {} >>\nstream\n{stream}endstream",
            stream.len()
        ));
    }
    objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_string());
    let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{body}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    let mut table = format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1);
    for off in offsets {
        table.push_str(&format!("{off:010} 00000 n \n"));
    }
    out.extend_from_slice(table.as_bytes());
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

#[tokio::test]
async fn read_gives_a_pdf_as_text_per_page_and_pages_picks() {
    let ws = Ws::new();
    ws.write(
        "docs/spec.pdf",
        pdf(&[
            "Chapter one\nThe gate checks every call",
            "Chapter two\nThe end",
        ]),
    );
    ws.write("docs/broken.pdf", "%PDF-1.4\nnot a real document\n");
    let gate = ws.gate(false).await;

    let o = ok(&gate, "read", json!({"path": "docs/spec.pdf"})).await;
    assert_eq!(
        o.content,
        "--- page 1 of 2 ---\nChapter one\nThe gate checks every call\n--- page 2 of 2 ---\nChapter two\nThe end\n"
    );
    assert_eq!(o.summary, "read docs/spec.pdf: PDF, 2 pages");
    assert_eq!(o.data["kind"], "pdf");
    assert_eq!(o.data["pages_total"], 2);
    assert_eq!(o.data["pages_shown"], json!([1, 2]));

    let o = ok(
        &gate,
        "read",
        json!({"path": "docs/spec.pdf", "pages": "2"}),
    )
    .await;
    assert_eq!(o.content, "--- page 2 of 2 ---\nChapter two\nThe end\n");
    assert_eq!(o.data["pages_shown"], json!([2]));

    let o = call(
        &gate,
        "read",
        json!({"path": "docs/spec.pdf", "pages": "5"}),
    )
    .await;
    assert_eq!(code(&o), "bad-input");
    assert_eq!(
        o.reason.as_deref(),
        Some("`pages` \"5\" asks for page 5, but the file has 2 pages; use pages between 1 and 2")
    );

    let o = call(&gate, "read", json!({"path": "docs/broken.pdf"})).await;
    assert_eq!(code(&o), "bad-pdf");
    assert!(
        o.reason
            .as_deref()
            .unwrap_or("")
            .starts_with("docs/broken.pdf could not be read as a PDF"),
        "{o:#?}"
    );
}

#[tokio::test]
async fn read_gives_a_notebook_as_cells_with_outputs() {
    let ws = Ws::new();
    let nb = json!({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Load\n", "Read the data."]},
            {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": ["print(2 + 2)"],
             "outputs": [{"output_type": "stream", "name": "stdout", "text": ["4\n"]}]},
            {"cell_type": "code", "execution_count": 2, "metadata": {}, "source": ["boom()"],
             "outputs": [{"output_type": "error", "ename": "NameError", "evalue": "name 'boom' is not defined",
                          "traceback": ["\u{1b}[0;31mNameError\u{1b}[0m: name 'boom' is not defined"]}]},
            {"cell_type": "code", "execution_count": 3, "metadata": {}, "source": ["show()"],
             "outputs": [{"output_type": "display_data", "metadata": {},
                          "data": {"image/png": "iVBORw0KGgoAAAANSUhEUgAAAAE="}}]}
        ]
    });
    ws.write("nb/analysis.ipynb", nb.to_string());
    let gate = ws.gate(false).await;

    let o = ok(&gate, "read", json!({"path": "nb/analysis.ipynb"})).await;
    assert_eq!(
        o.content,
        "# %% [markdown] cell 1\n# Load\nRead the data.\n\
         \n# %% [code] cell 2\nprint(2 + 2)\n# [output: stdout]\n4\n\
         \n# %% [code] cell 3\nboom()\n# [output: error] NameError: name 'boom' is not defined\n\
         NameError: name 'boom' is not defined\n\
         \n# %% [code] cell 4\nshow()\n# [output: display]\n[image/png output, 20 bytes]\n"
    );
    assert_eq!(o.data["kind"], "notebook");
    assert_eq!(o.data["cells"], 4);

    let o = ok(
        &gate,
        "read",
        json!({"path": "nb/analysis.ipynb", "offset": 2, "limit": 1}),
    )
    .await;
    assert!(
        o.content.starts_with("# %% [code] cell 3\n"),
        "{}",
        o.content
    );
    assert!(o.content.ends_with(
        "[truncated by cell limit: showing cells 3-3 of 4; use offset=3 to read more]\n"
    ));
    assert!(o.truncated);
}
