//! MCP 2026-07-28 beside 2025-11-25 (issue #15): `server/discover`, stateless HTTP requests
//! in a conversation, approvals as `input_required` rounds with a signed request state (and
//! the attacks on it), `DELETE` answered 204; rmcp's client on both revisions, and the
//! official MCP Python SDK in `auto` and `legacy` modes.

use crate::common::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationCapability, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData as McpError};
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A client that declares elicitation and answers every approval with `answer`.
#[derive(Clone)]
struct Client {
    answer: &'static str,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Client {
    fn answering(answer: &'static str) -> Self {
        Client {
            answer,
            asked: Arc::default(),
        }
    }

    fn asked(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.capabilities.elicitation = Some(ElicitationCapability::default());
        config
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        self.asked.lock().unwrap().push(message);
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({ "decision": self.answer })))
    }
}

type Conn = RunningService<RoleClient, Client>;

fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

fn serve_command(ws: &Ws) -> tokio::process::Command {
    let std = toolgate_command(ws);
    let mut cmd = tokio::process::Command::from(std);
    cmd.arg("serve");
    cmd
}

async fn stdio(ws: &Ws, client: Client, lifecycle: ClientLifecycleMode) -> Conn {
    let (transport, _) = TokioChildProcess::builder(serve_command(ws))
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    client
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap()
}

