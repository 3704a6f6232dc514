//! `tools/call` on an initialized 2025-11-25 HTTP session runs beside rmcp's session worker
//! (issue #15): answered as JSON under its own id; a call that asks for progress still gets
//! rmcp's stream; `notifications/cancelled` and a client hanging up both stop such a call,
//! whether it ran in its request's task (a quiet server) or in a task of its own (under load).

use crate::common::*;
use crate::mcp::{http_server, HttpServer};
use serde_json::{json, Value};
use std::io::{BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One keep-alive connection speaking raw HTTP/1.1 to the server.
struct Raw {
    stream: BufReader<TcpStream>,
    port: u16,
    token: String,
}

/// An answer: status line, lower-cased headers, body.
struct Answer {
    status: String,
    headers: Vec<String>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find_map(|h| h.strip_prefix(&format!("{name}: ")))
    }

    /// The JSON-RPC message with `id`, from a JSON body or an SSE stream.
    fn message(&self, id: &Value) -> Value {
        if self.body.trim_start().starts_with('{') {
            return serde_json::from_str(&self.body).unwrap();
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id") == Some(id))
            .unwrap_or_else(|| panic!("no answer with id {id} in {}", self.body))
    }
}

impl Raw {
    fn connect(server: &HttpServer) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Raw {
            stream: BufReader::new(stream),
            port: server.port,
            token: server.token.clone(),
        }
    }

    fn send(&mut self, session: Option<&str>, message: &Value) {
        let body = message.to_string();
        let session = session
            .map(|s| format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n"))
            .unwrap_or_default();
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n{body}",
            self.port,
            self.token,
            body.len()
        );
        self.stream.get_mut().write_all(req.as_bytes()).unwrap();
    }

    fn answer(&mut self) -> Answer {
        let (status, headers, body) = crate::raw_http::read_response(&mut self.stream);
        Answer {
            status,
            headers,
            body: String::from_utf8(body).unwrap(),
        }
    }

    fn post(&mut self, session: Option<&str>, message: &Value) -> Answer {
        self.send(session, message);
        self.answer()
    }

    /// `initialize` (no elicitation) and `notifications/initialized`: the session id.
    fn open_session(&mut self) -> String {
        let a = self.post(
            None,
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-11-25","capabilities":{},
                "clientInfo":{"name":"raw","version":"1"}}}),
        );
        assert!(a.status.contains(" 200 "), "{}: {}", a.status, a.body);
        let session = a.header("mcp-session-id").unwrap().trim().to_string();
        let n = self.post(
            Some(&session),
            &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        );
        assert!(n.status.contains(" 202 "), "{}: {}", n.status, n.body);
        session
    }
}

fn read_call(id: Value, path: &str, meta: Option<Value>) -> Value {
    let mut params = json!({"name":"read","arguments":{"path":path}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":params})
}

/// How busy the server is when the call under test comes: a call is run in its request's
/// own task while the server is quiet, in a task of its own under load.
#[derive(Clone, Copy, Debug)]
enum Load {
    /// No other request for longer than the server's quiet window (50 ms).
    Alone,
    /// Another session's call is being handled at the same time.
    Crowd,
}

/// A server with the hostile test component, a session, and a call of it (`id`) that loops
/// until its 30 s deadline, running for 400 ms already; under `Crowd`, with another
/// session's looping call in flight too (its connection is returned to keep it so).
fn looping_call(ws: &Ws, id: Value, load: Load) -> (HttpServer, Raw, String, Option<Raw>) {
    let hostile = hostile_component();
    let server = http_server(ws, &["--component", hostile.to_str().unwrap()]);
    let mut c = Raw::connect(&server);
    let session = c.open_session();
    let crowd = match load {
        Load::Alone => {
            std::thread::sleep(Duration::from_millis(120));
            None
        }
        Load::Crowd => {
            let mut other = Raw::connect(&server);
            let theirs = other.open_session();
            other.send(
                Some(&theirs),
                &json!({"jsonrpc":"2.0","id":"crowd","method":"tools/call",
                    "params":{"name":"test-hostile","arguments":{"mode":"loop"}}}),
            );
            std::thread::sleep(Duration::from_millis(200));
            Some(other)
        }
    };
    c.send(
        Some(&session),
        &json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"test-hostile","arguments":{"mode":"loop"}}}),
    );
    std::thread::sleep(Duration::from_millis(400));
    (server, c, session, crowd)
}

