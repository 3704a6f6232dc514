//! `toolgate serve` end to end, through the real rmcp client: over stdio (a child process),
//! over streamable HTTP on loopback, and in-process for the list-changed notification.

use crate::common::*;
use crate::raw_stdio::RawStdio;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData as McpError, ServiceExt};
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A test client. With `answer` set it declares elicitation and answers every approval with
/// it (`"decline"` declines); it records every message it was asked.
#[derive(Clone, Default)]
struct Client {
    answer: Option<&'static str>,
    asked: Arc<Mutex<Vec<(String, Value)>>>,
    list_changed: Arc<Notify>,
}

impl Client {
    fn headless() -> Self {
        Client::default()
    }

    fn answering(answer: &'static str) -> Self {
        Client {
            answer: Some(answer),
            ..Client::default()
        }
    }

    fn asked(&self) -> Vec<(String, Value)> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        if self.answer.is_some() {
            config.capabilities.elicitation = Some(ElicitationCapability::default());
        }
        config
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        self.asked.lock().unwrap().push((message, schema));
        Ok(match self.answer {
            Some("decline") | None => ElicitResult::new(ElicitationAction::Decline),
            Some(answer) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({ "decision": answer })),
        })
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }
}

type Conn = RunningService<RoleClient, Client>;

fn command(ws: &Ws, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(crate::common::toolgate_bin());
    cmd.env("TOOLGATE_CACHE_DIR", cache_dir())
        .env_remove("TOOLGATE_SESSION")
        .env_remove("TOOLGATE_WORKSPACE")
        .env_remove("TOOLGATE_LOG")
        .arg("--workspace")
        .arg(ws.root())
        .arg("serve")
        .args(args);
    cmd
}

/// `toolgate serve` over stdio, connected.
async fn stdio(ws: &Ws, args: &[&str], client: Client) -> Conn {
    let (transport, _) = TokioChildProcess::builder(command(ws, args))
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    client.serve(transport).await.unwrap()
}

