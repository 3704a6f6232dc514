//! Issue #49, items 5 and 7: the second client.
//!
//! - One token, one client: with a token per client in `--token-file`, client A cannot see,
//!   answer, list, revoke or undo anything of client B's sessions through the console's API or
//!   its event stream, nor use B's MCP session; the person's token (the console's own) can.
//! - No starvation before authentication: sockets opened and left idle by anyone who can
//!   connect do not keep an authenticated client from being served.

use crate::common::*;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn token(c: char) -> String {
    c.to_string().repeat(64)
}

/// A token file of `lines`, mode 0600, in the test's user directories.
fn token_file(ws: &Ws, lines: &[String]) -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = ws.user_root().join("tokens");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    path
}

/// `toolgate serve --http` with `tokens`; its `token` is the person's, from the console's
/// address (console.rs's server).
fn server(ws: &Ws, tokens: &std::path::Path) -> crate::console::Server {
    let tokens = tokens.to_string_lossy();
    crate::console::server(
        ws,
        &["serve", "--http", "127.0.0.1:0", "--token-file", &tokens],
    )
}

/// One HTTP/1.1 request on a new connection: the status, the lower-cased headers and the body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<String>, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(
        answer.len() >= 12,
        "no answer to {method} {path}: {answer:?}"
    );
    let status = answer[9..12].parse().unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let headers = head.lines().skip(1).map(str::to_ascii_lowercase).collect();
    (status, headers, body.to_string())
}

/// A console API request with `token`: the status and the JSON body.
fn api(port: u16, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("Authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    let text = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, _, body) = http(port, method, path, &headers, &text);
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

/// The console's event stream with one token, held open (its console watches while it is).
struct Events {
    lines: BufReader<TcpStream>,
}

impl Events {
    fn open(port: u16, token: &str) -> Events {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            stream,
            "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n"
        )
        .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut events = Events {
            lines: BufReader::new(stream),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !events.take(deadline).iter().any(|(e, _)| e == "hello") {
            assert!(Instant::now() < deadline, "no hello");
        }
        events
    }

    /// The events that come before `until` (or the first batch after a quiet 200 ms).
    fn take(&mut self, until: Instant) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        let mut current = String::new();
        while Instant::now() < until {
            let mut line = String::new();
            match self.lines.read_line(&mut line) {
                Ok(0) => panic!("the event stream ended"),
                Ok(_) => {}
                Err(_) if out.is_empty() => continue,
                Err(_) => break,
            }
            let line = line.trim_end();
            if let Some(name) = line.strip_prefix("event: ") {
                current = name.to_string();
            } else if let Some(data) = line.strip_prefix("data: ") {
                out.push((current.clone(), serde_json::from_str(data).unwrap()));
            }
        }
        out
    }

    /// Every event for `secs` seconds.
    fn during(&mut self, secs: f64) -> Vec<(String, Value)> {
        let until = Instant::now() + Duration::from_secs_f64(secs);
        let mut all = Vec::new();
        while Instant::now() < until {
            all.extend(self.take(until));
        }
        all
    }

    /// The first pending approval, once there is one.
    fn pending(&mut self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "no approval came");
            for (event, data) in self.take(deadline) {
                if let (true, Some(first)) = (event == "approvals", data["pending"].get(0)) {
                    return first.clone();
                }
            }
        }
    }
}

type Conn = RunningService<RoleClient, ()>;

