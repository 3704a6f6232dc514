//! The deny-list inside the sandbox: a guest given the workspace still cannot open, list or
//! write secrets or the host's state through its preopen (host/src/sandbox/fsguard.rs; the
//! writable-root cases are its unit tests, which drive the sandbox directly).

use crate::common::*;
use serde_json::{json, Value};

/// Run the hostile guest's `probe` mode; one result per op.
async fn probe(gate: &toolgate::Gate, ops: Value) -> Vec<Value> {
    let o = ok(gate, "test-hostile", json!({"mode": "probe", "ops": ops})).await;
    o.data["results"].as_array().unwrap().clone()
}

fn workspace() -> Ws {
    let ws = Ws::new();
    ws.write(".env", "SECRET=1")
        .write("notes.txt", "hello")
        .write("src/lib.rs", "// lib")
        .write("src/.ssh/id_ed25519", "key")
        .write("certs/server.pem", "pem")
        .write(".toolgate/outputs/call-1.txt", "saved")
        .write(".toolgate/grants.toml", "");
    ws
}

fn entries(r: &Value) -> Vec<String> {
    r["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn guest_cannot_reach_denied_files_inside_its_preopen() {
    let ws = workspace();
    let gate = ws.gate(false).await;
    let r = probe(
        &gate,
        json!([
            {"op": "read", "path": "/workspace/.env"},
            {"op": "read", "path": "/workspace/src/.ssh/id_ed25519"},
            {"op": "read", "path": "/workspace/certs/server.pem"},
            {"op": "read", "path": "/workspace/src/../.env"},
            {"op": "stat", "path": "/workspace/.env"},
            {"op": "read", "path": "/workspace/.toolgate/grants.toml"},
            {"op": "list", "path": "/workspace/.toolgate"},
            {"op": "write", "path": "/workspace/.toolgate/x"},
            {"op": "read", "path": "/workspace/.toolgate/outputs/call-1.txt"},
            {"op": "read", "path": "/workspace/notes.txt"},
            {"op": "read", "path": "/workspace/src/lib.rs"},
            {"op": "list", "path": "/workspace"},
            {"op": "list", "path": "/workspace/src"},
            {"op": "list", "path": "/workspace/certs"},
        ]),
    )
    .await;
    for (i, result) in r.iter().enumerate() {
        let want = i >= 8;
        assert_eq!(result["ok"], json!(want), "{result}");
        if !want {
            // Refused by the guard (`access`), not merely missing.
            let detail = result["detail"].as_str().unwrap();
            assert!(!detail.contains("No such file"), "{result}");
        }
    }
    assert_eq!(r[8]["detail"], "saved");
    assert_eq!(r[9]["detail"], "hello");
    let top = entries(&r[11]);
    assert!(top.contains(&"notes.txt".to_string()), "{top:?}");
    assert!(!top.contains(&".env".to_string()), "{top:?}");
    assert!(!top.contains(&".toolgate".to_string()), "{top:?}");
    assert_eq!(entries(&r[12]), ["lib.rs"]);
    assert!(entries(&r[13]).is_empty());
    assert!(!ws.path(".toolgate/x").exists());
}

#[tokio::test]
async fn built_in_tools_still_work_under_the_guard() {
    let ws = workspace();
    let gate = ws.gate(true).await;
    // A top-level write gets a writable preopen of the workspace root.
    ok(
        &gate,
        "write",
        json!({"path": "top.txt", "content": "new\n"}),
    )
    .await;
    assert_eq!(ws.read("top.txt"), "new\n");
    let o = ok(&gate, "read", json!({"path": "src/lib.rs"})).await;
    assert!(o.content.contains("// lib"), "{o:#?}");
    let o = ok(&gate, "grep", json!({"pattern": "SECRET|lib|saved"})).await;
    assert!(o.content.contains("lib.rs"), "{o:#?}");
    assert!(!o.content.contains("SECRET"), "{o:#?}");
}
