//! Attacks on untrusted workspaces (issue #13): host_stall. A workspace name that is a FIFO, a
//! socket or a huge sparse file must not hang a call or grow the host's memory: every host-side
//! open of a workspace file is non-blocking, regular files only, and stamps stream.
//!
//! Character devices cannot be planted without privilege (`mknod`), and a symlink to
//! `/dev/zero` is refused by scope (it leaves the workspace); a unix socket stands in for "not
//! a regular file" besides the FIFO.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;
use std::time::Duration;
use toolgate::policy::PolicySource;
use toolgate::{Gate, GateOptions, Observation, Status};

/// Longer than any of these calls needs, short enough that a call that would hang forever
/// fails the test instead.
const ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// What the host may use for one CLI call on a 2 GiB file, whatever the file's size (the guest's
/// memory is capped at 64 MiB by the policy; a debug host with a warm cache uses ~70 MB).
const MAX_HOST_RSS_KB: i64 = 400 << 10;

fn mkfifo(path: &Path) {
    use rustix::fs::{FileType, Mode, CWD};
    rustix::fs::mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
}

async fn call_within(gate: &Gate, tool: &str, input: Value) -> Observation {
    tokio::time::timeout(ANSWER_WITHIN, call(gate, tool, input))
        .await
        .unwrap_or_else(|_| panic!("`{tool}` did not answer within {ANSWER_WITHIN:?}"))
}

fn assert_not_regular(o: &Observation, rel: &str, what: &str) {
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(o), "not-a-regular-file", "{o:#?}");
    let reason = o.reason.as_deref().unwrap_or("");
    assert!(
        reason.contains(rel) && reason.contains(what) && reason.contains("only handle regular"),
        "{reason}"
    );
}

/// The write tools' inputs that change `rel`.
fn writes_of(rel: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("write", json!({"path": rel, "content": "x\n"})),
        (
            "edit",
            json!({"path": rel, "old_string": "a", "new_string": "b"}),
        ),
        (
            "multiedit",
            json!({"path": rel, "edits": [{"old_string": "a", "new_string": "b"}]}),
        ),
    ]
}

#[tokio::test]
async fn write_edit_and_multiedit_of_a_fifo_are_refused_quickly() {
    let ws = Ws::new();
    mkfifo(&ws.path("pipe"));
    let gate = ws.gate(true).await;
    for (tool, input) in writes_of("pipe") {
        let o = call_within(&gate, tool, input).await;
        assert_not_regular(&o, "pipe", "a FIFO");
    }
    // Nothing replaced it.
    let meta = std::fs::symlink_metadata(ws.path("pipe")).unwrap();
    assert!(meta.file_type().is_fifo());
    assert_eq!(gate.state().history(&ws.path("pipe")).unwrap(), vec![]);
}

#[tokio::test]
async fn read_of_a_fifo_is_refused_quickly() {
    let ws = Ws::new();
    mkfifo(&ws.path("pipe"));
    let gate = ws.gate(false).await;
    let o = call_within(&gate, "read", json!({"path": "pipe"})).await;
    assert_not_regular(&o, "pipe", "a FIFO");
}

#[tokio::test]
async fn a_fifo_does_not_hold_up_other_calls() {
    // Four such calls froze `serve --http` for every client: now they answer, concurrently,
    // and a plain call next to them too.
    let ws = Ws::new();
    mkfifo(&ws.path("pipe"));
    ws.write("a.txt", "a\n");
    let gate = ws.gate(true).await;
    let stall = || call(&gate, "write", json!({"path": "pipe", "content": "x"}));
    let all = async {
        tokio::join!(
            stall(),
            stall(),
            stall(),
            stall(),
            call(&gate, "read", json!({"path": "a.txt"}))
        )
    };
    let (a, b, c, d, plain) = tokio::time::timeout(ANSWER_WITHIN, all)
        .await
        .expect("calls on a FIFO held the gate");
    for o in [&a, &b, &c, &d] {
        assert_eq!(code(o), "not-a-regular-file", "{o:#?}");
    }
    assert_eq!(plain.status, Status::Ok, "{plain:#?}");
}

