//! I/O errors of the built-in tools in plain words (issue #17): no `(os error N)`, and a
//! missing path names a sibling with a close name when there is one.

use crate::common::*;
use serde_json::{json, Value};
use toolgate::{Observation, Status};

/// Every text of the observation a model or a person reads.
fn all_text(o: &Observation) -> String {
    format!(
        "{}\n{}\n{}",
        o.summary,
        o.content,
        o.reason.as_deref().unwrap_or("")
    )
}

fn missing_calls() -> Vec<(&'static str, Value)> {
    vec![
        ("read", json!({"path": "src/foo.rs"})),
        (
            "edit",
            json!({"path": "src/foo.rs", "old_string": "a", "new_string": "b"}),
        ),
        ("ls", json!({"path": "src/nodir"})),
        ("grep", json!({"pattern": "x", "path": "src/foo.rs"})),
        ("glob", json!({"pattern": "*.rs", "path": "src/nodir"})),
    ]
}

#[tokio::test]
async fn a_missing_path_is_reported_without_an_errno() {
    let ws = Ws::new();
    ws.write("src/other.txt", "x\n");
    let gate = ws.gate(true).await;
    for (tool, input) in missing_calls() {
        let o = call(&gate, tool, input).await;
        assert_eq!(o.status, Status::Error, "{tool}: {o:#?}");
        assert_eq!(code(&o), "not-found", "{tool}: {o:#?}");
        let text = all_text(&o);
        assert!(!text.contains("os error"), "{tool}: {text}");
        assert!(!text.contains("No such file"), "{tool}: {text}");
        assert!(!text.contains("did you mean"), "{tool}: {text}");
    }
    let o = call(&gate, "read", json!({"path": "src/foo.rs"})).await;
    assert_eq!(o.reason.as_deref(), Some("not found: src/foo.rs"));
}

#[tokio::test]
async fn a_missing_file_with_a_close_sibling_suggests_it() {
    let ws = Ws::new();
    ws.write("src/foo.rs.bak", "a\n");
    ws.write("src/unrelated.md", "a\n");
    let gate = ws.gate(true).await;
    let o = call(&gate, "read", json!({"path": "src/foo.rs"})).await;
    assert_eq!(code(&o), "not-found");
    assert_eq!(
        o.reason.as_deref(),
        Some("not found: src/foo.rs (did you mean src/foo.rs.bak?)")
    );
    let o = call(
        &gate,
        "edit",
        json!({"path": "src/foo.rs", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert_eq!(code(&o), "not-found");
    let text = all_text(&o);
    assert!(text.contains("(did you mean src/foo.rs.bak?)"), "{text}");
    assert!(!text.contains("os error"), "{text}");
}

#[tokio::test]
async fn a_denied_sibling_is_never_suggested() {
    let ws = Ws::new();
    ws.write(".env", "SECRET=1\n");
    ws.write("keys/site.pem", "SECRET\n");
    let gate = ws.gate(false).await;
    for path in [".envx", "keys/site.pen"] {
        let o = call(&gate, "read", json!({ "path": path })).await;
        assert_eq!(code(&o), "not-found", "{o:#?}");
        let text = all_text(&o);
        assert!(!text.contains("did you mean"), "{text}");
        assert!(!text.contains("os error"), "{text}");
    }
}
