//! The host read-ahead (`toolgate:search/read-ahead`, host/src/sandbox/read_ahead.rs): a
//! guest asking the host to read a directory's files ahead gets the bytes of only those plain
//! files it could read itself, everything else is left to it (where the filesystem guard
//! decides), and grep's results are those of reading every file itself.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::time::{Duration, Instant};

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
    let r = probe(
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

/// Starts outside the grant are refused as by the walk (walk.rs tests both).
#[tokio::test]
async fn one_reader_per_call_at_a_time() {
    let ws = Ws::new();
    ws.write("src/lib.rs", "// lib");
    let gate = ws.gate(false).await;
    let r = probe(
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
