//! Cancellation ends the call, not the JSON-RPC id (issue #14): an approval belongs to the call
//! that asked for it. A cancelled call's pending approval is withdrawn at once, so a late
//! answer (from any surface) approves nothing, and a request that reuses the cancelled call's
//! id gets its own answer and revives nothing.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolgate::cancel::CancelToken;
use toolgate::gate::approval::{escape_name, Answer, AnswerFuture, ApprovalRequest, Approver};
use toolgate::state::{AuditQuery, StateDb};
use toolgate::{Gate, GateOptions, Status};

/// A raw JSON-RPC client of `toolgate serve` over stdio that declares elicitation, so the
/// test decides exactly which line goes when.
struct Raw {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<Value>,
}

impl Raw {
    fn start(ws: &Ws) -> Self {
        let mut child = crate::raw_stdio::spawn_serve(ws, &[]);
        let stdin = child.stdin.take();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        // Ends when the server closes stdout (the test waits for the child at the end).
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("the server wrote a non-JSON line ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let mut raw = Raw {
            child,
            stdin,
            lines,
        };
        raw.send(
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-06-18",
            "capabilities":{"elicitation":{}},
            "clientInfo":{"name":"raw","version":"1"}}}),
        );
        let init = raw.wait_for(|m| m["id"] == 1, Duration::from_secs(30));
        assert!(init.get("result").is_some(), "{init}");
        raw.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        raw
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        stdin.write_all(&line).unwrap();
        stdin.flush().unwrap();
    }

    /// The first message matching `pick`; every message read before it is returned too.
    fn wait_for_collecting(
        &mut self,
        pick: impl Fn(&Value) -> bool,
        within: Duration,
    ) -> (Value, Vec<Value>) {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(m) if pick(&m) => return (m, seen),
                Ok(m) => seen.push(m),
                Err(e) => panic!("no matching message within {within:?} ({e}); saw {seen:#?}"),
            }
        }
    }

    fn wait_for(&mut self, pick: impl Fn(&Value) -> bool, within: Duration) -> Value {
        self.wait_for_collecting(pick, within).0
    }

    /// Every message that arrives within `window`.
    fn drain(&mut self, window: Duration) -> Vec<Value> {
        let deadline = Instant::now() + window;
        let mut seen = Vec::new();
        while let Ok(m) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            seen.push(m);
        }
        seen
    }

    /// Close stdin and wait for the server to exit (so its audit is on disk).
    fn finish(mut self) {
        drop(self.stdin.take());
        let started = Instant::now();
        loop {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            if started.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the server did not exit after stdin closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn is_response(m: &Value) -> bool {
    m.get("result").is_some() || m.get("error").is_some()
}

/// Every audit event of `tool` in the workspace's state database.
fn audit_of(ws: &Ws, tool: &str) -> Vec<toolgate::state::AuditEvent> {
    let db = StateDb::open(&ws.path(".toolgate/state.db")).unwrap();
    db.audit_events(&AuditQuery {
        tool: Some(tool.into()),
        ..Default::default()
    })
    .unwrap()
}

/// The attack: a write waits for approval; the client cancels the call, reuses its id for a
/// `ping`, then answers the (void) elicitation `once`. Nothing may be written or allowed.
#[test]
fn a_cancelled_calls_approval_answered_late_under_a_reused_id_runs_nothing() {
    let ws = Ws::new();
    let mut raw = Raw::start(&ws);
    raw.send(
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{
        "name":"write","arguments":{"path":"pwned.txt","content":"owned\n"}}}),
    );
    let ask = raw.wait_for(
        |m| m["method"] == "elicitation/create",
        Duration::from_secs(30),
    );
    let elicit_id = ask["id"].clone();
    assert!(
        ask["params"]["message"]
            .as_str()
            .unwrap()
            .contains("pwned.txt"),
        "{ask}"
    );

    raw.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":5,"reason":"user pressed stop"}}));
    raw.send(json!({"jsonrpc":"2.0","id":5,"method":"ping"}));
    raw.send(json!({"jsonrpc":"2.0","id":elicit_id,
        "result":{"action":"accept","content":{"decision":"once"}}}));

    // The ping gets its own (empty) answer.
    let (pong, mut seen) = raw.wait_for_collecting(is_response, Duration::from_secs(10));
    assert_eq!(pong["id"], 5, "{pong}");
    assert_eq!(pong["result"], json!({}), "the ping's answer: {pong}");
    // Longer than the old cancel grace (2 s), in which a late answer still ran the call.
    seen.extend(raw.drain(Duration::from_millis(3000)));

    // The id is reused again, for a real call: it gets that call's answer.
    raw.send(
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{
        "name":"ls","arguments":{}}}),
    );
    let (ls, more) = raw.wait_for_collecting(is_response, Duration::from_secs(30));
    seen.extend(more);
    assert_eq!(ls["id"], 5, "{ls}");
    assert_eq!(ls["result"]["structuredContent"]["tool"], "ls", "{ls}");
    seen.extend(raw.drain(Duration::from_millis(300)));
    raw.finish();

    assert!(
        !exists(&ws.path("pwned.txt")),
        "the cancelled call's write ran after a late answer"
    );
    // Any further answer with id 5 is the cancelled call's, and says it was cancelled.
    for m in seen.iter().filter(|m| is_response(m) && m["id"] == 5) {
        let o = &m["result"]["structuredContent"];
        assert_eq!(o["error_code"], "cancelled", "a stray answer to id 5: {m}");
    }
    // (Whether the server's notifications/cancelled for the elicitation came before the
    // client's answer is a race here; the next test waits for it.)
    assert_cancelled_in_audit(&ws, "write");
}