#[tokio::test]
async fn a_socket_is_not_a_regular_file_for_read_or_write() {
    let ws = Ws::new();
    let _listener = std::os::unix::net::UnixListener::bind(ws.path("sock")).unwrap();
    let gate = ws.gate(true).await;
    let o = call_within(&gate, "read", json!({"path": "sock"})).await;
    assert_not_regular(&o, "sock", "a socket");
    for (tool, input) in writes_of("sock") {
        let o = call_within(&gate, tool, input).await;
        assert_not_regular(&o, "sock", "a socket");
    }
    assert!(std::fs::symlink_metadata(ws.path("sock"))
        .unwrap()
        .file_type()
        .is_socket());
}

#[test]
fn atomic_write_over_a_fifo_replaces_nothing() {
    // The host's own atomic writes (grants, saved outputs, plugins) rename over their target:
    // a FIFO or socket planted there is refused and left as it is.
    let ws = Ws::new();
    mkfifo(&ws.path("pipe"));
    let e = toolgate::fsutil::write_atomic(&ws.path("pipe"), b"x").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("a FIFO"), "{e}");
    assert!(std::fs::symlink_metadata(ws.path("pipe"))
        .unwrap()
        .file_type()
        .is_fifo());
    // A regular file is still replaced.
    ws.write("f", "old");
    toolgate::fsutil::write_atomic(&ws.path("f"), b"new").unwrap();
    assert_eq!(ws.read("f"), "new");
}

#[test]
fn host_open_refuses_a_last_component_symlink_and_names_what_is_there() {
    // Scope resolves symlinks before the host opens anything; one that appears after that
    // check is not followed (O_NOFOLLOW).
    use toolgate::fsutil::{open_regular, OpenError};
    let ws = Ws::new();
    ws.write("real.txt", "r\n");
    std::os::unix::fs::symlink("real.txt", ws.path("link")).unwrap();
    mkfifo(&ws.path("pipe"));
    ws.mkdir("dir");
    let kind = |rel: &str| match open_regular(&ws.path(rel)) {
        Err(OpenError::NotRegular { kind, .. }) => kind.to_string(),
        Err(e) => format!("io: {e}"),
        Ok(_) => "opened".to_string(),
    };
    assert_eq!(
        [kind("real.txt"), kind("link"), kind("pipe"), kind("dir")],
        [
            "opened".to_string(),
            "a symbolic link".to_string(),
            "a FIFO (named pipe)".to_string(),
            "a directory".to_string()
        ]
    );
    let e = open_regular(&ws.path("pipe")).unwrap_err();
    assert_eq!(e.code(), "not-a-regular-file");
}

/// A policy outside the workspace: small stamps, a 64 MiB guest, writes allowed.
fn policy_file(dir: &Path, stamp_bytes: u64) -> std::path::PathBuf {
    let p = dir.join("policy.toml");
    std::fs::write(
        &p,
        format!("mode = \"allow-all\"\n\n[limits]\nmemory_mb = 64\nstamp_bytes = {stamp_bytes}\n"),
    )
    .unwrap();
    p
}

/// A 2 GiB sparse file whose head is text lines (so `read` shows it instead of calling it
/// binary) and whose rest is a hole.
fn plant_big(ws: &Ws, rel: &str) {
    let head: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    ws.write(rel, head);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(ws.path(rel))
        .unwrap();
    f.set_len(2 << 30).unwrap();
}

