//! The console (`serve --http` at `/`): its API refuses what a foreign page or a stale answer
//! could do, a call from an MCP client that cannot be asked waits for the console only while
//! one watches, and in a real headless Chromium the page approves an edit (the MCP call then
//! completes) and undoes it (the file is restored).

use crate::browser::Browser;
use crate::common::*;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A `toolgate serve --http 127.0.0.1:0` process with the console's address it printed.
pub(crate) struct Server {
    child: std::process::Child,
    pub(crate) port: u16,
    pub(crate) token: String,
    /// `http://127.0.0.1:PORT/#token=…`
    console: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn server(ws: &Ws, command: &[&str]) -> Server {
    let mut child = toolgate_command(ws)
        .args(command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut console = None;
    loop {
        let line = lines
            .next()
            .expect("the server exited before it listened")
            .unwrap();
        if let Some((_, url)) = line.split_once("carries the token): ") {
            console = Some(url.trim().to_string());
        }
        if line.starts_with("toolgate: serving MCP on ") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines.by_ref() {});
    let console = console.expect("the server printed no console address");
    let rest = console.strip_prefix("http://127.0.0.1:").unwrap();
    let (port, token) = rest.split_once("/#token=").unwrap();
    Server {
        child,
        port: port.parse().unwrap(),
        token: token.to_string(),
        console,
    }
}

/// One HTTP/1.1 request; the status and the body.
fn http(
    s: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Length: {}\r\n",
        s.port,
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

fn api(s: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let auth = format!("Bearer {}", s.token);
    let mut headers = vec![("Authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    let text = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, body) = http(s, method, path, &headers, &text);
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

/// The console's event stream, held open (the console watches while it is).
struct Events {
    lines: BufReader<TcpStream>,
}

impl Events {
    fn open(s: &Server) -> Events {
        let mut stream = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        write!(
            stream,
            "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\r\n",
            s.port, s.token
        )
        .unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut events = Events {
            lines: BufReader::new(stream),
        };
        // The server counts the console as watching before it sends `hello`: a call made
        // after this is one the console is asked about (before, a call could reach the
        // server first and be refused as headless, and the test then waited for ever).
        events.next("hello");
        events
    }

    /// The data of the next `event` frame (other frames are skipped).
    fn next(&mut self, event: &str) -> Value {
        let mut current = String::new();
        // Keep-alive comments keep the read timeout from firing: bound the wait here.
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            assert!(
                Instant::now() < deadline,
                "no `{event}` event came within 90 s"
            );
            let mut line = String::new();
            assert!(
                self.lines.read_line(&mut line).unwrap() > 0,
                "the event stream ended"
            );
            let line = line.trim_end();
            if let Some(name) = line.strip_prefix("event: ") {
                current = name.to_string();
            } else if let Some(data) = line.strip_prefix("data: ") {
                if current == event {
                    return serde_json::from_str(data).unwrap();
                }
            }
        }
    }

    /// The first pending approval, once there is one.
    fn pending(&mut self) -> Value {
        loop {
            let queue = self.next("approvals");
            if let Some(first) = queue["pending"].get(0) {
                return first.clone();
            }
        }
    }
}

type Conn = RunningService<RoleClient, ()>;

/// An MCP client that cannot be asked (no elicitation).
async fn mcp(s: &Server) -> Conn {
    let config =
        StreamableHttpClientTransportConfig::with_uri(format!("http://127.0.0.1:{}/mcp", s.port))
            .auth_header(s.token.clone());
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

fn workspace() -> Ws {
    let ws = Ws::new();
    ws.write("stats/window.py", "def window(xs):\n    return xs[-3:]\n");
    ws
}

fn edit() -> Value {
    json!({"path": "stats/window.py", "old_string": "xs[-3:]", "new_string": "xs[-5:]"})
}

#[test]
fn the_api_needs_the_token_and_refuses_foreign_pages_and_forms() {
    let ws = workspace();
    let s = server(&ws, &["serve", "--http", "127.0.0.1:0"]);
    // The page itself holds nothing of the workspace: no token needed, and it may not be framed.
    let (status, page) = http(&s, "GET", "/", &[], "");
    assert_eq!(status, 200);
    assert!(page.contains("/console.js"), "{page}");
    // Everything under /api/ needs the bearer token; a cookie is no substitute.
    let (status, _) = http(&s, "GET", "/api/history", &[], "");
    assert_eq!(status, 401);
    let (status, _) = http(
        &s,
        "GET",
        "/api/history",
        &[("Cookie", &format!("token={}", s.token))],
        "",
    );
    assert_eq!(status, 401);
    let (status, overview) = api(&s, "GET", "/api/overview", None);
    assert_eq!(status, 200);
    assert_eq!(overview["workspace"], ws.root().to_str().unwrap());
    assert_eq!(overview["mode"], "ask");
    // A page of another site is refused on its Origin, even if it somehow had the token.
    let auth = format!("Bearer {}", s.token);
    let (status, _) = http(
        &s,
        "POST",
        "/api/undo",
        &[
            ("Authorization", &auth),
            ("Origin", "http://evil.example"),
            ("Content-Type", "application/json"),
        ],
        r#"{"call_id":"x"}"#,
    );
    assert_eq!(status, 403);
    // A form (a request a foreign page may send without asking) is not JSON, so refused.
    let (status, body) = http(
        &s,
        "POST",
        "/api/undo",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        "call_id=x",
    );
    assert_eq!(status, 415, "{body}");
    let (status, body) = api(&s, "POST", "/api/undo", Some(json!({"call_id": "c-none"})));
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].as_str().unwrap().contains("c-none"), "{body}");
    let (status, _) = api(&s, "POST", "/api/overview", Some(json!({})));
    assert_eq!(status, 405);
    let (status, _) = api(&s, "GET", "/api/nothing-here", None);
    assert_eq!(status, 404);
    // A history path outside the workspace is refused, not listed.
    let (status, body) = api(&s, "GET", "/api/history?path=..%2F..%2Fetc%2Fpasswd", None);
    assert_eq!(status, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waits_for_the_console_only_while_one_watches_and_answers_bind_to_the_input() {
    let ws = workspace();
    let s = server(&ws, &["serve", "--http", "127.0.0.1:0"]);
    let conn = mcp(&s).await;
    assert_eq!(
        call(&conn, "read", json!({"path": "stats/window.py"})).await["status"],
        "ok"
    );
    // Nobody watches: the call is refused at once as headless, as before.
    let started = Instant::now();
    let refused = call(&conn, "edit", edit()).await;
    assert_eq!(refused["status"], "denied", "{refused}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(ws.read("stats/window.py").contains("xs[-3:]"));

    // A console watches: the call waits in its queue, with the diff.
    let ev = Events::open(&s);
    let waiting = tokio::spawn(async move {
        let o = call(&conn, "edit", edit()).await;
        (conn, o)
    });
    let (request, ev) = tokio::task::spawn_blocking(move || {
        let mut ev = ev;
        (ev.pending(), ev)
    })
    .await
    .unwrap();
    assert_eq!(request["tool"], "edit");
    assert_eq!(request["key"], "edit:stats/");
    let description = request["description"].as_str().unwrap();
    assert!(
        description.contains("-    return xs[-3:]") && description.contains("+    return xs[-5:]"),
        "{description}"
    );
    let id = request["id"].as_str().unwrap().to_string();
    let sha = request["input_sha256"].as_str().unwrap().to_string();

    // An answer for another input, or one not offered, approves nothing.
    let (status, body) = api(
        &s,
        "POST",
        "/api/approvals/answer",
        Some(json!({"id": id, "input_sha256": "0".repeat(64), "answer": "once"})),
    );
    assert_eq!(status, 400, "{body}");
    assert!(!waiting.is_finished());
    let (_, queue) = api(&s, "GET", "/api/approvals", None);
    assert_eq!(queue["pending"][0]["id"], id.as_str(), "{queue}");
    assert!(ws.read("stats/window.py").contains("xs[-3:]"));

    // The right answer: the MCP call completes and the file is changed.
    let (status, body) = api(
        &s,
        "POST",
        "/api/approvals/answer",
        Some(json!({"id": id, "input_sha256": sha, "answer": "once"})),
    );
    assert_eq!(status, 200, "{body}");
    let (conn, done) = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    assert!(ws.read("stats/window.py").contains("xs[-5:]"));
    // A second answer is a no-op that says so.
    let (status, body) = api(
        &s,
        "POST",
        "/api/approvals/answer",
        Some(json!({"id": id, "input_sha256": sha, "answer": "session"})),
    );
    assert_eq!(status, 409, "{body}");
    // The feed told the console about the call.
    let call_id = done["audit_id"].as_str().unwrap().to_string();
    let seen = tokio::task::spawn_blocking(move || {
        let mut ev = ev;
        loop {
            let c = ev.next("call");
            if c["call_id"] == call_id.as_str() {
                break c;
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(seen["decision"], "allow");
    assert_eq!(seen["stage"], "ask");
    drop(conn);
}

/// The next pending approval seen on `ev` (read on a blocking thread), and the stream back.
async fn next_pending(ev: Events) -> (Value, Events) {
    tokio::task::spawn_blocking(move || {
        let mut ev = ev;
        (ev.pending(), ev)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_grant_revoked_from_the_console_asks_again() {
    let ws = workspace();
    let s = server(&ws, &["serve", "--http", "127.0.0.1:0"]);
    let conn = mcp(&s).await;
    assert_eq!(
        call(&conn, "read", json!({"path": "stats/window.py"})).await["status"],
        "ok"
    );
    let ev = Events::open(&s);
    let waiting = tokio::spawn(async move {
        let o = call(&conn, "edit", edit()).await;
        (conn, o)
    });
    let (request, ev) = next_pending(ev).await;
    let answer =
        json!({"id": request["id"], "input_sha256": request["input_sha256"], "answer": "session"});
    assert_eq!(
        api(&s, "POST", "/api/approvals/answer", Some(answer)).0,
        200
    );
    let (conn, done) = waiting.await.unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    let (_, grants) = api(&s, "GET", "/api/grants", None);
    let granted = grants["session"][0].clone();
    assert_eq!(granted["key"], "edit:stats/", "{grants}");
    let revoke = json!({"scope": "session", "session": granted["session"], "key": "edit:stats/"});
    let (status, body) = api(&s, "POST", "/api/grants/revoke", Some(revoke));
    assert_eq!((status, body["revoked"].clone()), (200, json!(1)), "{body}");
    assert_eq!(api(&s, "GET", "/api/grants", None).1["session"], json!([]));
    // The same session's next edit is asked about again, not allowed by the revoked grant.
    let again =
        json!({"path": "stats/window.py", "old_string": "xs[-5:]", "new_string": "xs[-7:]"});
    let waiting = tokio::spawn(async move { call(&conn, "edit", again).await });
    let (request, _ev) = next_pending(ev).await;
    let answer =
        json!({"id": request["id"], "input_sha256": request["input_sha256"], "answer": "deny"});
    assert_eq!(
        api(&s, "POST", "/api/approvals/answer", Some(answer)).0,
        200
    );
    assert_eq!(waiting.await.unwrap()["status"], "denied");
    assert!(ws.read("stats/window.py").contains("xs[-5:]"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_browser_the_console_approves_an_edit_and_undoes_it() {
    let Some(browser) = Browser::launch() else {
        return;
    };
    let ws = workspace();
    let s = server(&ws, &["console", "--no-open"]);
    let page = browser.open(&s.console);
    page.wait_for(
        "document.querySelector('#status')?.dataset.state === 'live'",
        Duration::from_secs(20),
    );
    // The token left the address bar.
    assert!(!page
        .eval("location.href")
        .as_str()
        .unwrap()
        .contains("token"));

    let conn = mcp(&s).await;
    assert_eq!(
        call(&conn, "read", json!({"path": "stats/window.py"})).await["status"],
        "ok"
    );
    // The new text is hostile markup: the page shows it as text and runs none of it.
    let hostile = json!({
        "path": "stats/window.py",
        "old_string": "xs[-3:]",
        "new_string": "xs[-5:]  # <img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script>",
    });
    let waiting = tokio::spawn(async move {
        let o = call(&conn, "edit", hostile).await;
        (conn, o)
    });
    let page = tokio::task::spawn_blocking(move || {
        page.wait_for(
            "document.querySelector('section.approval') !== null",
            Duration::from_secs(20),
        );
        let diff = page.text("section.approval pre.description");
        assert!(diff.contains("+    return xs[-5:]  # <img src=x onerror="), "{diff}");
        let ran = page.eval("[window.pwned ?? null, document.querySelectorAll('#approvals img, #approvals script').length]");
        assert_eq!(ran, json!([null, 0]), "markup from the file became part of the page");
        let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-approval.png");
        page.screenshot(&shot);
        eprintln!(
            "screenshot of the console with a pending approval: {}",
            shot.display()
        );
        page.click("section.approval button[data-answer=\"once\"]");
        page
    })
    .await
    .unwrap();
    let (conn, done) = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done["status"], "ok", "{done}");
    assert!(ws.read("stats/window.py").contains("xs[-5:]"));
    let call_id = done["audit_id"].as_str().unwrap().to_string();

    let page = tokio::task::spawn_blocking(move || {
        let undo = format!("button.undo[data-call=\"{call_id}\"]");
        page.wait_for(
            &format!("document.querySelector('{undo}') !== null"),
            Duration::from_secs(20),
        );
        page.wait_for(
            &format!("document.querySelector('#audit-table tr[data-call=\"{call_id}\"]') !== null"),
            Duration::from_secs(20),
        );
        let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("console.png");
        page.screenshot(&shot);
        eprintln!(
            "screenshot of the console after the edit: {}",
            shot.display()
        );
        page.click(&undo);
        page.wait_for(
            "document.querySelector('#notice')?.innerText.includes('restored')",
            Duration::from_secs(20),
        );
        page
    })
    .await
    .unwrap();
    assert_eq!(
        ws.read("stats/window.py"),
        "def window(xs):\n    return xs[-3:]\n"
    );
    drop(page);
    drop(conn);
}
