//! Unit tests of `mcp/elicit.rs`.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::tools::Risk;

fn request(choices: Vec<Answer>) -> ApprovalRequest {
    ApprovalRequest {
        id: "r".into(),
        session: "mcp-x".into(),
        tool: "write\u{1b}[31m".into(),
        key: "write:src/".into(),
        description: "write (write tool)\n  creates src/a.txt (path)".into(),
        risk: Risk::Write,
        input_sha256: "abc".into(),
        choices,
        scopes: Vec::new(),
        expires_in_secs: 300,
    }
}

#[test]
fn message_is_plain_and_names_everything() {
    let m = message(&request(vec![Answer::Once, Answer::Deny]));
    assert!(!m.chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
    assert!(m.contains("tool: \"write\\x1b[31m\" (write risk)"), "{m}");
    assert!(m.contains("key: write:src/"));
    assert!(m.contains("creates src/a.txt"));
    assert!(m.contains("once = run this one call"));
    assert!(!m.contains("project ="));
}

#[test]
fn a_key_with_a_newline_or_escape_stays_on_its_line() {
    let mut r = request(vec![Answer::Once, Answer::Session, Answer::Deny]);
    r.tool = "write".into();
    r.key = "write:a\nkey: write:src/\u{1b}[8m/".into();
    let m = message(&r);
    assert!(
        m.contains("key: \"write:a\\nkey: write:src/\\x1b[8m/\"\n"),
        "{m}"
    );
    assert!(
        m.contains("allow `\"write:a\\nkey: write:src/\\x1b[8m/\"` until"),
        "{m}"
    );
    assert_eq!(
        m.lines().filter(|l| l.starts_with("key:")).count(),
        1,
        "{m}"
    );
}

#[test]
fn schema_offers_exactly_the_choices() {
    let s = schema(&[Answer::Once, Answer::Session, Answer::Deny], &[]).unwrap();
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(
        v["properties"][DECISION_FIELD]["enum"],
        json!(["once", "session", "deny"])
    );
    assert_eq!(v["required"], json!([DECISION_FIELD]));
}

#[test]
fn a_shell_request_offers_its_scopes_by_name() {
    let mut r = request(vec![Answer::Once, Answer::Session, Answer::Deny]);
    r.tool = "shell".into();
    r.key = "shell:python3".into();
    r.scopes = vec![
        Scope {
            key: "shell:python3 -m unittest t.py".into(),
            allows: "only this exact command".into(),
        },
        Scope {
            key: "shell:python3 -m unittest **".into(),
            allows: "also any other unittest run".into(),
        },
        Scope {
            key: "shell:python3".into(),
            allows: "any python3 command".into(),
        },
    ];
    let v = serde_json::to_value(schema(&r.choices, &r.scopes).unwrap()).unwrap();
    let field = &v["properties"][DECISION_FIELD];
    assert_eq!(
        field["enum"],
        json!(["once", "session:0", "session:1", "session", "deny"])
    );
    let names = field["enumNames"].as_array().unwrap();
    assert_eq!(names.len(), 5);
    assert!(names[2]
            .as_str()
            .unwrap()
            .contains("allow `shell:python3 -m unittest **` until this connection ends (also any other unittest run)"));
    assert!(names[3].as_str().unwrap().contains("`shell:python3`"));
    let m = message(&r);
    assert!(
        m.contains("session:0 = run it, and allow `shell:python3 -m unittest t.py`"),
        "{m}"
    );
    assert!(m.contains("(any python3 command)"), "{m}");
    for (wire, answer) in [
        ("session:1", Some(Answer::SessionScope(1))),
        ("session", Some(Answer::Session)),
        ("session:x", None),
    ] {
        assert_eq!(Answer::parse(wire), answer);
    }
    assert!(Answer::SessionScope(1).offered(&r));
    assert!(!Answer::SessionScope(3).offered(&r));
}
