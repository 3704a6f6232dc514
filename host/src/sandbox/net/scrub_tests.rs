//! The stream scrubber: every form of a credential's value, wherever reads split it.

use super::*;
use crate::sandbox::net::creds::{placeholder, Credential};
use crate::sandbox::net::HostPattern;
use base64::Engine as _;

const VALUE: &str = "ghp_s3cr3t/Value+0123456789";

fn creds() -> Vec<Credential> {
    vec![Credential {
        name: "api".into(),
        value: Ok(VALUE.into()),
        hosts: vec![HostPattern::parse("api.example:8080").unwrap()],
        header: None,
        env: None,
    }]
}

fn scrubber() -> Scrubber {
    Scrubber::new(&creds()).unwrap()
}

/// `text` through the stream scrubber in parts cut at `cuts`.
fn streamed(text: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut s = scrubber();
    let mut out = Vec::new();
    let mut at = 0;
    for &c in cuts {
        out.extend(s.push(&text[at..c]));
        at = c;
    }
    out.extend(s.push(&text[at..]));
    out.extend(s.finish());
    out
}

fn encodings() -> Vec<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    vec![
        VALUE.to_string(),
        serde_json::to_string(VALUE).unwrap().replace('/', "\\/"),
        b64.encode(format!("Authorization: Bearer {VALUE}\n")),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("x{VALUE}")),
        "ghp_s3cr3t%2FValue%2B0123456789".to_string(),
        hex::encode(VALUE),
    ]
}

#[test]
fn every_form_is_replaced_by_the_placeholder() {
    let ph = placeholder("api");
    for e in encodings() {
        let text = format!("{{\"echo\": \"{e}\"}}");
        let out = String::from_utf8(scrubber().whole(text.as_bytes())).unwrap();
        assert!(out.contains(&ph), "{e} -> {out}");
        assert!(!scrubber().found_in(out.as_bytes()), "{out}");
    }
}

#[test]
fn a_value_split_across_reads_at_any_offset_is_still_found() {
    for e in encodings() {
        let text = format!("header\r\nX-Echo: {e}\r\nmore text after it");
        let whole = scrubber().whole(text.as_bytes());
        for cut in 0..=text.len() {
            assert_eq!(streamed(text.as_bytes(), &[cut]), whole, "{e} cut at {cut}");
        }
        // One byte at a time.
        let cuts: Vec<usize> = (1..text.len()).collect();
        assert_eq!(streamed(text.as_bytes(), &cuts), whole, "{e} byte by byte");
    }
}

#[test]
fn ordinary_bytes_pass_unchanged_whatever_the_reads() {
    let text = b"The quick brown fox; ghp_ s3cr3t and 0123 are not the value. \xff\x00";
    assert_eq!(scrubber().whole(text), text);
    assert_eq!(streamed(text, &[3, 10, 11, 40]), text);
}

#[test]
fn only_a_bound_host_gets_a_scrubber_and_short_values_none() {
    let c = creds();
    assert!(for_host(&c, "api.example", 8080).is_some());
    assert!(for_host(&c, "api.example", 8081).is_none());
    assert!(for_host(&c, "other.example", 8080).is_none());
    assert_eq!(bound_here(&c, "api.example", 8080), Some("api"));
    let mut short = creds();
    short[0].value = Ok("abc".into());
    assert!(Scrubber::new(&short).is_none());
    short[0].value = Err("not set".into());
    assert!(Scrubber::new(&short).is_none());
}

#[test]
fn a_compressed_answer_is_refused_saying_why() {
    assert_eq!(compressed("h", None), None);
    assert_eq!(compressed("h", Some("")), None);
    assert_eq!(compressed("h", Some("Identity")), None);
    let why = compressed("api.example", Some("gzip")).unwrap();
    assert!(
        why.contains("compressed") && why.contains("Accept-Encoding: identity"),
        "{why}"
    );
}

#[test]
fn a_wasi_response_has_its_headers_and_body_scrubbed() {
    use http_body_util::BodyExt;
    let b64 = base64::engine::general_purpose::STANDARD.encode(VALUE);
    let body = http_body_util::Full::new(Bytes::from(format!("{{\"h\":\"{b64}\"}}")))
        .map_err(|never: std::convert::Infallible| match never {});
    let resp = http::Response::builder()
        .header("set-cookie", format!("t={VALUE}"))
        .header("location", "/x?t=ghp_s3cr3t%2FValue%2B0123456789")
        .header("content-length", "99")
        .body(body)
        .unwrap();
    let r = response("api.example", scrubber(), resp).unwrap();
    let ph = placeholder("api");
    assert_eq!(r.headers()["set-cookie"], format!("t={ph}").as_str());
    assert_eq!(r.headers()["location"], format!("/x?t={ph}").as_str());
    assert!(r.headers().get("content-length").is_none());
    let got = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(r.into_body().collect())
        .unwrap()
        .to_bytes();
    assert_eq!(got, format!("{{\"h\":\"{ph}\"}}"));

    let gz = http::Response::builder()
        .header("content-encoding", "gzip")
        .body(http_body_util::Empty::<Bytes>::new().map_err(|never| match never {}))
        .unwrap();
    let err = response("api.example", scrubber(), gz).err().unwrap();
    assert!(err.contains("compressed"), "{err}");
}
