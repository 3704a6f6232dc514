//! The state database: audit events and file history, as recorded by real calls.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use toolgate::state::AuditQuery;

fn events_of(gate: &toolgate::Gate, call_id: &str) -> Vec<toolgate::state::AuditEvent> {
    gate.state()
        .audit_events(&AuditQuery {
            call_id: Some(call_id.to_string()),
            ..Default::default()
        })
        .unwrap()
}

#[tokio::test]
async fn a_call_is_audited_as_intent_decision_started_completed() {
    let ws = Ws::new();
    let gate = ws.gate(true).await;
    let content = "0123456789".repeat(1000);
    let o = ok(
        &gate,
        "write",
        json!({"path": "big.txt", "content": content}),
    )
    .await;
    let events = events_of(&gate, &o.audit_id);
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["intent", "decision", "started", "completed"]);
    for e in &events {
        assert_eq!(
            (e.session.as_str(), e.tool.as_str(), e.call_id.as_str()),
            (SESSION, "write", o.audit_id.as_str())
        );
    }

    // The 10 kB content is stored as its size, hash and a redacted excerpt; the hash of the
    // whole input is kept so the call can still be matched.
    let full_input = json!({"path": "big.txt", "content": content});
    let content_sha = hex::encode(Sha256::digest(content.as_bytes()));
    assert_eq!(
        events[0].detail,
        json!({
            "input": {
                "path": "big.txt",
                "content": {"bytes": 10000, "sha256": content_sha, "excerpt": &content[..200]},
            },
            "input_sha256": hex::encode(Sha256::digest(full_input.to_string().as_bytes())),
        })
    );
    // The decision names the call's key (as `permission`), unredacted.
    let mut decision = events[1].detail.clone();
    let permission = decision
        .as_object_mut()
        .and_then(|d| d.remove("permission"))
        .expect("the decision event names the call's key");
    assert_eq!(permission, json!("write:./"));
    assert_eq!(
        decision,
        json!({"decision": "allow", "stage": "session-allowlist", "source": "--grant 'write'"})
    );
    assert_eq!(events[2].detail, json!({}));
    let mut completed = events[3].detail.clone();
    assert!(completed["duration_us"].as_u64().unwrap() > 0);
    completed["duration_us"] = json!("<duration>");
    assert_eq!(
        completed,
        json!({
            "status": "ok",
            "summary": "created big.txt (1 line, 10000 bytes)",
            "error_code": null,
            "duration_us": "<duration>",
            "truncated": false,
        })
    );
}

#[tokio::test]
async fn denied_and_refused_calls_are_audited_with_secrets_redacted() {
    let ws = Ws::new();
    ws.write(".env", "X=1\n");
    let gate = ws.gate(false).await;
    let o = call(&gate, "read", json!({"path": ".env"})).await;
    let events = events_of(&gate, &o.audit_id);
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["intent", "decision", "completed"]);
    assert_eq!(
        events[1].detail,
        json!({
            "decision": "deny", "stage": "scope", "source": "path `path`",
            "reason": "`.env` matches the secrets deny-list (`.env`)",
        })
    );
    assert_eq!(events[2].detail["status"], json!("denied"));

    // A key that looks like a credential never reaches the log, even in a rejected input.
    let o = call(
        &gate,
        "grep",
        json!({"pattern": "x", "token": "ghp_s3cr3t", "nested": {"Password": "hunter2"}}),
    )
    .await;
    assert_eq!(code(&o), "schema");
    let events = events_of(&gate, &o.audit_id);
    assert_eq!(
        events[0].detail["input"],
        json!({"pattern": "x", "token": "[redacted]", "nested": {"Password": "[redacted]"}})
    );
    let all = gate.state().audit_events(&AuditQuery::default()).unwrap();
    let dump: String = all.iter().map(|e| e.detail.to_string()).collect();
    assert!(
        !dump.contains("ghp_s3cr3t") && !dump.contains("hunter2"),
        "{dump}"
    );

    // Filtering by decision finds the denied call.
    let denied = gate
        .state()
        .audit_events(&AuditQuery {
            decision: Some("deny".into()),
            ..Default::default()
        })
        .unwrap();
    let tools: Vec<(&str, &str)> = denied
        .iter()
        .map(|e| (e.tool.as_str(), e.event.as_str()))
        .collect();
    assert_eq!(
        tools,
        [
            ("read", "intent"),
            ("read", "decision"),
            ("read", "completed")
        ]
    );
}

