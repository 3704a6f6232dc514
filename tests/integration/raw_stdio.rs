//! A raw JSON-RPC client of `toolgate serve` over stdio: the test writes exactly the lines it
//! means and reads every line the server writes.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

pub struct RawStdio {
    child: Child,
    /// Taken to write from another thread, or to end the input.
    pub stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl RawStdio {
    /// `toolgate serve` over `ws` with `args`, initialized: a ping has been answered after
    /// `notifications/initialized`, so the connection counts as initialized.
    pub fn start(ws: &Ws, args: &[&str]) -> Self {
        let mut child = spawn_serve(ws, args);
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut raw = RawStdio {
            child,
            stdin,
            stdout,
        };
        raw.send(
            json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},
            "clientInfo":{"name":"raw","version":"1"}}}),
        );
        assert!(raw.answer_to(&json!("init")).get("result").is_some());
        raw.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        raw.send(json!({"jsonrpc":"2.0","id":"warm","method":"ping"}));
        raw.answer_to(&json!("warm"));
        raw
    }

    /// Write `line` and a newline.
    pub fn send(&mut self, line: impl std::fmt::Display) {
        let stdin = self.stdin.as_mut().expect("stdin was taken");
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line the server wrote; `None` once it closed stdout.
    pub fn line(&mut self) -> Option<Value> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        Some(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the server wrote a non-JSON line ({e}): {line}")),
        )
    }

    /// The next message that is a response (has `result` or `error`), skipping notifications.
    pub fn next_response(&mut self) -> Value {
        loop {
            let v = self.line().expect("the server closed stdout");
            if v.get("result").is_some() || v.get("error").is_some() {
                return v;
            }
        }
    }

    /// The response with `id`; any other response in between fails the test.
    pub fn answer_to(&mut self, id: &Value) -> Value {
        let v = self.next_response();
        assert_eq!(&v["id"], id, "expected the answer to {id}, got {v}");
        v
    }
}

/// `toolgate serve` over `ws` with `args`, its stdin and stdout piped, stderr dropped.
pub fn spawn_serve(ws: &Ws, args: &[&str]) -> Child {
    toolgate_command(ws)
        .arg("serve")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