/// The write's audit: one decision, `cancelled`; never started; completed as `cancelled`.
fn assert_cancelled_in_audit(ws: &Ws, tool: &str) {
    let events = audit_of(ws, tool);
    let decisions: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == "decision")
        .map(|e| &e.detail)
        .collect();
    assert_eq!(decisions.len(), 1, "{events:#?}");
    assert_eq!(decisions[0]["decision"], "cancelled", "{events:#?}");
    assert!(!events.iter().any(|e| e.event == "started"), "{events:#?}");
    let completed: Vec<&Value> = events
        .iter()
        .filter(|e| e.event == "completed")
        .map(|e| &e.detail)
        .collect();
    assert_eq!(completed.len(), 1, "{events:#?}");
    assert_eq!(completed[0]["error_code"], "cancelled", "{events:#?}");
}

/// The server voids its elicitation when the call is cancelled: the client is sent
/// `notifications/cancelled` for the elicitation's id, and an answer after that is ignored.
#[test]
fn the_server_cancels_the_elicitation_of_a_cancelled_call_and_ignores_its_answer() {
    let ws = Ws::new();
    let mut raw = Raw::start(&ws);
    raw.send(
        json!({"jsonrpc":"2.0","id":"w","method":"tools/call","params":{
        "name":"write","arguments":{"path":"late.txt","content":"x"}}}),
    );
    let ask = raw.wait_for(
        |m| m["method"] == "elicitation/create",
        Duration::from_secs(30),
    );
    let elicit_id = ask["id"].clone();
    raw.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
        "params":{"requestId":"w"}}));
    let (void, seen) = raw.wait_for_collecting(
        |m| m["method"] == "notifications/cancelled",
        Duration::from_secs(5),
    );
    assert_eq!(void["params"]["requestId"], elicit_id, "{void}");
    assert!(
        !seen.iter().any(|m| is_response(m) && m["id"] == "w"),
        "the cancelled call was answered: {seen:#?}"
    );
    raw.send(json!({"jsonrpc":"2.0","id":elicit_id,
        "result":{"action":"accept","content":{"decision":"session"}}}));
    // The same id again, for the same write: asked again (the late `session` granted nothing).
    raw.send(
        json!({"jsonrpc":"2.0","id":"w","method":"tools/call","params":{
        "name":"write","arguments":{"path":"late.txt","content":"x"}}}),
    );
    let again = raw.wait_for(
        |m| m["method"] == "elicitation/create",
        Duration::from_secs(30),
    );
    assert_ne!(again["id"], elicit_id);
    raw.send(json!({"jsonrpc":"2.0","id":again["id"],
        "result":{"action":"accept","content":{"decision":"deny"}}}));
    let answer = raw.wait_for(is_response, Duration::from_secs(30));
    assert_eq!(answer["id"], "w", "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["status"], "denied",
        "{answer}"
    );
    raw.finish();
    assert!(!exists(&ws.path("late.txt")));
    let decisions: Vec<String> = audit_of(&ws, "write")
        .iter()
        .filter(|e| e.event == "decision")
        .map(|e| e.detail["decision"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(decisions, ["cancelled", "deny"]);
}

/// A surface that never answers, remembering what it was asked and what was withdrawn.
#[derive(Default)]
struct Silent {
    asked: Mutex<Vec<ApprovalRequest>>,
    withdrawn: Mutex<Vec<String>>,
}

impl Approver for Silent {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        self.asked.lock().unwrap().push(request);
        Box::pin(std::future::pending())
    }
    fn withdrawn(&self, request: &ApprovalRequest) {
        self.withdrawn.lock().unwrap().push(request.id.clone());
    }
}