fn origins(gate: &toolgate::Gate, ws: &Ws, rel: &str) -> Vec<(String, Option<String>)> {
    gate.state()
        .history(&ws.path(rel))
        .unwrap()
        .into_iter()
        .map(|v| (v.origin, v.content.map(|c| String::from_utf8(c).unwrap())))
        .collect()
}

fn v(origin: &str, content: &str) -> (String, Option<String>) {
    (origin.to_string(), Some(content.to_string()))
}

#[tokio::test]
async fn history_keeps_original_tool_and_external_versions() {
    let ws = Ws::new();
    ws.write("a.txt", "original\n");
    let gate = ws.gate(true).await;
    read_first(&gate, "a.txt").await;
    let w = ok(
        &gate,
        "write",
        json!({"path": "a.txt", "content": "by tool\n"}),
    )
    .await;
    ws.write("a.txt", "by user\n");
    read_first(&gate, "a.txt").await;
    let e = ok(
        &gate,
        "edit",
        json!({"path": "a.txt", "old_string": "user", "new_string": "tool again"}),
    )
    .await;
    assert_eq!(ws.read("a.txt"), "by tool again\n");
    assert_eq!(
        origins(&gate, &ws, "a.txt"),
        [
            v("original", "original\n"),
            v("tool", "by tool\n"),
            v("external", "by user\n"),
            v("tool", "by tool again\n"),
        ]
    );
    let history = gate.state().history(&ws.path("a.txt")).unwrap();
    let calls: Vec<Option<&str>> = history.iter().map(|v| v.call_id.as_deref()).collect();
    assert_eq!(
        calls,
        [
            Some(w.audit_id.as_str()),
            Some(w.audit_id.as_str()),
            Some(e.audit_id.as_str()),
            Some(e.audit_id.as_str())
        ]
    );
    let sha = hex::encode(Sha256::digest(b"by tool again\n"));
    assert_eq!(history[3].sha256, sha);
}

#[tokio::test]
async fn history_of_a_new_file_starts_absent() {
    let ws = Ws::new();
    let gate = ws.gate(true).await;
    ok(&gate, "write", json!({"path": "n.txt", "content": "v1\n"})).await;
    ws.write("n.txt", "v1 edited by the user\n");
    read_first(&gate, "n.txt").await;
    ok(
        &gate,
        "edit",
        json!({"path": "n.txt", "old_string": " edited by the user", "new_string": ""}),
    )
    .await;
    assert_eq!(
        origins(&gate, &ws, "n.txt"),
        [
            v("absent", ""),
            v("tool", "v1\n"),
            v("external", "v1 edited by the user\n"),
            v("tool", "v1\n")
        ]
    );
    // A failed write records nothing new.
    let o = call(
        &gate,
        "edit",
        json!({"path": "n.txt", "old_string": "nope", "new_string": "x"}),
    )
    .await;
    assert_eq!(code(&o), "no-match");
    assert_eq!(origins(&gate, &ws, "n.txt").len(), 4);
    let last = gate
        .state()
        .last_read(SESSION, &ws.path("n.txt"))
        .unwrap()
        .unwrap();
    assert_eq!(last.sha256, hex::encode(Sha256::digest(b"v1\n")));
    let _: Value = json!(null);
}

/// Two processes sharing a session (an MCP server and a `toolgate call`, say) see each other's
/// read records: a newer read and a `session forget` by one reach the other once written.
#[test]
fn read_records_are_shared_between_processes_once_written() {
    use toolgate::state::{FileStamp, StateDb};
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let db_path = ws.path("state.db");
    let server = StateDb::open(&db_path).unwrap();
    let cli = StateDb::open(&db_path).unwrap();
    let file = ws.path("a.txt");
    let (first, _) = FileStamp::of(&file).unwrap();
    server.record_read("s", &file, &first).unwrap();
    // This process sees its own record at once.
    assert_eq!(server.last_read("s", &file).unwrap(), Some(first.clone()));
    server.flush_audit();
    assert_eq!(cli.last_read("s", &file).unwrap(), Some(first));

    // The other process reads a newer version: the server sees that one, not its own.
    ws.write("a.txt", "two\n");
    let (second, _) = FileStamp::of(&file).unwrap();
    cli.record_read("s", &file, &second).unwrap();
    cli.flush_audit();
    assert_eq!(server.last_read("s", &file).unwrap(), Some(second));

    // `session forget` in the other process is seen by the server.
    cli.forget_session("s").unwrap();
    assert_eq!(server.last_read("s", &file).unwrap(), None);
}

