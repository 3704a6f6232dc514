//! `tools/call` over stdio runs beside rmcp's loop once the connection is initialized (issue
//! #15): each call answered under its own id whatever else is in flight, a cancelled call never
//! answered (and its id free for a new call), and calls still running when stdin ends answered
//! before the server exits.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(ws: &Ws, args: &[&str], policy: Option<&std::path::Path>) -> Self {
        let mut cmd = toolgate_command(ws);
        if let Some(p) = policy {
            cmd.arg("--policy").arg(p);
        }
        let mut child = cmd
            .arg("serve")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut s = Server {
            child,
            stdin,
            stdout,
        };
        s.send(
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},
            "clientInfo":{"name":"raw","version":"1"}}}),
        );
        assert!(s.next().get("result").is_some());
        s.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        // A round trip: the connection is initialized from here on.
        s.send(json!({"jsonrpc":"2.0","id":"warm","method":"ping"}));
        assert_eq!(s.next()["id"], "warm");
        s
    }

    fn send(&mut self, m: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{m}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line, or `Null` when the server closed stdout.
    fn line(&mut self) -> Value {
        let mut line = String::new();
        if self.stdout.read_line(&mut line).unwrap() == 0 {
            return Value::Null;
        }
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the server wrote a non-JSON line ({e}): {line}"))
    }

    /// The next answer (skipping notifications).
    fn next(&mut self) -> Value {
        loop {
            let v = self.line();
            assert!(!v.is_null(), "the server closed stdout");
            if v.get("result").is_some() || v.get("error").is_some() {
                return v;
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
    let mut s = Server::start(&ws, &[], None);
    for (i, id) in ids.iter().enumerate() {
        s.send(read_call(id.clone(), &format!("f{i}.txt")));
        if i == 10 {
            s.send(json!({"jsonrpc":"2.0","id":"p","method":"ping"}));
        }
    }
    let mut seen = std::collections::HashMap::new();
    for _ in 0..=ids.len() {
        let a = s.next();
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
    let mut s = Server::start(
        &ws,
        &["--component", hostile.to_str().unwrap()],
        Some(&policy),
    );
    s.send(json!({"jsonrpc":"2.0","id":40,"method":"tools/call",
        "params":{"name":"test-hostile","arguments":{"mode":"loop"}}}));
    s.send(read_call(json!(41), "last.txt"));
    std::thread::sleep(Duration::from_millis(200));
    drop(s.stdin.take());
    let mut answered = Vec::new();
    loop {
        let v = s.line();
        if v.is_null() {
            break;
        }
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
    let mut s = Server::start(&ws, &["--component", hostile.to_str().unwrap()], None);
    s.send(json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
        "params":{"name":"test-hostile","arguments":{"mode":"loop"}}}));
    std::thread::sleep(Duration::from_millis(300));
    let cancelled_at = Instant::now();
    s.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":7,"reason":"stop"}}));
    // The id, free again, names a new call: its answer is that call's.
    s.send(read_call(json!(7), "after.txt"));
    let a = s.next();
    assert_eq!(a["id"], 7, "{a}");
    assert!(content(&a).contains("after the cancel"), "{a}");
    // The looping call ends (interrupted) and says nothing: the next answer is the ping's.
    std::thread::sleep(Duration::from_millis(500));
    s.send(json!({"jsonrpc":"2.0","id":"after","method":"ping"}));
    let next = s.next();
    assert_eq!(
        next["id"], "after",
        "the cancelled call was answered: {next}"
    );
    // It stopped running long before its 30 s deadline: the audit says cancelled.
    let audit = loop {
        let out = toolgate_command(&ws)
            .args(["audit", "--json", "--tool", "test-hostile"])
            .output()
            .unwrap();
        let done = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["event"] == "completed");
        if let Some(e) = done {
            break e;
        }
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(15),
            "the cancelled call kept running"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(audit["detail"]["error_code"], "cancelled", "{audit}");
}