/// An MCP client with `token` that cannot be asked (no elicitation).
async fn mcp(port: u16, token: &str) -> Conn {
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{port}/mcp"))
            .auth_header(token.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

async fn call(conn: &Conn, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else { panic!() };
    let r: CallToolResult = conn
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap();
    r.structured_content.expect("structuredContent")
}

const ORIGINAL: &str = "def window(xs):\n    return xs[-3:]\n";

fn edit() -> Value {
    json!({"path": "stats/window.py", "old_string": "xs[-3:]", "new_string": "xs[-5:]"})
}

/// The call ids in a `/api/calls` answer.
fn call_ids(calls: &Value) -> Vec<String> {
    calls["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap().to_string())
        .collect()
}

/// Whether a `/api/history` answer names `call_id`.
fn history_names(history: &Value, call_id: &str) -> bool {
    history["files"].as_array().unwrap().iter().any(|f| {
        f["versions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["call_id"] == call_id)
    })
}

/// A stateless (2026-07-28) `read` with `token`: its audit id.
fn stateless_read(port: u16, token: &str) -> String {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "read", "arguments": {"path": "stats/window.py"}, "_meta": meta}})
    .to_string();
    let auth = format!("Bearer {token}");
    let (status, _, answer) = http(
        port,
        "POST",
        "/mcp",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "read"),
        ],
        &body,
    );
    assert_eq!(status, 200, "{answer}");
    let v: Value = serde_json::from_str(&answer).unwrap();
    v["result"]["structuredContent"]["audit_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_token_sees_and_answers_only_its_own_sessions() {
    let ws = Ws::new();
    ws.write("stats/window.py", ORIGINAL);
    let (a, b) = (token('a'), token('b'));
    let file = token_file(&ws, &[a.clone(), format!("client {b}")]);
    let s = server(&ws, &file);
    let (port, person) = (s.port, s.token.clone());
    assert!(
        person != a && person != b,
        "the console has a token of its own"
    );

    // B works: a read, then an edit that waits for B's own console.
    let conn_b = mcp(port, &b).await;
    let read_b = call(&conn_b, "read", json!({"path": "stats/window.py"})).await;
    let read_b = read_b["audit_id"].as_str().unwrap().to_string();
    let stateless_b = stateless_read(port, &b);
    let (ta, tb) = (a.clone(), b.clone());
    let (ev_a, ev_b) =
        tokio::task::spawn_blocking(move || (Events::open(port, &ta), Events::open(port, &tb)))
            .await
            .unwrap();
    let waiting = tokio::spawn(async move {
        let o = call(&conn_b, "edit", edit()).await;
        (conn_b, o)
    });
    let (request, mut ev_a, ev_b) = tokio::task::spawn_blocking(move || {
        let (mut ev_a, mut ev_b) = (ev_a, ev_b);
        let request = ev_b.pending();
        // A's stream says nothing of B's request.
        let seen: Vec<_> = ev_a.during(1.0);
        for (event, data) in &seen {
            assert!(
                event != "approvals" || data["pending"] == json!([]),
                "A's stream showed B's request: {data}"
            );
        }
        (request, ev_a, ev_b)
    })
    .await
    .unwrap();
    let (id, sha) = (
        request["id"].as_str().unwrap().to_string(),
        request["input_sha256"].as_str().unwrap().to_string(),
    );
    assert!(request["description"]
        .as_str()
        .unwrap()
        .contains("+    return xs[-5:]"));

    // A can neither see nor answer it: the same answer as for a request that does not exist.
    let (status, queue) = api(port, &a, "GET", "/api/approvals", None);
    assert_eq!((status, &queue["pending"]), (200, &json!([])), "{queue}");
    let answer = json!({"id": id, "input_sha256": sha, "answer": "session"});
    let (status, body) = api(port, &a, "POST", "/api/approvals/answer", Some(answer));
    assert_eq!(status, 409, "{body}");
    let unknown =
        json!({"id": "call-0000000000000000-approval", "input_sha256": sha, "answer": "once"});
    let (_, none) = api(port, &a, "POST", "/api/approvals/answer", Some(unknown));
    assert_eq!(
        body["error"].as_str().unwrap().replace(&id, "ID"),
        none["error"]
            .as_str()
            .unwrap()
            .replace("call-0000000000000000-approval", "ID"),
        "the refusal tells A nothing about B's request"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "A's answer ran B's write");
    assert_eq!(ws.read("stats/window.py"), ORIGINAL);

    // The person's token sees it and answers it.
    let (_, queue) = api(port, &person, "GET", "/api/approvals", None);
    assert_eq!(queue["pending"][0]["id"], id.as_str(), "{queue}");
    let answer = json!({"id": id, "input_sha256": sha, "answer": "session"});
    let (status, body) = api(port, &person, "POST", "/api/approvals/answer", Some(answer));
    assert_eq!(status, 200, "{body}");
    let (conn_b, done) = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    let edit_b = done["audit_id"].as_str().unwrap().to_string();
    assert!(ws.read("stats/window.py").contains("xs[-5:]"));

    // A lists none of B's calls (session or stateless); B and the person list them.
    let b_calls = [read_b.clone(), stateless_b.clone(), edit_b.clone()];
    let (_, calls) = api(port, &a, "GET", "/api/calls", None);
    let listed = call_ids(&calls);
    assert!(b_calls.iter().all(|c| !listed.contains(c)), "{calls}");
    for t in [&b, &person] {
        let (_, calls) = api(port, t, "GET", "/api/calls", None);
        let listed = call_ids(&calls);
        assert!(b_calls.iter().all(|c| listed.contains(c)), "{calls}");
    }
    // A's stream showed none of them either.
    let ids = b_calls.clone();
    let ev_a = tokio::task::spawn_blocking(move || {
        for (event, data) in ev_a.during(1.0) {
            assert!(
                !(event == "call" && ids.contains(&data["call_id"].as_str().unwrap().to_string())),
                "A's stream showed B's call {data}"
            );
        }
        ev_a
    })
    .await
    .unwrap();

    // Grants: A sees none of B's and cannot revoke them, nor the project's.
    let (_, grants_b) = api(port, &b, "GET", "/api/grants", None);
    let granted = grants_b["session"][0].clone();
    assert_eq!(granted["key"], "edit:stats/", "{grants_b}");
    let (_, grants_a) = api(port, &a, "GET", "/api/grants", None);
    assert_eq!(grants_a["session"], json!([]), "{grants_a}");
    let revoke = json!({"scope": "session", "session": granted["session"], "key": "edit:stats/"});
    let (status, body) = api(port, &a, "POST", "/api/grants/revoke", Some(revoke.clone()));
    assert_eq!((status, &body["revoked"]), (200, &json!(0)), "{body}");
    assert_eq!(api(port, &b, "GET", "/api/grants", None).1, grants_b);
    let project = json!({"scope": "project", "key": "edit:stats/"});
    let (status, _) = api(port, &a, "POST", "/api/grants/revoke", Some(project));
    assert_eq!(status, 403);

    // History and undo: A sees none of B's writes and cannot undo them, forced or not.
    let (_, history_a) = api(port, &a, "GET", "/api/history", None);
    assert!(!history_names(&history_a, &edit_b), "{history_a}");
    let (_, history_b) = api(port, &b, "GET", "/api/history", None);
    assert!(history_names(&history_b, &edit_b), "{history_b}");
    for force in [false, true] {
        let undo = json!({"call_id": edit_b, "force": force});
        let (status, body) = api(port, &a, "POST", "/api/undo", Some(undo));
        assert_eq!(status, 404, "{body}");
    }
    assert!(ws.read("stats/window.py").contains("xs[-5:]"));

    // B's MCP session is B's: A presenting its id gets 404, as for no session.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}"#;
    let auth_b = format!("Bearer {b}");
    let hb = [
        ("Authorization", auth_b.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let (status, headers, _) = http(port, "POST", "/mcp", &hb, init);
    assert_eq!(status, 200);
    let session = headers
        .iter()
        .find_map(|h| h.strip_prefix("mcp-session-id: "))
        .unwrap()
        .to_string();
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let auth_a = format!("Bearer {a}");
    let with_a = [
        ("Authorization", auth_a.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    assert_eq!(http(port, "POST", "/mcp", &with_a, list).0, 404);

    // The person's token undoes B's write.
    let (status, body) = api(
        port,
        &person,
        "POST",
        "/api/undo",
        Some(json!({"call_id": edit_b})),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(ws.read("stats/window.py"), ORIGINAL);
    drop((ev_a, ev_b, conn_b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clients_console_does_not_hold_a_call_that_cannot_be_asked() {
    let ws = Ws::new();
    ws.write("stats/window.py", ORIGINAL);
    let (a, b) = (token('a'), token('b'));
    let file = token_file(&ws, &[a.clone(), b.clone()]);
    let s = server(&ws, &file);
    let port = s.port;
    // Only A's console watches: B's call cannot be answered by it, so it is refused at once
    // as headless, not left waiting for a console that cannot see it.
    let ev_a = tokio::task::spawn_blocking(move || Events::open(port, &token('a')))
        .await
        .unwrap();
    let conn_b = mcp(port, &b).await;
    call(&conn_b, "read", json!({"path": "stats/window.py"})).await;
    let started = Instant::now();
    let refused = tokio::time::timeout(Duration::from_secs(20), call(&conn_b, "edit", edit()))
        .await
        .expect("B's call waited for A's console");
    assert_eq!(refused["status"], "denied", "{refused}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(ws.read("stats/window.py"), ORIGINAL);
    drop(ev_a);
}

/// An authenticated stateless `server/discover` on a new connection: its status (0 when the
/// connection was closed unanswered).
fn discover(port: u16, token: &str) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return 0;
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(req.as_bytes()).is_err() {
        return 0;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn idle_sockets_before_authentication_do_not_starve_authenticated_calls() {
    let ws = Ws::new();
    let good = token('g');
    let file = token_file(&ws, std::slice::from_ref(&good));
    let s = server(&ws, &file);
    assert_eq!(discover(s.port, &good), 200);
    // Far more idle sockets than the old 64 places and 16 responders, and than the pre-auth
    // bound: each says nothing.
    const IDLE: usize = 300;
    let mut idle: Vec<TcpStream> = (0..IDLE)
        .map(|_| TcpStream::connect(("127.0.0.1", s.port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..10 {
        assert_eq!(
            discover(s.port, &good),
            200,
            "authenticated request {i} was starved by {IDLE} idle sockets"
        );
        // The attacker keeps opening more.
        for _ in 0..20 {
            idle.push(TcpStream::connect(("127.0.0.1", s.port)).unwrap());
        }
    }
    // An idle socket is closed by the server within its pre-auth deadline (3 s).
    let mut last = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    last.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let n = last.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the server answered an empty connection");
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "an idle socket was kept {:?}",
        started.elapsed()
    );
    drop(idle);
}