async fn call(conn: &Conn, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    conn.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap()
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn negotiated(conn: &Conn) -> String {
    conn.peer_info().unwrap().protocol_version.to_string()
}

/// A `toolgate serve --http` process on `ws` with the token file `tokens` (and `env`), its
/// port; killed when dropped.
struct Server {
    child: std::process::Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(ws: &Ws, tokens: &Path, env: &[(&str, &Path)]) -> Server {
        let mut cmd = toolgate_command(ws);
        cmd.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
            .arg(tokens)
            .env_remove("TOOLGATE_MCP_STATE_KEY_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
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
        let port = url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .unwrap();
        Server { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// A private file with `lines`.
fn private_file(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// One raw HTTP/1.1 request; the status and the body.
fn raw(port: u16, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    write!(stream, "{head}\r\n{body}").unwrap();
    let mut all = Vec::new();
    stream.read_to_end(&mut all).unwrap();
    let all = String::from_utf8_lossy(&all).into_owned();
    let status = all[9..12].parse().unwrap();
    let body = all
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A stateless 2026-07-28 client speaking raw JSON-RPC to one or more servers.
struct Raw<'a> {
    token: &'a str,
    conversation: Option<&'a str>,
}

impl Raw<'_> {
    /// `tools/call` of `tool` with `args` on `server`, with `extra` params; the JSON-RPC answer.
    fn call(&self, server: &Server, tool: &str, args: Value, extra: Value) -> Value {
        let mut params = json!({
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            },
            "name": tool,
            "arguments": args,
        });
        if let Value::Object(extra) = extra {
            params.as_object_mut().unwrap().extend(extra);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        let auth = format!("Bearer {}", self.token);
        let mut headers = vec![
            ("Authorization", auth.as_str()),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ];
        if let Some(c) = self.conversation {
            headers.push(("Toolgate-Conversation", c));
        }
        let (status, body) = raw(server.port, "POST", &headers, &body.to_string());
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// Round 1 of an approval: the `input_required` result's request state.
    fn ask(&self, server: &Server, tool: &str, args: Value) -> String {
        let r = self.call(server, tool, args, json!({}));
        let result = &r["result"];
        assert_eq!(result["resultType"], "input_required", "{r}");
        let request = &result["inputRequests"]["approval"];
        assert_eq!(request["method"], "elicitation/create", "{r}");
        assert!(request["params"]["message"]
            .as_str()
            .unwrap()
            .contains("allow this call?"));
        result["requestState"].as_str().unwrap().to_string()
    }

    /// Round 2: the retry with `decision` and `state`.
    fn answer(
        &self,
        server: &Server,
        tool: &str,
        args: Value,
        state: &str,
        decision: &str,
    ) -> Value {
        self.call(
            server,
            tool,
            args,
            json!({
                "requestState": state,
                "inputResponses": {"approval": {"action": "accept", "content": {"decision": decision}}},
            }),
        )
    }
}

fn ok(r: &Value) -> &Value {
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
    &r["result"]["structuredContent"]
}

fn refused(r: &Value, says: &str) {
    let message = r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not refused: {r}"));
    assert!(message.contains(says), "{says:?} not in {message}");
}

#[tokio::test]
async fn rmcp_over_stdio_approves_through_input_required_on_2026_and_elicitation_on_2025() {
    let ws = Ws::new();
    // 2026-07-28: discover, then the approval comes back as input_required, which rmcp
    // answers through the same elicitation handler and retries.
    let client = Client::answering("session");
    let conn = stdio(&ws, client.clone(), modern()).await;
    assert_eq!(negotiated(&conn), "2026-07-28");
    let r = call(&conn, "write", json!({"path": "a.txt", "content": "one\n"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(ws.read("a.txt"), "one\n");
    assert_eq!(client.asked(), 1);
    // The session answer holds for the connection's conversation.
    let r = call(&conn, "write", json!({"path": "b.txt", "content": "two\n"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(client.asked(), 1, "not asked again");
    conn.cancel().await.unwrap();

    // 2025-11-25: initialize, approvals through elicitation/create.
    let client = Client::answering("once");
    let conn = stdio(&ws, client.clone(), ClientLifecycleMode::Initialize).await;
    assert_eq!(negotiated(&conn), "2025-11-25");
    let r = call(
        &conn,
        "write",
        json!({"path": "c.txt", "content": "three\n"}),
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(ws.read("c.txt"), "three\n");
    assert_eq!(client.asked(), 1);
    conn.cancel().await.unwrap();

    // Auto mode on a 2026 server: discover wins.
    let client = Client::answering("once");
    let conn = stdio(
        &ws,
        client.clone(),
        ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    )
    .await;
    assert_eq!(negotiated(&conn), "2026-07-28");
    conn.cancel().await.unwrap();
}

#[tokio::test]
async fn rmcp_over_http_approves_a_write_on_both_revisions() {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let ws = Ws::new();
    let dir = tempfile::tempdir().unwrap();
    let token = "t".repeat(64);
    let server = Server::start(
        &ws,
        &private_file(dir.path(), "tokens", std::slice::from_ref(&token)),
        &[],
    );
    for (lifecycle, version, file) in [
        (modern(), "2026-07-28", "m.txt"),
        (ClientLifecycleMode::Initialize, "2025-11-25", "l.txt"),
    ] {
        let config =
            StreamableHttpClientTransportConfig::with_uri(server.url()).auth_header(token.clone());
        let client = Client::answering("once");
        let conn = client
            .clone()
            .serve_with_lifecycle(
                StreamableHttpClientTransport::from_config(config),
                lifecycle,
            )
            .await
            .unwrap();
        assert_eq!(negotiated(&conn), version);
        let r = call(&conn, "write", json!({"path": file, "content": version})).await;
        assert_eq!(r.is_error, Some(false), "{version}: {}", text(&r));
        assert_eq!(ws.read(file), version);
        assert_eq!(client.asked(), 1, "{version}");
        conn.cancel().await.unwrap();
    }
}

/// A workspace with `notes.txt` ("alpha"), one token and one signing key file, for servers
/// that serve one conversation together.
struct Fleet {
    ws: Ws,
    _dir: tempfile::TempDir,
    token: String,
    tokens: PathBuf,
    key: PathBuf,
}

impl Fleet {
    fn new() -> Fleet {
        let ws = Ws::new();
        ws.write("notes.txt", "alpha\n");
        let dir = tempfile::tempdir().unwrap();
        let token = "a".repeat(64);
        let tokens = private_file(dir.path(), "tokens", std::slice::from_ref(&token));
        let key = private_file(dir.path(), "state-key", &["k".repeat(64)]);
        Fleet {
            ws,
            _dir: dir,
            token,
            tokens,
            key,
        }
    }

    fn env(&self) -> [(&'static str, &Path); 1] {
        [("TOOLGATE_MCP_STATE_KEY_FILE", self.key.as_path())]
    }
}

#[test]
fn http_2026_needs_no_session_and_a_conversation_spans_server_processes() {
    let f = Fleet::new();
    let (ws, token, tokens) = (&f.ws, &f.token, &f.tokens);
    let env = f.env();
    let one = Server::start(ws, tokens, &env);
    let two = Server::start(ws, tokens, &env);
    let c1 = Raw {
        token,
        conversation: Some("c1"),
    };

    // server/discover names both revisions.
    let body = json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{}}}});
    let auth = format!("Bearer {token}");
    let (status, text) = raw(
        one.port,
        "POST",
        &[
            ("Authorization", &auth),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "server/discover"),
        ],
        &body.to_string(),
    );
    assert_eq!(status, 200, "{text}");
    let d: Value = serde_json::from_str(&text).unwrap();
    let versions = d["result"]["supportedVersions"].as_array().unwrap();
    assert!(
        versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2025-11-25")),
        "{d}"
    );

    // Read through one process, edit through the other: the read record is the
    // conversation's, not a connection's. The approval asked by two is answered on one.
    ok(&c1.call(&one, "read", json!({"path": "notes.txt"}), json!({})));
    // The read is in the database when its answer comes, not a moment later: a client may
    // send the next request to the other process at once.
    let db = rusqlite::Connection::open(ws.path(".toolgate/state.db")).unwrap();
    let stored: i64 = db
        .query_row(
            "SELECT count(*) FROM reads WHERE path LIKE '%/notes.txt'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        stored, 1,
        "the read's answer came before its record was stored"
    );
    let args = json!({"path": "notes.txt", "old_string": "alpha", "new_string": "beta"});
    let state = c1.ask(&two, "edit", args.clone());
    ok(&c1.answer(&one, "edit", args, &state, "once"));
    assert_eq!(ws.read("notes.txt"), "beta\n");
    // A session answer given through one process holds on the other: the grant is the
    // conversation's.
    let n1 = json!({"path": "n1.txt", "content": "x"});
    let state = c1.ask(&one, "write", n1.clone());
    ok(&c1.answer(&two, "write", n1, &state, "session"));
    ok(&c1.call(
        &one,
        "write",
        json!({"path": "n2.txt", "content": "y"}),
        json!({}),
    ));
    assert_eq!(ws.read("n2.txt"), "y");

    // Another conversation has neither the read record nor the grant: it is asked.
    let c2 = Raw {
        token,
        conversation: Some("c2"),
    };
    c2.ask(&one, "write", json!({"path": "n3.txt", "content": "x"}));
    assert!(!ws.path("n3.txt").exists());
}

/// A server that was alone keeps its read records for its writer; a second process that
/// starts later comes in only once they are in the database, so the conversation goes on
/// there at once.
#[test]
fn a_conversation_goes_on_through_a_server_started_after_its_read() {
    let f = Fleet::new();
    let (ws, token, tokens) = (&f.ws, &f.token, &f.tokens);
    let env = f.env();
    let one = Server::start(ws, tokens, &env);
    let c = Raw {
        token,
        conversation: Some("late"),
    };
    for _ in 0..3 {
        ok(&c.call(&one, "read", json!({"path": "notes.txt"}), json!({})));
    }
    let two = Server::start(ws, tokens, &env);
    let args = json!({"path": "notes.txt", "old_string": "alpha", "new_string": "beta"});
    let state = c.ask(&two, "edit", args.clone());
    ok(&c.answer(&two, "edit", args, &state, "once"));
    assert_eq!(ws.read("notes.txt"), "beta\n");
    // Both now commit a call's reads before it answers: read on two, edit on one.
    ok(&c.call(&two, "read", json!({"path": "notes.txt"}), json!({})));
    let args = json!({"path": "notes.txt", "old_string": "beta", "new_string": "gamma"});
    let state = c.ask(&one, "edit", args.clone());
    ok(&c.answer(&one, "edit", args, &state, "once"));
    assert_eq!(ws.read("notes.txt"), "gamma\n");
}

#[test]
fn forged_replayed_foreign_and_mismatched_approval_states_are_refused() {
    let ws = Ws::new();
    let dir = tempfile::tempdir().unwrap();
    let (mine, theirs) = ("m".repeat(64), "o".repeat(64));
    let tokens = private_file(dir.path(), "tokens", &[mine.clone(), theirs.clone()]);
    let server = Server::start(&ws, &tokens, &[]);
    // Another process without a shared key file has a key of its own.
    let stranger = Server::start(&ws, &tokens, &[]);
    let me = Raw {
        token: &mine,
        conversation: Some("work"),
    };
    let args = json!({"path": "x.txt", "content": "approved\n"});
    let state = me.ask(&server, "write", args.clone());

    // The same approval for other content, or for another tool.
    let other = json!({"path": "x.txt", "content": "evil\n"});
    refused(
        &me.answer(&server, "write", other, &state, "once"),
        "another tool or other arguments",
    );
    refused(
        &me.answer(
            &server,
            "edit",
            json!({"path": "x.txt", "old_string": "a", "new_string": "b"}),
            &state,
            "once",
        ),
        "another tool or other arguments",
    );
    assert!(!ws.path("x.txt").exists());
    // A state altered by the client: the choices widened to `project`, tag kept.
    let (payload, tag) = state.trim_start_matches("tg1.").split_once('.').unwrap();
    let mut forged: Value = serde_json::from_slice(&hex::decode(payload).unwrap()).unwrap();
    forged["choices"] = json!(["once", "session", "project", "deny"]);
    forged["key"] = json!("write:./");
    let forged = format!("tg1.{}.{tag}", hex::encode(forged.to_string()));
    refused(
        &me.answer(&server, "write", args.clone(), &forged, "project"),
        "not made by this toolgate server",
    );
    refused(
        &me.answer(&server, "write", args.clone(), "made-up", "once"),
        "not made by this toolgate server",
    );
    // Another process's key.
    refused(
        &me.answer(&stranger, "write", args.clone(), &state, "once"),
        "not made by this toolgate server",
    );
    // Another conversation of the same token, and the same conversation name with another token.
    let elsewhere = Raw {
        token: &mine,
        conversation: Some("other"),
    };
    refused(
        &elsewhere.answer(&server, "write", args.clone(), &state, "once"),
        "another conversation",
    );
    let intruder = Raw {
        token: &theirs,
        conversation: Some("work"),
    };
    refused(
        &intruder.answer(&server, "write", args.clone(), &state, "once"),
        "another conversation",
    );
    // An answer that was not offered denies.
    let r = me.answer(&server, "write", args.clone(), &state, "always");
    assert_eq!(r["result"]["structuredContent"]["status"], "denied", "{r}");
    assert!(!ws.path("x.txt").exists());
    // That used the state: it is refused from now on, even with a good answer.
    refused(
        &me.answer(&server, "write", args.clone(), &state, "once"),
        "already used",
    );
    assert!(!ws.path("x.txt").exists());

    // A fresh state, used properly once, then replayed.
    let state = me.ask(&server, "write", args.clone());
    ok(&me.answer(&server, "write", args.clone(), &state, "once"));
    assert_eq!(ws.read("x.txt"), "approved\n");
    std::fs::remove_file(ws.path("x.txt")).unwrap();
    refused(
        &me.answer(&server, "write", args.clone(), &state, "once"),
        "already used",
    );
    assert!(!ws.path("x.txt").exists());
}

/// Behind a balancer every process has the same key: an approval given once must run once in
/// the whole fleet, not once per process.
#[test]
fn an_approval_used_through_one_process_is_refused_by_another() {
    let ws = Ws::new();
    let dir = tempfile::tempdir().unwrap();
    let token = "r".repeat(64);
    let tokens = private_file(dir.path(), "tokens", std::slice::from_ref(&token));
    let key = private_file(dir.path(), "state-key", &["q".repeat(64)]);
    let env = [("TOOLGATE_MCP_STATE_KEY_FILE", key.as_path())];
    let one = Server::start(&ws, &tokens, &env);
    let two = Server::start(&ws, &tokens, &env);
    let me = Raw {
        token: &token,
        conversation: Some("fleet"),
    };
    let args = json!({"path": "once.txt", "content": "approved once\n"});
    let state = me.ask(&one, "write", args.clone());
    ok(&me.answer(&one, "write", args.clone(), &state, "once"));
    assert_eq!(ws.read("once.txt"), "approved once\n");
    std::fs::remove_file(ws.path("once.txt")).unwrap();
    // The same round 2 sent to the other process: same key, same conversation, same call.
    refused(
        &me.answer(&two, "write", args.clone(), &state, "once"),
        "already used",
    );
    assert!(!ws.path("once.txt").exists(), "a once approval ran twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_approval_state_is_refused() {
    use toolgate::gate::{Gate, GateOptions};
    let ws = Ws::new();
    let dir = tempfile::tempdir().unwrap();
    let token = "e".repeat(64);
    let tokens = private_file(dir.path(), "tokens", std::slice::from_ref(&token));
    let gate = Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        user_dirs: Some(ws.user_dirs()),
        approval_expiry: Some(Duration::from_secs(1)),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut options = toolgate::mcp::http::HttpOptions::new("127.0.0.1:0".parse().unwrap());
    options.token_file = Some(tokens);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let serving = tokio::spawn(toolgate::mcp::http::serve_http(
        Arc::new(gate),
        options,
        move |up| {
            let _ = tx.send(up.addr.port());
        },
    ));
    let port = rx.await.unwrap();
    // A Server with no child: only its port is used.
    let server = Server {
        child: std::process::Command::new("true").spawn().unwrap(),
        port,
    };
    let me = Raw {
        token: &token,
        conversation: None,
    };
    let args = json!({"path": "late.txt", "content": "x"});
    let state = tokio::task::block_in_place(|| me.ask(&server, "write", args.clone()));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let r = tokio::task::block_in_place(|| me.answer(&server, "write", args, &state, "once"));
    refused(&r, "has expired");
    assert!(!ws.path("late.txt").exists());
    serving.abort();
}

#[test]
fn delete_of_a_session_answers_204() {
    let ws = Ws::new();
    let dir = tempfile::tempdir().unwrap();
    let token = "d".repeat(64);
    let server = Server::start(
        &ws,
        &private_file(dir.path(), "tokens", std::slice::from_ref(&token)),
        &[],
    );
    let auth = format!("Bearer {token}");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    write!(stream, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{init}", server.port, init.len()).unwrap();
    let mut all = String::new();
    let _ = stream.read_to_string(&mut all);
    let id = all
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id: ")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id in {all}"));
    let (status, _) = raw(
        server.port,
        "DELETE",
        &[
            ("Authorization", &auth),
            ("Mcp-Session-Id", &id),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        "",
    );
    assert_eq!(status, 204);
    // Ended: the id is unknown now.
    let (status, _) = raw(
        server.port,
        "DELETE",
        &[
            ("Authorization", &auth),
            ("Mcp-Session-Id", &id),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        "",
    );
    assert_eq!(status, 404);
}

/// The official MCP Python SDK (2.x, from PyPI, installed into a venv under target/ by
/// tests/mcp_python/run.sh): `mode="auto"` and `mode="legacy"`, over stdio and HTTP, each an
/// approval round trip. Skipped, saying what is missing, when Python or the package cannot be
/// had.
#[test]
fn python_sdk_auto_and_legacy_modes_approve_a_write() {
    let ws = Ws::new();
    let dir = tempfile::tempdir().unwrap();
    let token = "p".repeat(64);
    let server = Server::start(
        &ws,
        &private_file(dir.path(), "tokens", std::slice::from_ref(&token)),
        &[],
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp_python/run.sh");
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../mcp-python/venv");
    for (mode, transport) in [
        ("auto", "stdio"),
        ("legacy", "stdio"),
        ("auto", "http"),
        ("legacy", "http"),
    ] {
        let file = format!("py-{mode}-{transport}.txt");
        let mut cmd = std::process::Command::new(&script);
        cmd.env("TG_MCP_PYTHON_VENV", &venv).args(["--mode", mode]);
        let probe = toolgate_command(&ws);
        for (k, v) in probe.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if transport == "stdio" {
            cmd.arg("--stdio")
                .arg(crate::common::toolgate_bin())
                .arg(ws.root());
        } else {
            cmd.arg("--http").arg(server.url()).arg(&token);
        }
        let out = cmd.arg(&file).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(3) {
            let why = stderr
                .lines()
                .find(|l| l.starts_with("SKIP:"))
                .unwrap_or("SKIP: unknown");
            eprintln!("python_sdk test skipped: {why}");
            return;
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode} {transport}: {stdout}\n{stderr}"
        );
        let line: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        let want = if mode == "auto" {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(line["protocol"], want, "{line}");
        assert_eq!(line["asked"], 1, "{line}");
        assert_eq!(line["warnings"], json!([]), "{line}");
        assert_eq!(ws.read(&file), "from python\n");
    }
}