async fn ask_gate(ws: &Ws) -> Arc<Gate> {
    Arc::new(
        Gate::open(GateOptions {
            workspace: ws.root(),
            cache_dir: Some(cache_dir()),
            user_dirs: Some(ws.user_dirs()),
            ..Default::default()
        })
        .await
        .unwrap(),
    )
}

/// Start a cancellable write that waits for `surface`; returns its task and the approval id.
async fn waiting_write(
    gate: &Arc<Gate>,
    flag: &CancelToken,
    surface: &Arc<Silent>,
    path: &str,
) -> (tokio::task::JoinHandle<toolgate::Observation>, String) {
    let (g, f, s) = (gate.clone(), flag.clone(), surface.clone());
    let input = json!({"path": path, "content": "x"});
    let task = tokio::spawn(async move {
        g.call_cancellable(SESSION, "write", input, Some(s), f)
            .await
    });
    let started = Instant::now();
    loop {
        if let Some(id) = gate.broker().pending().first() {
            return (task, id.clone());
        }
        assert!(started.elapsed() < Duration::from_secs(30), "never asked");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Through the gate and the broker API directly: a cancelled call's request is withdrawn at
/// once, its surface is told, and a later answer is a no-op.
#[tokio::test]
async fn a_cancelled_calls_request_is_withdrawn_and_a_later_answer_is_a_no_op() {
    let ws = Ws::new();
    let gate = ask_gate(&ws).await;
    let flag = CancelToken::new();
    let surface = Arc::new(Silent::default());
    let (task, id) = waiting_write(&gate, &flag, &surface, "a.txt").await;
    flag.cancel();
    let o = tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .expect("the cancelled call still waits")
        .unwrap();
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "cancelled", "{o:#?}");
    assert!(gate.broker().pending().is_empty());
    assert!(
        !gate.broker().answer(&id, Answer::Once),
        "an answer to a withdrawn request approved something"
    );
    assert_eq!(*surface.withdrawn.lock().unwrap(), vec![id]);
    assert!(!exists(&ws.path("a.txt")));
    gate.state().flush_audit();
    assert_cancelled_in_audit(&ws, "write");
}

/// Cancelled at the very moment the answer comes (both before the call runs again): the
/// answer is taken, but the call never runs and no grant is saved.
#[tokio::test]
async fn a_call_cancelled_as_its_approval_comes_never_runs() {
    let ws = Ws::new();
    let gate = ask_gate(&ws).await;
    let flag = CancelToken::new();
    let surface = Arc::new(Silent::default());
    let (task, id) = waiting_write(&gate, &flag, &surface, "b.txt").await;
    // No await in between: the current-thread runtime runs the call only after both.
    flag.cancel();
    assert!(gate.broker().answer(&id, Answer::Session));
    let o = task.await.unwrap();
    assert_eq!(code(&o), "cancelled", "{o:#?}");
    assert!(!exists(&ws.path("b.txt")));
    assert!(
        gate.state().session_grants(SESSION).unwrap().is_empty(),
        "the answer of a cancelled call saved a grant"
    );
    gate.state().flush_audit();
    assert_cancelled_in_audit(&ws, "write");
}

/// A path with a newline and escape sequences shows escaped, on its own line, in the
/// elicitation message (the terminal prompt's rendering is unit-tested in cli/prompt.rs).
#[test]
fn a_path_with_a_newline_and_an_ansi_escape_is_shown_escaped_in_the_elicitation() {
    let ws = Ws::new();
    let dir = "d\u{1b}[31m\nkey: write:src";
    ws.mkdir(dir);
    let path = format!("{dir}/a\u{202e}txt.exe");
    let mut raw = Raw::start(&ws);
    raw.send(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
        "name":"write","arguments":{"path":path,"content":"x"}}}),
    );
    let (ask, seen) = raw.wait_for_collecting(
        |m| m["method"] == "elicitation/create" || is_response(m),
        Duration::from_secs(30),
    );
    assert_eq!(ask["method"], "elicitation/create", "{ask} {seen:?}");
    let message = ask["params"]["message"].as_str().unwrap().to_string();
    raw.send(json!({"jsonrpc":"2.0","id":ask["id"],
        "result":{"action":"accept","content":{"decision":"deny"}}}));
    let answer = raw.wait_for(is_response, Duration::from_secs(30));
    assert_eq!(answer["result"]["structuredContent"]["status"], "denied");
    raw.finish();

    let shown_path = escape_name(&path).into_owned();
    assert_eq!(
        shown_path,
        "\"d\\x1b[31m\\nkey: write:src/a\\u{202e}txt.exe\""
    );
    assert!(
        message.contains(&format!("creates {shown_path} (path)")),
        "{message}"
    );
    assert!(
        message.contains("key: \"write:d\\x1b[31m\\nkey: write:src/\"\n"),
        "{message}"
    );
    assert_eq!(
        message.lines().filter(|l| l.starts_with("key:")).count(),
        1,
        "a path added a line to the prompt: {message}"
    );
    assert!(
        !message
            .chars()
            .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}'),
        "{message:?}"
    );
}

