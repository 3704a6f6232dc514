//! The host read-ahead (`toolgate:search/read-ahead`, host/src/sandbox/read_ahead.rs): a
//! guest asking the host to read a directory's files ahead gets the bytes of only those plain
//! files it could read itself, everything else is left to it (where the filesystem guard
//! decides), and grep's results are those of reading every file itself.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Ask the host's read-ahead directly from the hostile guest (no guest-side checks).
async fn read_ahead(gate: &toolgate::Gate, ops: Vec<Value>) -> Vec<Value> {
    let o = ok(gate, "test-hostile", json!({"mode": "probe", "ops": ops})).await;
    o.data["results"].as_array().unwrap().clone()
}

fn entries(r: &Value) -> Vec<String> {
    r["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("not read: {r}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn only_plain_files_the_tool_could_read_are_read_ahead() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("outside-secret.txt"), "OUTSIDE").unwrap();
    ws.write(".env", "SECRET=1")
        .write(".gitignore", "*.log\n")
        .write("a.txt", "alpha")
        .write("big.txt", "x".repeat(100))
        .write("debug.log", "ignored")
        .write("src/lib.rs", "// lib")
        .write("src/.ssh/id_ed25519", "KEY")
        .write("certs/server.pem", "PEM")
        .write("node_modules/m/i.js", "nm")
        .write(".toolgate/outputs/call-1.txt", "saved");
    std::os::unix::fs::symlink(
        outside.path().join("outside-secret.txt"),
        ws.path("leak.txt"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path("out")).unwrap();
    std::os::unix::fs::symlink("a.txt", ws.path("alias.txt")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(ws.path("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let gate = ws.gate(false).await;

    let started = Instant::now();
    let r = read_ahead(
        &gate,
        vec![
            json!({"op": "read-ahead", "path": "/workspace"}),
            json!({"op": "read-ahead", "path": "/workspace", "target": "*.rs"}),
            json!({"op": "read-ahead", "path": "/workspace", "target": "src/*"}),
        ],
    )
    .await;
    // Symlinks (in or out) and the FIFO are left to the tool, unread, and nothing hangs.
    // Secrets, ignored files, default ignores and the state directory are not there at all.
    assert_eq!(
        entries(&r[0]),
        [
            ".gitignore=bytes:*.log\n",
            "a.txt=bytes:alpha",
            "alias.txt=not-read",
            "big.txt=too-large:100",
            "leak.txt=not-read",
            "out=not-read",
            "pipe=not-read",
            "src/lib.rs=bytes:// lib",
        ]
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(entries(&r[1]), ["src/lib.rs=bytes:// lib"]);
    assert_eq!(entries(&r[2]), ["src/lib.rs=bytes:// lib"]);

    // grep gets the same answers as reading every file itself: a symlink to a file inside is
    // searched (through the guard), one leading out is not, the FIFO is skipped.
    let o = ok(
        &gate,
        "grep",
        json!({"pattern": "alpha|OUTSIDE|SECRET|KEY"}),
    )
    .await;
    assert_eq!(o.content, "a.txt:1:alpha\nalias.txt:1:alpha\n");
}

#[tokio::test]
async fn read_ahead_refuses_starts_outside_the_grant_and_a_second_reader() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("outside-secret.txt"), "x").unwrap();
    ws.write(".env", "SECRET=1")
        .write("src/lib.rs", "// lib")
        .write("src/.ssh/id_ed25519", "key")
        .write(".toolgate/outputs/call-1.txt", "saved");
    std::os::unix::fs::symlink(outside.path(), ws.path("out")).unwrap();
    let gate = ws.gate(false).await;
    let outside = outside.path().to_string_lossy().into_owned();
    let starts = [
        "/",
        "/etc",
        outside.as_str(),
        "workspace/src",
        "/workspace/..",
        "/workspace/src/../../etc",
        "/workspace/out",
        "/workspace/.toolgate/outputs",
        "/workspace/src/.ssh",
        "/workspace/.env",
    ];
    let ops = starts
        .iter()
        .map(|s| json!({"op": "read-ahead", "path": s}))
        .collect();
    let r = read_ahead(&gate, ops).await;
    for (start, result) in starts.iter().zip(&r) {
        assert_eq!(result["ok"], false, "{start}: {result}");
        let detail = result["detail"].as_str().unwrap();
        assert!(detail.contains(start), "{start}: {detail}");
        assert!(!detail.contains("outside-secret"), "{detail}");
    }
    // One reader per call at a time.
    let r = read_ahead(
        &gate,
        vec![json!({"op": "read-ahead-twice", "path": "/workspace"})],
    )
    .await;
    let detail = r[0]["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("second: refused: cannot read `/workspace` ahead: another reader")
            && detail.ends_with("after drop: opened"),
        "{detail}"
    );
}

#[tokio::test]
async fn a_guest_holding_a_reader_is_still_stopped_at_its_deadline() {
    let ws = Ws::new();
    for i in 0..200 {
        ws.write(&format!("d{}/f{i}.txt", i % 7), "x".repeat(10_000));
    }
    ws.write("probe.txt", "still here\n");
    let gate = ws.gate_with(false, tight_limits()).await;
    let started = Instant::now();
    let o = call(
        &gate,
        "test-hostile",
        json!({"mode": "probe", "ops": [{"op": "read-ahead-spin", "path": "/workspace"}]}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(code(&o), "limit", "{o:#?}");
    assert_eq!(o.data, json!({"limit": "timeout_ms"}));
    let o = ok(&gate, "read", json!({"path": "probe.txt"})).await;
    assert_eq!(o.content, "     1\tstill here\n");
    let o = ok(&gate, "grep", json!({"pattern": "still"})).await;
    assert_eq!(o.content, "probe.txt:1:still here\n");
}
