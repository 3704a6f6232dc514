//! Unit tests of which stateless requests are served beside rmcp.

use super::*;
use serde_json::json;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

#[test]
fn accept_must_name_json_and_the_event_stream() {
    assert!(accepts_json_and_sse(&headers(&[(
        "accept",
        "application/json, text/event-stream"
    )])));
    assert!(accepts_json_and_sse(&headers(&[
        ("accept", "Application/JSON;q=0.9"),
        ("accept", "text/event-stream")
    ])));
    assert!(!accepts_json_and_sse(&headers(&[(
        "accept",
        "application/json"
    )])));
    assert!(!accepts_json_and_sse(&headers(&[("accept", "*/*")])));
    assert!(!accepts_json_and_sse(&headers(&[])));
}

#[test]
fn a_repeated_header_has_no_sole_value() {
    let h = headers(&[("mcp-name", "read"), ("mcp-name", "read")]);
    assert_eq!(sole(&h, "mcp-name"), None);
    let h = headers(&[("mcp-name", "read")]);
    assert_eq!(sole(&h, "mcp-name"), Some("read"));
}

#[test]
fn header_annotations_are_found_at_any_depth() {
    assert!(!names_headers(
        &json!({"type":"object","properties":{"path":{"type":"string"}}})
    ));
    assert!(names_headers(
        &json!({"properties":{"a":{"properties":{"b":{"x-mcp-header":"B"}}}}})
    ));
    assert!(names_headers(&json!({"anyOf":[{"x-mcp-header":"A"}]})));
}
