//! Tests of `check_endpoint`.

#![allow(clippy::unwrap_used)]
use super::*;

#[test]
fn endpoints_are_checked() {
    assert_eq!(
        check_endpoint("http://127.0.0.1:4318/").unwrap(),
        "http://127.0.0.1:4318"
    );
    assert_eq!(
        check_endpoint("https://otel.example.com/otlp").unwrap(),
        "https://otel.example.com/otlp"
    );
    for bad in [
        "ftp://x:21",
        "127.0.0.1:4318",
        "http://user:pw@collector:4318",
        "http://collector:4318/?a=b",
        "http://collector:4318/v1/traces",
        "not a url",
        "",
    ] {
        let e = check_endpoint(bad).unwrap_err();
        assert!(e.contains("http"), "{bad}: {e}");
    }
}