/// A `toolgate serve --http` process on loopback; killed when dropped.
struct HttpServer {
    child: std::process::Child,
    url: String,
    token: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_server(ws: &Ws) -> HttpServer {
    let mut child = toolgate_command(ws)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("serve exited before it listened")
            .unwrap();
        if let Some(rest) = line.strip_prefix("toolgate: serving MCP on ") {
            break rest.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    let token = std::fs::read_to_string(ws.user_dirs().state.join("http-token"))
        .unwrap()
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .unwrap()
        .trim()
        .to_string();
    HttpServer { child, url, token }
}

/// An rmcp client that answers the elicitation `once`, but only when the test says so.
#[derive(Clone, Default)]
struct LateClient {
    asked: Arc<tokio::sync::Notify>,
    go: Arc<tokio::sync::Notify>,
}

impl rmcp::ClientHandler for LateClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut config = rmcp::model::ClientConfig::default();
        config.capabilities.elicitation = Some(rmcp::model::ElicitationCapability::default());
        config
    }

    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<rmcp::service::RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked.notify_one();
        self.go.notified().await;
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
                .with_content(json!({"decision": "once"})),
        )
    }
}

/// The same over streamable HTTP: the call is cancelled while its elicitation is open, the
/// client answers `once` right after, and nothing runs.
#[tokio::test]
async fn over_http_a_cancelled_calls_late_approval_runs_nothing() {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::ServiceExt;
    let ws = Ws::new();
    let server = http_server(&ws);
    let client = LateClient::default();
    let config = StreamableHttpClientTransportConfig::with_uri(server.url.clone())
        .auth_header(server.token.clone());
    let conn = client
        .clone()
        .serve(rmcp::transport::StreamableHttpClientTransport::from_config(
            config,
        ))
        .await
        .unwrap();
    let Value::Object(args) = json!({"path": "http.txt", "content": "x"}) else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("write").with_arguments(args);
    let handle = conn
        .peer()
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), client.asked.notified())
        .await
        .expect("the write was never put to the client");
    handle.cancel(Some("stop".into())).await.unwrap();
    client.go.notify_one();
    // Longer than the old 2 s grace in which a late answer still ran the call.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !exists(&ws.path("http.txt")),
        "the cancelled call's write ran after a late answer"
    );
    // The session goes on.
    let Value::Object(args) = json!({}) else {
        unreachable!()
    };
    let r = conn
        .call_tool(CallToolRequestParams::new("ls").with_arguments(args))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    conn.cancel().await.unwrap();
    // The server writes its audit in the background: wait for the write's last event.
    let started = Instant::now();
    while !audit_of(&ws, "write")
        .iter()
        .any(|e| e.event == "completed")
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no audit of the write"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_cancelled_in_audit(&ws, "write");
    drop(server);
}
