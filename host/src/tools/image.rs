//! Images a tool returns for the model to see (`read` of a PNG, say). A tool puts the image in
//! its `data` as `image_base64` with a `mime_type`; the host takes it out of `data` — so the
//! audit, the saved outputs and `structuredContent` never carry the pixels — checks it, and
//! MCP sends it as an image content block beside the text.
//!
//! The check is the host's own, whatever tool sent it (a plugin's data is a guest's words):
//! one of four formats, named by its type and starting with that format's signature, valid
//! base64, at most [`MAX_IMAGE_BYTES`]. Anything else fails the call with a plain error rather
//! than reaching a client as something it may try to decode.

use base64::Engine as _;
use serde_json::Value;

/// The image types a tool may return, with the signature their bytes start with.
const FORMATS: &[(&str, &[u8])] = &[
    ("image/png", b"\x89PNG\r\n\x1a\n"),
    ("image/jpeg", b"\xff\xd8\xff"),
    ("image/gif", b"GIF8"),
    ("image/webp", b"RIFF"),
];

/// The largest image passed on (decoded bytes): what model APIs take for one image.
pub const MAX_IMAGE_BYTES: usize = 5 << 20;

/// One image for the model: its type and its bytes in standard base64.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub mime_type: String,
    /// The image, standard base64 with padding.
    pub base64: String,
}

/// Take the image out of a tool's `data`, if it has one: `data.image_base64` is removed and
/// `data.image_bytes` (the decoded size) put in its place. `Err` says why the host refuses it.
pub fn take_image(data: &mut Value) -> Result<Option<Image>, String> {
    let Some(map) = data.as_object_mut() else {
        return Ok(None);
    };
    let Some(encoded) = map.remove("image_base64") else {
        return Ok(None);
    };
    let Value::String(encoded) = encoded else {
        return Err("`image_base64` is not a string".into());
    };
    let mime = map
        .get("mime_type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let Some((_, signature)) = FORMATS.iter().find(|(m, _)| *m == mime) else {
        return Err(format!(
            "its type `{mime}` is not one of {}",
            FORMATS
                .iter()
                .map(|(m, _)| *m)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    // Base64 is 4 characters for 3 bytes: refuse a long text before decoding it.
    if encoded.len() / 4 * 3 > MAX_IMAGE_BYTES + 3 {
        return Err(format!(
            "it is larger than the {} MiB the host passes on",
            MAX_IMAGE_BYTES >> 20
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded.as_bytes())
        .map_err(|_| "`image_base64` is not valid base64".to_string())?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(format!(
            "it is larger than the {} MiB the host passes on",
            MAX_IMAGE_BYTES >> 20
        ));
    }
    let webp_ok = mime != "image/webp" || bytes.get(8..12) == Some(b"WEBP");
    if !bytes.starts_with(signature) || !webp_ok {
        return Err(format!("its bytes are not a {mime} image"));
    }
    map.insert("image_bytes".into(), Value::from(bytes.len() as u64));
    Ok(Some(Image {
        mime_type: mime,
        base64: encoded,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn an_image_is_taken_out_of_data() {
        let png = b"\x89PNG\r\n\x1a\n rest of it";
        let mut data = json!({"kind": "image", "mime_type": "image/png", "image_base64": b64(png)});
        let img = take_image(&mut data).unwrap().unwrap();
        assert_eq!(img.mime_type, "image/png");
        assert_eq!(img.base64, b64(png));
        assert_eq!(
            data,
            json!({"kind": "image", "mime_type": "image/png", "image_bytes": png.len()})
        );
        // No image: nothing changes.
        let mut plain = json!({"path": "a.txt"});
        assert_eq!(take_image(&mut plain).unwrap(), None);
        assert_eq!(plain, json!({"path": "a.txt"}));
    }

    #[test]
    fn what_is_not_the_named_image_is_refused() {
        let cases = [
            json!({"mime_type": "image/svg+xml", "image_base64": b64(b"<svg onload=x>")}),
            json!({"mime_type": "image/png", "image_base64": b64(b"<html>not a png")}),
            json!({"mime_type": "image/png", "image_base64": "%%%not base64"}),
            json!({"mime_type": "image/png", "image_base64": 7}),
            json!({"image_base64": b64(b"\x89PNG\r\n\x1a\n")}),
            json!({"mime_type": "image/webp", "image_base64": b64(b"RIFF\0\0\0\0WAVEfmt ")}),
        ];
        for mut c in cases {
            assert!(take_image(&mut c).is_err(), "{c}");
        }
        let mut big = vec![0u8; MAX_IMAGE_BYTES + 1];
        big[..8].copy_from_slice(b"\x89PNG\r\n\x1a\n");
        let mut c = json!({"mime_type": "image/png", "image_base64": b64(&big)});
        let why = take_image(&mut c).unwrap_err();
        assert!(why.contains("5 MiB"), "{why}");
    }
}