#[test]
fn a_call_on_an_initialized_session_is_answered_as_json_under_its_id() {
    let ws = Ws::new();
    ws.write("a.txt", "alpha file\n");
    ws.write("b.txt", "beta file\n");
    let server = http_server(&ws, &[]);
    let mut c = Raw::connect(&server);
    let session = c.open_session();
    for (id, path, word) in [(json!(5), "a.txt", "alpha"), (json!("5"), "b.txt", "beta")] {
        let a = c.post(Some(&session), &read_call(id.clone(), path, None));
        assert!(a.status.contains(" 200 "), "{}: {}", a.status, a.body);
        assert_eq!(
            a.header("content-type"),
            Some("application/json"),
            "{:?}",
            a.headers
        );
        let m = a.message(&id);
        assert_eq!(m["id"], id, "{m}");
        let content = m["result"]["structuredContent"]["content"]
            .as_str()
            .unwrap();
        assert!(content.contains(&format!("{word} file")), "{m}");
    }
    // A call that asks for progress is rmcp's: its answer comes on an SSE stream.
    let a = c.post(
        Some(&session),
        &read_call(json!(6), "a.txt", Some(json!({"progressToken":"p6"}))),
    );
    assert_eq!(a.header("content-type"), Some("text/event-stream"));
    assert!(
        a.message(&json!(6))["result"]["structuredContent"]["content"]
            .as_str()
            .unwrap()
            .contains("alpha file")
    );
    // Another token's client, or no session at all, gets nothing from this session.
    let mut stranger = Raw::connect(&server);
    stranger.token = "0".repeat(64);
    let a = stranger.post(Some(&session), &read_call(json!(7), "a.txt", None));
    assert!(a.status.contains(" 401 "), "{}", a.status);
    let a = c.post(
        Some("00000000000000000000000000000000"),
        &read_call(json!(8), "a.txt", None),
    );
    assert!(a.status.contains(" 404 "), "{}", a.status);
    // A session ended with DELETE serves no more calls.
    let del = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nMcp-Session-Id: {session}\r\nContent-Length: 0\r\n\r\n",
        server.port, server.token
    );
    c.stream.get_mut().write_all(del.as_bytes()).unwrap();
    assert!(c.answer().status.contains(" 204 "));
    let a = c.post(Some(&session), &read_call(json!(9), "a.txt", None));
    assert!(a.status.contains(" 404 "), "{}: {}", a.status, a.body);
}

#[test]
fn cancelling_a_call_on_a_session_stops_it() {
    for load in [Load::Alone, Load::Crowd] {
        cancel_stops_the_call(load);
    }
}

fn cancel_stops_the_call(load: Load) {
    let ws = Ws::new();
    let (server, mut c, session, _crowd) = looping_call(&ws, json!("loop"), load);
    // Another session (same token) naming the same id cancels nothing of this session's.
    let mut stranger = Raw::connect(&server);
    let theirs = stranger.open_session();
    let n = stranger.post(
        Some(&theirs),
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled",
            "params":{"requestId":"loop","reason":"not yours"}}),
    );
    assert!(n.status.contains(" 202 "), "{}: {}", n.status, n.body);
    c.stream
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let mut byte = [0u8; 1];
    let early = c.stream.get_mut().read(&mut byte);
    assert!(
        early.is_err(),
        "{load:?}: another session's cancellation ended this session's call: {early:?}"
    );
    c.stream
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let cancelled_at = Instant::now();
    let mut other = Raw::connect(&server);
    let n = other.post(
        Some(&session),
        &json!({"jsonrpc":"2.0","method":"notifications/cancelled",
            "params":{"requestId":"loop","reason":"stop"}}),
    );
    assert!(n.status.contains(" 202 "), "{}: {}", n.status, n.body);
    let a = c.answer();
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(10),
        "{load:?}: the cancelled call ran on"
    );
    let m = a.message(&json!("loop"));
    assert_eq!(
        m["result"]["structuredContent"]["error_code"], "cancelled",
        "{m}"
    );
    let audit = hostile_completed(&ws, cancelled_at);
    assert_eq!(
        audit["detail"]["error_code"], "cancelled",
        "{load:?}: {audit}"
    );
    // The session serves the next call.
    ws.write("next.txt", "next call\n");
    let a = c.post(Some(&session), &read_call(json!(2), "next.txt", None));
    assert!(
        a.message(&json!(2))["result"]["structuredContent"]["content"]
            .as_str()
            .unwrap()
            .contains("next call")
    );
}

#[test]
fn a_client_hanging_up_stops_its_call() {
    for load in [Load::Alone, Load::Crowd] {
        let ws = Ws::new();
        let (_server, c, _session, _crowd) = looping_call(&ws, json!(1), load);
        let gone_at = Instant::now();
        c.stream
            .get_ref()
            .shutdown(std::net::Shutdown::Both)
            .unwrap();
        drop(c);
        let audit = hostile_completed(&ws, gone_at);
        assert_eq!(
            audit["detail"]["error_code"], "cancelled",
            "{load:?}: {audit}"
        );
    }
}