/// A read record goes to the database with its call's audit events (one transaction), and one
/// made without any audit after it is still written when the database closes.
#[test]
fn read_records_travel_with_the_audit_and_are_never_lost_at_close() {
    use serde_json::json;
    use toolgate::state::{FileStamp, StateDb};
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    ws.write("b.txt", "two\n");
    let db_path = ws.path("state.db");
    let (a, b) = (ws.path("a.txt"), ws.path("b.txt"));
    let (stamp_a, _) = FileStamp::of(&a).unwrap();
    let (stamp_b, _) = FileStamp::of(&b).unwrap();
    let other = StateDb::open(&db_path).unwrap();
    {
        let db = StateDb::open(&db_path).unwrap();
        db.record_read("s", &a, &stamp_a).unwrap();
        db.audit("c1", "s", "read", &[("completed", json!({"status": "ok"}))])
            .unwrap();
        db.flush_audit();
        assert_eq!(other.last_read("s", &a).unwrap(), Some(stamp_a));
        let events = other
            .audit_events(&toolgate::state::AuditQuery {
                call_id: Some("c1".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(events.len(), 1);
        // No audit and no flush after this one: closing the database writes it.
        db.record_read("s", &b, &stamp_b).unwrap();
    }
    assert_eq!(other.last_read("s", &b).unwrap(), Some(stamp_b));
}

/// A server whose conversations continue on other processes (stateless HTTP) shares a read
/// before the call that made it answers: once `reads_shared` returns, another process sees
/// the read, with no flush of its own and no waiting.
#[tokio::test]
async fn a_shared_read_is_committed_before_its_call_answers() {
    use serde_json::json;
    use toolgate::state::{FileStamp, StateDb};
    let ws = Ws::new();
    let db_path = ws.path("state.db");
    let server = StateDb::open(&db_path).unwrap();
    server.share_reads_at_once();
    let other = StateDb::open(&db_path).unwrap();
    for i in 0..50 {
        let name = format!("f{i}.txt");
        ws.write(&name, format!("{i}\n"));
        let file = ws.path(&name);
        let (stamp, _) = FileStamp::of(&file).unwrap();
        server.record_read("s", &file, &stamp).unwrap();
        server
            .audit(&format!("c{i}"), "s", "read", &[("completed", json!({}))])
            .unwrap();
        server.reads_shared("s");
        assert_eq!(
            other.last_read("s", &file).unwrap(),
            Some(stamp),
            "read {i} was answered before another process could see it"
        );
    }
}

/// The sharing server's read is stored twice (at once, then with its call's audit batch); the
/// second copy comes after another process stored a newer read of the same file in the same
/// conversation, and must not take that newer read's place.
#[tokio::test]
async fn a_late_copy_of_a_read_never_replaces_a_newer_one() {
    use toolgate::state::{FileStamp, StateDb};
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let db_path = ws.path("state.db");
    let server = StateDb::open(&db_path).unwrap();
    server.share_reads_at_once();
    let other = StateDb::open(&db_path).unwrap();
    let file = ws.path("a.txt");
    let (first, _) = FileStamp::of(&file).unwrap();
    server.record_read("s", &file, &first).unwrap();
    server.reads_shared("s");
    assert_eq!(other.last_read("s", &file).unwrap(), Some(first));

    std::thread::sleep(std::time::Duration::from_millis(5));
    ws.write("a.txt", "two, longer\n");
    let (second, _) = FileStamp::of(&file).unwrap();
    other.record_read("s", &file, &second).unwrap();
    other.flush_audit();
    // The server's writer now stores its own (older) copy of the first read.
    server.flush_audit();
    let fresh = StateDb::open(&db_path).unwrap();
    assert_eq!(fresh.last_read("s", &file).unwrap(), Some(second.clone()));
    assert_eq!(server.last_read("s", &file).unwrap(), Some(second));
}