/// A `toolgate serve --http 127.0.0.1:0` process, its MCP URL (read from its stderr, where
/// it is printed once the listener accepts connections) and the bearer token it wants.
pub(crate) struct HttpServer {
    child: std::process::Child,
    url: String,
    pub(crate) port: u16,
    pub(crate) token: String,
    /// What it printed on stderr before it listened.
    banner: Vec<String>,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn http_server(ws: &Ws, args: &[&str]) -> HttpServer {
    let mut cmd = toolgate_command(ws);
    cmd.args(["serve", "--http", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let mut banner = Vec::new();
    let url = loop {
        let line = lines
            .next()
            .expect("serve exited before it listened")
            .unwrap();
        if let Some(rest) = line.strip_prefix("toolgate: serving MCP on ") {
            break rest.trim().to_string();
        }
        banner.push(line);
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let token_file = args
        .iter()
        .position(|a| *a == "--token-file")
        .map(|i| std::path::PathBuf::from(args[i + 1]))
        .unwrap_or_else(|| ws.user_dirs().state.join("http-token"));
    let token = std::fs::read_to_string(token_file)
        .unwrap()
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .unwrap()
        .trim()
        .to_string();
    HttpServer {
        child,
        url,
        port,
        token,
        banner,
    }
}

async fn http(server: &HttpServer, client: Client) -> Conn {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(server.url.clone())
        .auth_header(server.token.clone());
    let transport = StreamableHttpClientTransport::from_config(config);
    client.serve(transport).await.unwrap()
}

async fn call(conn: &Conn, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    conn.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap()
}

/// The observation carried as structured content.
fn obs(r: &CallToolResult) -> &Value {
    r.structured_content.as_ref().expect("structuredContent")
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool<'a>(tools: &'a [Tool], name: &str) -> &'a Tool {
    tools
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

#[tokio::test]
async fn stdio_lists_tools_with_annotations_and_runs_read_and_grep() {
    let ws = Ws::new();
    ws.write("notes.txt", "alpha\nbeta\n")
        .write("src/lib.rs", "fn main() {\n    todo!()\n}\n");
    let conn = stdio(&ws, &[], Client::headless()).await;
    let info = conn.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "toolgate");

    let tools = conn.list_all_tools().await.unwrap();
    for name in ["read", "ls", "glob", "grep", "write", "edit", "multiedit"] {
        let t = tool(&tools, name);
        assert!(t.description.as_deref().is_some_and(|d| !d.is_empty()));
        assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{name}");
    }
    let read = tool(&tools, "read").annotations.clone().unwrap();
    assert_eq!(read.read_only_hint, Some(true));
    assert_eq!(read.destructive_hint, Some(false));
    let write = tool(&tools, "edit").annotations.clone().unwrap();
    assert_eq!(write.read_only_hint, Some(false));
    assert_eq!(write.destructive_hint, Some(true));
    assert_eq!(write.open_world_hint, Some(false));

    let r = call(&conn, "read", json!({"path": "notes.txt"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(obs(&r)["status"], "ok");
    assert!(obs(&r)["content"].as_str().unwrap().contains("beta"));
    let t = text(&r);
    assert!(t.starts_with("[read ok] "), "{t}");
    assert!(t.contains("beta"));

    let r = call(&conn, "grep", json!({"pattern": "todo"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(obs(&r)["content"], "src/lib.rs:2:    todo!()\n");

    // A tool error is an MCP error result too, with the observation.
    let r = call(&conn, "read", json!({"path": "missing.txt"})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(obs(&r)["status"], "error");
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn without_elicitation_a_call_that_needs_approval_is_denied_with_reason_and_hint() {
    let ws = Ws::new();
    let conn = stdio(&ws, &[], Client::headless()).await;
    let r = call(&conn, "write", json!({"path": "new.txt", "content": "x"})).await;
    assert_eq!(r.is_error, Some(true));
    let o = obs(&r);
    assert_eq!(o["status"], "denied");
    assert_eq!(o["stage"], "ask");
    assert!(o["reason"].as_str().unwrap().contains("needs approval"));
    let t = text(&r);
    assert!(t.starts_with("[write denied at ask]"), "{t}");
    assert!(t.contains("--grant 'write:./'"), "{t}");
    // Said to the model as what to ask its user for (it cannot pass a flag).
    assert!(t.contains("ask the user"), "{t}");
    assert!(!ws.path("new.txt").exists());
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn elicitation_session_answer_allows_the_key_for_the_rest_of_the_connection() {
    let ws = Ws::new();
    let client = Client::answering("session");
    let conn = stdio(&ws, &[], client.clone()).await;
    let r = call(&conn, "write", json!({"path": "a.txt", "content": "one\n"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(ws.read("a.txt"), "one\n");
    let asked = client.asked();
    assert_eq!(asked.len(), 1);
    let (message, schema) = &asked[0];
    assert!(message.contains("tool: write (write risk)"), "{message}");
    assert!(message.contains("key: write:./"), "{message}");
    assert!(message.contains("creates a.txt"), "{message}");
    // The change itself, as a diff of the new file (issue #17), not the JSON input.
    assert!(
        message.contains("--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+one"),
        "{message}"
    );
    assert!(!message
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t'));
    assert_eq!(
        schema["properties"]["decision"]["enum"],
        json!(["once", "session", "project", "deny"])
    );

    // Same key: no second question.
    let r = call(&conn, "write", json!({"path": "b.txt", "content": "two\n"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(client.asked().len(), 1);
    // A session answer is not persisted for the project.
    assert!(!ws.path(".toolgate/grants.toml").exists());
    conn.cancel().await.unwrap();

    // Declining denies.
    let client = Client::answering("decline");
    let conn = stdio(&ws, &[], client.clone()).await;
    let r = call(&conn, "write", json!({"path": "c.txt", "content": "x"})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(obs(&r)["status"], "denied");
    assert!(obs(&r)["reason"]
        .as_str()
        .unwrap()
        .contains("the user denied"));
    assert_eq!(client.asked().len(), 1);
    assert!(!ws.path("c.txt").exists());
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn elicitation_project_answer_is_persisted_and_seen_by_a_new_connection() {
    let ws = Ws::new();
    let first = Client::answering("project");
    let conn = stdio(&ws, &[], first.clone()).await;
    let r = call(&conn, "write", json!({"path": "a.txt", "content": "1"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(first.asked().len(), 1);
    assert!(ws.read(".toolgate/grants.toml").contains("write:./"));
    conn.cancel().await.unwrap();

    let second = Client::answering("deny");
    let conn = stdio(&ws, &[], second.clone()).await;
    let r = call(&conn, "write", json!({"path": "b.txt", "content": "2"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(
        obs(&r)["status"],
        "ok",
        "the project grant decides without asking"
    );
    assert!(second.asked().is_empty());
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn safe_mode_lists_only_read_only_tools() {
    let ws = Ws::new();
    let conn = stdio(&ws, &["--mode", "safe"], Client::headless()).await;
    let tools = conn.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(
        names.contains(&"read") && names.contains(&"grep"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"write") && !names.contains(&"edit"),
        "{names:?}"
    );
    for t in &tools {
        assert_eq!(
            t.annotations.as_ref().unwrap().read_only_hint,
            Some(true),
            "{}",
            t.name
        );
    }
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn list_changed_is_sent_when_the_mode_changes() {
    let ws = Ws::new();
    let gate = Arc::new(ws.gate(false).await);
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = toolgate::mcp::McpConnection::new(gate.clone());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = Client::headless();
    let conn = client.clone().serve(client_io).await.unwrap();
    let before = conn.list_all_tools().await.unwrap();
    assert!(before.iter().any(|t| t.name == "write"));

    gate.set_mode(toolgate::policy::Mode::Safe);
    tokio::time::timeout(Duration::from_secs(10), client.list_changed.notified())
        .await
        .expect("tools/list_changed after the mode changed");
    let after = conn.list_all_tools().await.unwrap();
    assert!(after.iter().all(|t| t.name != "write"));
    assert!(after.iter().any(|t| t.name == "read"));
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_long_call_interrupts_the_guest() {
    let ws = Ws::new();
    let hostile = hostile_component();
    let conn = stdio(
        &ws,
        &["--component", hostile.to_str().unwrap()],
        Client::headless(),
    )
    .await;
    // The default deadline is 30 s; the client gives up after 1 s and sends
    // notifications/cancelled for the abandoned request.
    let started = Instant::now();
    let abandoned = tokio::time::timeout(
        Duration::from_secs(1),
        call(&conn, "test-hostile", json!({"mode": "loop"})),
    )
    .await;
    assert!(abandoned.is_err(), "the loop should still be running");

    // The connection still serves calls.
    let r = call(&conn, "ls", json!({})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));

    // The audit shows the looping call ended as cancelled, long before its deadline.
    let completed = loop {
        let out = std::process::Command::new(crate::common::toolgate_bin())
            .env("TOOLGATE_CACHE_DIR", cache_dir())
            .arg("--workspace")
            .arg(ws.root())
            .args(["audit", "--json", "--tool", "test-hostile"])
            .output()
            .unwrap();
        let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if let Some(e) = events.into_iter().find(|e| e["event"] == "completed") {
            break e;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the cancelled call did not complete"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let detail = &completed["detail"];
    assert_eq!(detail["error_code"], "cancelled", "{completed}");
    assert!(detail["duration_us"].as_u64().unwrap() < 10_000_000);
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn http_serves_calls_and_keeps_sessions_apart() {
    let ws = Ws::new();
    ws.write("notes.txt", "alpha\n");
    let server = http_server(&ws, &[]);

    let a_client = Client::answering("session");
    let a = http(&server, a_client.clone()).await;
    let b_client = Client::answering("deny");
    let b = http(&server, b_client.clone()).await;

    let tools = a.list_all_tools().await.unwrap();
    assert_eq!(
        tool(&tools, "grep")
            .annotations
            .as_ref()
            .unwrap()
            .read_only_hint,
        Some(true)
    );
    let r = call(&a, "read", json!({"path": "notes.txt"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));

    // A grants `write:./` for its session...
    let r = call(&a, "write", json!({"path": "a.txt", "content": "a"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(a_client.asked().len(), 1);
    // ...which B, connected at the same time, does not get: B is asked, and denies.
    let r = call(&b, "write", json!({"path": "b.txt", "content": "b"})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(obs(&r)["status"], "denied");
    assert_eq!(b_client.asked().len(), 1);
    assert!(!ws.path("b.txt").exists());
    // A still is not asked again.
    let r = call(&a, "write", json!({"path": "c.txt", "content": "c"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(a_client.asked().len(), 1);

    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

/// One raw HTTP/1.1 POST to the server with the bearer `token`; returns the status code.
fn raw_post(port: u16, token: &str, host: &str, origin: Option<&str>) -> u16 {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Authorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

#[test]
fn http_refuses_foreign_host_and_origin_headers() {
    let ws = Ws::new();
    let server = http_server(&ws, &[]);
    let port = server.port;
    let t = server.token.as_str();
    assert_eq!(raw_post(port, t, "evil.example", None), 403);
    assert_eq!(
        raw_post(port, t, &format!("evil.example:{port}"), None),
        403
    );
    assert_eq!(raw_post(port, t, "localhost:1", None), 403);
    assert_eq!(
        raw_post(
            port,
            t,
            &format!("127.0.0.1:{port}"),
            Some("http://evil.example")
        ),
        403
    );
    // The same request with the right names is served.
    assert_eq!(raw_post(port, t, &format!("127.0.0.1:{port}"), None), 200);
    assert_eq!(
        raw_post(
            port,
            t,
            &format!("localhost:{port}"),
            Some(&format!("http://localhost:{port}"))
        ),
        200
    );
    // Without the right token, the right names are not enough.
    assert_eq!(
        raw_post(port, &"0".repeat(64), &format!("127.0.0.1:{port}"), None),
        401
    );
}

#[test]
fn http_makes_a_private_token_file_says_where_it_is_and_reuses_it() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let ws = Ws::new();
    let file = ws.user_dirs().state.join("http-token");
    let first = http_server(&ws, &[]);
    let banner = first.banner.join("\n");
    assert!(banner.contains(&file.display().to_string()), "{banner}");
    assert!(banner.contains("Authorization: Bearer <token>"), "{banner}");
    assert!(banner.contains("created now"), "{banner}");
    assert_eq!(first.token.len(), 64, "32 random bytes in hex");
    assert!(first.token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(&ws.user_dirs().state).unwrap().mode() & 0o777,
        0o700
    );
    drop(first);
    let second = http_server(&ws, &[]);
    assert_eq!(second.token, std::fs::read_to_string(&file).unwrap().trim());
    assert!(second.banner.join("\n").contains("the existing file"));
    drop(second);
    // A token file others can read is refused, and the message says how to fix it.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = toolgate_command(&ws)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
}

#[test]
fn http_takes_its_tokens_from_token_file() {
    use std::os::unix::fs::OpenOptionsExt as _;
    let ws = Ws::new();
    let path = ws.user_root().join("my-tokens");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    let (one, two) = ("1".repeat(40), "2".repeat(40));
    writeln!(f, "# one token a line\n{one}\n{two}").unwrap();
    drop(f);
    let server = http_server(&ws, &["--token-file", path.to_str().unwrap()]);
    let host = format!("127.0.0.1:{}", server.port);
    assert_eq!(raw_post(server.port, &one, &host, None), 200);
    assert_eq!(raw_post(server.port, &two, &host, None), 200);
    assert_eq!(raw_post(server.port, &"3".repeat(40), &host, None), 401);
    assert!(!ws.user_dirs().state.join("http-token").exists());
}

#[test]
fn http_refuses_a_non_loopback_bind_without_allow_remote() {
    let ws = Ws::new();
    let out = toolgate_command(&ws)
        .args(["serve", "--http", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(70));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(stderr.contains("--allow-remote"), "{stderr}");
}

#[test]
fn serve_over_stdio_speaks_json_rpc_lines() {
    // A raw client: initialize, initialized, tools/list, over the process's stdio.
    let ws = Ws::new();
    let mut child = std::process::Command::new(crate::common::toolgate_bin())
        .env("TOOLGATE_CACHE_DIR", cache_dir())
        .arg("--workspace")
        .arg(ws.root())
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"raw","version":"1"}}}}}}"#).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let init: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"tools/list"}}"#).unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    let list: Value = serde_json::from_str(&line).unwrap();
    let read = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "read")
        .unwrap()
        .clone();
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    assert_eq!(read["inputSchema"]["type"], "object");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[tokio::test]
async fn cancelling_a_shell_call_kills_its_process_group() {
    let ws = Ws::new();
    let conn = stdio(&ws, &["--grant", "shell:sleep **"], Client::headless()).await;
    // A distinctive duration so the check below finds only this test's process.
    let marker = "31.4159";
    let abandoned = tokio::time::timeout(
        Duration::from_secs(2),
        call(
            &conn,
            "shell",
            json!({"command": format!("sleep {marker}")}),
        ),
    )
    .await;
    assert!(abandoned.is_err(), "the sleep should still be running");
    let started = Instant::now();
    loop {
        let alive = std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {marker}")])
            .output()
            .unwrap()
            .status
            .success();
        if !alive {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the cancelled command is still running"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The connection still serves calls.
    let r = call(&conn, "ls", json!({})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn background_jobs_end_with_their_connection() {
    let ws = Ws::new();
    let conn = stdio(&ws, &["--grant", "shell:sleep **"], Client::headless()).await;
    let marker = "27.1828";
    let r = call(
        &conn,
        "shell",
        json!({"command": format!("sleep {marker}"), "run_in_background": true}),
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let alive = || {
        std::process::Command::new("pgrep")
            .args(["-f", &format!("sleep {marker}")])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(alive(), "the background job should be running");
    conn.cancel().await.unwrap();
    let started = Instant::now();
    while alive() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the job outlived its connection"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn stdio_answers_a_malformed_line_with_a_parse_error_and_keeps_serving() {
    let ws = Ws::new();
    let mut raw = RawStdio::start(&ws, &[]);
    raw.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list""#);
    let err = raw.answer_to(&Value::Null);
    assert_eq!(err["jsonrpc"], "2.0");
    assert_eq!(err["error"]["code"], -32700, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Parse error"),
        "{err}"
    );
    raw.send("not json at all");
    assert_eq!(raw.answer_to(&Value::Null)["error"]["code"], -32700);
    // Valid JSON that is no JSON-RPC message: Invalid Request, with its id.
    raw.send(r#"{"id":9,"hello":"world"}"#);
    assert_eq!(raw.answer_to(&json!(9))["error"]["code"], -32600);
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let list = raw.answer_to(&json!(2));
    assert!(list["result"]["tools"].as_array().unwrap().len() > 1);
}

#[test]
fn stdio_answers_an_oversized_line_with_an_error_carrying_its_id() {
    let ws = Ws::new();
    let mut raw = RawStdio::start(&ws, &[]);
    // 17 MiB, over the 16 MiB cap; the top-level id comes first, a nested "id" later.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{{"name":"read","arguments":{{"id":3,"path":"{}"}}}}}}"#,
        "a".repeat(17 << 20)
    );
    let mut stdin = raw.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        stdin.write_all(huge.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        // One with the id late in the line: the start holds no id, so the answer's is null.
        let late = format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"read","arguments":{{"path":"{}"}}}},"id":8}}"#,
            "b".repeat(17 << 20)
        );
        stdin.write_all(late.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        stdin
    });
    let err = raw.answer_to(&json!("big-1"));
    assert_eq!(err["error"]["code"], -32600, "{err}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("MiB"),
        "the message says what the cap is: {err}"
    );
    let err = raw.answer_to(&Value::Null);
    assert_eq!(err["error"]["code"], -32600, "{err}");
    raw.stdin = Some(writer.join().unwrap());
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#);
    assert!(raw.answer_to(&json!(4))["result"]["tools"].is_array());
}
