//! `tools/call` over stdio runs beside rmcp's loop once the connection is initialized (issue
//! #15): each call answered under its own id whatever else is in flight, a cancelled call never
//! answered (and its id free for a new call), and calls still running when stdin ends answered
//! before the server exits.

use crate::common::*;
use crate::raw_stdio::RawStdio;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn read_call(id: Value, path: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
        "params":{"name":"read","arguments":{"path":path}}})
}

/// The text a `read` answer carries.
fn content(answer: &Value) -> String {
    answer["result"]["structuredContent"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("not a read's answer: {answer}"))
        .to_string()
}

#[test]
fn calls_sent_together_are_each_answered_under_their_own_id() {
    let ws = Ws::new();
    let mut ids = Vec::new();
    for i in 0..24 {
        ws.write(&format!("f{i}.txt"), format!("file number {i}\n"));
        // Numbers and strings, and a string that looks like a number.
        ids.push(match i % 3 {
            0 => json!(i),
            1 => json!(format!("{i}")),
            _ => json!(format!("call-{i}")),
        });
    }
    let mut s = RawStdio::start(&ws, &[]);
    for (i, id) in ids.iter().enumerate() {
        s.send(read_call(id.clone(), &format!("f{i}.txt")));
        if i == 10 {
            s.send(json!({"jsonrpc":"2.0","id":"p","method":"ping"}));
        }
    }
    let mut seen = std::collections::HashMap::new();
    for _ in 0..=ids.len() {
        let a = s.next_response();
        let key = a["id"].to_string();
        assert!(seen.insert(key, a.clone()).is_none(), "answered twice: {a}");
    }
    assert_eq!(seen[&json!("p").to_string()]["result"], json!({}));
    for (i, id) in ids.iter().enumerate() {
        let a = &seen[&id.to_string()];
        assert_eq!(a["id"], *id, "the id comes back as sent: {a}");
        assert!(
            content(a).contains(&format!("file number {i}\n")),
            "the answer to {id} is another call's: {a}"
        );
    }
}

#[test]
fn a_call_running_when_stdin_closes_is_still_answered() {
    let ws = Ws::new();
    ws.write("last.txt", "the last word\n");
    // A guest that loops until its deadline: still running when stdin ends.
    let policy = tempfile::tempdir().unwrap();
    let policy = policy.path().join("policy.toml");
    std::fs::write(&policy, "[limits]\ntimeout_ms = 1500\n").unwrap();
    let hostile = hostile_component();
    let mut s = RawStdio::start(
        &ws,
        &[
            "--component",
            hostile.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    s.send(json!({"jsonrpc":"2.0","id":40,"method":"tools/call",
        "params":{"name":"test-hostile","arguments":{"mode":"loop"}}}));
    s.send(read_call(json!(41), "last.txt"));
    std::thread::sleep(Duration::from_millis(200));
    drop(s.stdin.take());
    let mut answered = Vec::new();
    while let Some(v) = s.line() {
        match v["id"].as_i64() {
            Some(41) => assert!(content(&v).contains("the last word"), "{v}"),
            Some(40) => assert_eq!(
                v["result"]["structuredContent"]["status"], "error",
                "the loop ends at its deadline: {v}"
            ),
            _ => continue,
        }
        answered.push(v["id"].clone());
    }
    answered.sort_by_key(|v| v.as_i64());
    assert_eq!(
        answered,
        vec![json!(40), json!(41)],
        "every call is answered before the server exits"
    );
}

#[test]
fn a_cancelled_call_is_not_answered_and_its_id_serves_a_new_call() {
    let ws = Ws::new();
    ws.write("after.txt", "after the cancel\n");
    let hostile = hostile_component();
    let mut s = RawStdio::start(&ws, &["--component", hostile.to_str().unwrap()]);
    s.send(json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
        "params":{"name":"test-hostile","arguments":{"mode":"loop"}}}));
    std::thread::sleep(Duration::from_millis(300));
    let cancelled_at = Instant::now();
    s.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":7,"reason":"stop"}}));
    // The id, free again, names a new call: its answer is that call's.
    s.send(read_call(json!(7), "after.txt"));
    let a = s.next_response();
    assert_eq!(a["id"], 7, "{a}");
    assert!(content(&a).contains("after the cancel"), "{a}");
    // The looping call ends (interrupted) and says nothing: the next answer is the ping's.
    std::thread::sleep(Duration::from_millis(500));
    s.send(json!({"jsonrpc":"2.0","id":"after","method":"ping"}));
    let next = s.next_response();
    assert_eq!(
        next["id"], "after",
        "the cancelled call was answered: {next}"
    );
    // It stopped running long before its 30 s deadline: the audit says cancelled.
    let audit = hostile_completed(&ws, cancelled_at);
    assert_eq!(audit["detail"]["error_code"], "cancelled", "{audit}");
}