#[test]
fn read_of_a_2gb_sparse_file_keeps_host_memory_bounded() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    let policy = policy_file(outside.path(), 64 << 20);
    plant_big(&ws, "big");
    let (o, rss, _) = cli_peak_rss(&ws, &policy, &["call", "read", r#"{"path":"big"}"#]);
    assert_eq!(o["status"], "ok", "{o:#}");
    assert!(
        rss < MAX_HOST_RSS_KB,
        "host peak RSS {rss} KiB reading a 2 GiB file"
    );
    // Fully sparse: the guest answers `binary` from the head; the host stamps nothing.
    let f = std::fs::File::create(ws.path("zeros")).unwrap();
    f.set_len(2 << 30).unwrap();
    let (o, rss, _) = cli_peak_rss(&ws, &policy, &["call", "read", r#"{"path":"zeros"}"#]);
    assert_eq!(o["error_code"], "binary", "{o:#}");
    assert!(rss < MAX_HOST_RSS_KB, "host peak RSS {rss} KiB");
}

#[test]
fn edit_of_a_2gb_sparse_file_keeps_host_memory_bounded() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    let policy = policy_file(outside.path(), 64 << 20);
    plant_big(&ws, "big");
    let (o, _, _) = cli_peak_rss(&ws, &policy, &["call", "read", r#"{"path":"big"}"#]);
    assert_eq!(o["status"], "ok", "{o:#}");
    // The read record holds, so the edit reaches the guest: it cannot load 2 GiB in its 64 MiB
    // and fails, the host stays small (stamps and history over stamp_bytes are metadata).
    let (o, rss, _) = cli_peak_rss(
        &ws,
        &policy,
        &[
            "call",
            "edit",
            r#"{"path":"big","old_string":"line 7\n","new_string":"line seven\n"}"#,
        ],
    );
    assert_ne!(o["error_code"], "not-read", "{o:#}");
    assert_ne!(o["error_code"], "stale", "{o:#}");
    assert!(
        rss < MAX_HOST_RSS_KB,
        "host peak RSS {rss} KiB editing a 2 GiB file: {o:#}"
    );
    assert_eq!(std::fs::metadata(ws.path("big")).unwrap().len(), 2 << 30);
}

#[tokio::test]
async fn history_of_a_file_over_stamp_bytes_keeps_only_its_stamp() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    let policy = policy_file(outside.path(), 1024);
    let big: String = (0..500).map(|i| format!("row {i}\n")).collect();
    assert!(big.len() > 1024);
    ws.write("big.txt", &big);
    ws.write("small.txt", "small\n");
    let gate = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        policy: Some(PolicySource::File(policy)),
        ..Default::default()
    })
    .await
    .unwrap();
    for rel in ["big.txt", "small.txt"] {
        read_first(&gate, rel).await;
    }
    ok(
        &gate,
        "edit",
        json!({"path": "big.txt", "old_string": "row 7\n", "new_string": "row seven\n"}),
    )
    .await;
    ok(
        &gate,
        "edit",
        json!({"path": "small.txt", "old_string": "small", "new_string": "still small"}),
    )
    .await;
    assert!(ws.read("big.txt").contains("row seven\n"));

    let history = gate.state().history(&ws.path("big.txt")).unwrap();
    // (origin, content, metadata stamp?, note)
    type Seen<'a> = (&'a str, Option<&'a [u8]>, bool, Option<&'a str>);
    let seen: Vec<Seen> = history
        .iter()
        .map(|v| {
            (
                v.origin.as_str(),
                v.content.as_deref(),
                v.sha256.starts_with("meta:"),
                v.content_note(),
            )
        })
        .collect();
    let note =
        Some("content not kept: over stamp_bytes (stamped by size, mtime and inode, not hashed)");
    assert_eq!(
        seen,
        [("original", None, true, note), ("tool", None, true, note)]
    );
    assert_eq!(history[1].size, ws.bytes("big.txt").len() as i64);
    let small = gate.state().history(&ws.path("small.txt")).unwrap();
    let kept: Vec<Option<&[u8]>> = small.iter().map(|v| v.content.as_deref()).collect();
    assert_eq!(kept, [Some(&b"small\n"[..]), Some(&b"still small\n"[..])]);

    // Staleness still holds over stamp_bytes: a change by someone else is noticed.
    ws.write("big.txt", format!("{big}more\n"));
    let o = call(
        &gate,
        "edit",
        json!({"path": "big.txt", "old_string": "row 8\n", "new_string": "row eight\n"}),
    )
    .await;
    assert_eq!(code(&o), "stale", "{o:#?}");
}
