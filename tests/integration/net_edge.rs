//! Attacks on untrusted workspaces (issue #13): net_edge.
//!
//! - SSRF through every spelling of a loopback or metadata address (IPv4 inside IPv6, 6to4,
//!   Teredo, NAT64, decimal/octal/hex IPv4), each refused before any connection is made;
//!   `allow_private` entries bound to a port, re-judged at every redirect hop.
//! - `serve --http` needs a bearer token, binds sessions to the token that made them, drops
//!   clients that send headers slowly, caps open connections, and keeps serving one session
//!   while another's call is stuck.
//! - The protocol edge: a malformed body, a batch and a wrong Content-Type get JSON-RPC errors;
//!   live sessions are capped and expire when idle.

use crate::common::*;
use crate::plugins::serve_http;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate::mcp::http::HttpOptions;
use toolgate::policy::{Mode, PolicySource};
use toolgate::{Gate, GateOptions, Status};

// ---------------------------------------------------------------------------------------------
// SSRF
// ---------------------------------------------------------------------------------------------

/// A loopback listener that counts the connections it accepts (and answers each `200 hello`,
/// so a connection that should not have happened also shows as a success).
fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    (port, accepted)
}

/// A gate over `ws` with `policy` given as the user's own policy file (outside the workspace).
async fn net_gate(ws: &Ws, policy: &str, grants: &[&str], mode: Option<Mode>) -> Gate {
    let file = ws.user_root().join("net-edge-policy.toml");
    std::fs::write(&file, policy).unwrap();
    Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        policy: Some(PolicySource::File(file)),
        mode,
        grants: grants.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    })
    .await
    .unwrap()
}

fn refusal(o: &toolgate::Observation) -> String {
    o.data["network_refused"][0]
        .as_str()
        .unwrap_or_else(|| panic!("no refusal recorded: {o:#?}"))
        .to_string()
}

#[tokio::test]
async fn every_address_form_of_loopback_and_metadata_is_refused_before_connecting() {
    let (port, accepted) = counting_listener();
    let ws = Ws::new();
    // The policy lets the plain loopback address through on this port, and the mode approves
    // every `fetch:HOST`: only the address check stands between a spelling and the listener.
    let g = net_gate(
        &ws,
        &format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\n"),
        &[],
        Some(Mode::AllowAll),
    )
    .await;
    let forms = [
        // IPv4 inside IPv6.
        ("IPv4-mapped", "[::ffff:127.0.0.1]", "::ffff:127.0.0.1"),
        ("IPv4-translated", "[::ffff:0:127.0.0.1]", "::ffff:0:7f00:1"),
        ("IPv4-compatible", "[::127.0.0.1]", "::7f00:1"),
        ("6to4", "[2002:7f00:1::]", "2002:7f00:1::"),
        (
            "Teredo client",
            "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
        ),
        ("NAT64", "[64:ff9b::127.0.0.1]", "64:ff9b::7f00:1"),
        (
            "NAT64 local-use",
            "[64:ff9b:1::7f00:1]",
            "64:ff9b:1::7f00:1",
        ),
        // Cloud metadata, the same ways.
        (
            "metadata IPv4-mapped",
            "[::ffff:169.254.169.254]",
            "::ffff:169.254.169.254",
        ),
        ("metadata 6to4", "[2002:a9fe:a9fe::]", "2002:a9fe:a9fe::"),
        (
            "metadata NAT64",
            "[64:ff9b::a9fe:a9fe]",
            "64:ff9b::a9fe:a9fe",
        ),
        // IPv4 shorthands that resolvers and URL parsers read as 127.0.0.1.
        ("decimal", "2130706433", "127.0.0.1"),
        ("hex dotted", "0x7f.1", "127.0.0.1"),
        ("octal", "0177.0.0.1", "127.0.0.1"),
        ("hex", "0x7f000001", "127.0.0.1"),
        ("short", "127.1", "127.0.0.1"),
        ("trailing dot", "127.0.0.1.", "127.0.0.1"),
    ];
    for (form, host, address) in forms {
        let url = format!("http://{host}:{port}/");
        let o = call(&g, "fetch", json!({ "url": url })).await;
        assert_eq!(o.status, Status::Error, "{form} {url}: {o:#?}");
        assert_eq!(
            code(&o),
            "destination-ip-prohibited",
            "{form} {url}: {o:#?}"
        );
        let why = refusal(&o);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        assert!(
            why.contains(bare),
            "{form}: the refusal names the host: {why}"
        );
        assert!(
            why.contains(address),
            "{form}: the refusal names the address: {why}"
        );
        assert!(
            why.contains("allow_private"),
            "{form}: the refusal names the policy key: {why}"
        );
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "a refused address was connected to"
    );
    // The plain spelling, named by the policy with this port, does connect: the listener works.
    let o = ok(
        &g,
        "fetch",
        json!({ "url": format!("http://127.0.0.1:{port}/") }),
    )
    .await;
    assert_eq!(o.content, "hello");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn allow_private_names_a_port_and_a_redirect_to_another_port_is_refused() {
    let port = serve_http();
    let (other, accepted) = counting_listener();
    let ws = Ws::new();
    let g = net_gate(
        &ws,
        &format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\n"),
        &["fetch:127.0.0.1"],
        None,
    )
    .await;
    let o = ok(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    assert_eq!(o.content, "hello");
    // Same host, same `fetch:127.0.0.1` key, another port: the hop is judged again and refused.
    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/to?http://127.0.0.1:{other}/ok")}),
    )
    .await;
    assert_eq!(code(&o), "destination-ip-prohibited", "{o:#?}");
    let why = refusal(&o);
    assert!(why.contains(&format!("127.0.0.1:{other}")), "{why}");
    assert!(why.contains("allow_private"), "{why}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the redirect was followed"
    );

    // An entry without a port means the scheme's default port only (80 for http).
    let ws = Ws::new();
    let g = net_gate(
        &ws,
        "[network]\nallow_private = [\"127.0.0.1\"]\n",
        &["fetch:127.0.0.1"],
        None,
    )
    .await;
    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{other}/ok")}),
    )
    .await;
    assert_eq!(code(&o), "destination-ip-prohibited", "{o:#?}");
    assert!(
        refusal(&o).contains(&format!("\"127.0.0.1:{other}\"")),
        "the refusal says what to add: {o:#?}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
}

// ---------------------------------------------------------------------------------------------
// serve --http
// ---------------------------------------------------------------------------------------------

fn token(c: char) -> String {
    c.to_string().repeat(64)
}

/// A token file with `tokens`, one a line, mode 0600, in the test's user directories.
fn token_file(ws: &Ws, tokens: &[&str]) -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = ws.user_root().join("tokens");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    for t in tokens {
        writeln!(f, "{t}").unwrap();
    }
    path
}

/// The library's HTTP server over `gate`, on a loopback port, in this runtime.
async fn start(gate: Gate, tweak: impl FnOnce(&mut HttpOptions)) -> SocketAddr {
    let mut options = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    tweak(&mut options);
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let result = toolgate::mcp::http::serve_http(Arc::new(gate), options, move |up| {
            let _ = tx.send(up.addr);
        })
        .await;
        if let Err(e) = result {
            eprintln!("serve_http: {e:#}");
        }
    });
    rx.await.expect("the server did not start")
}

/// A raw HTTP/1.1 response: status, headers (lower-case names), body (when it has a length).
struct Raw {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// One POST to /mcp with `headers` and `body`; reads the head, and the body when it has a
/// Content-Length.
fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> Raw {
    request(addr, "POST", "application/json", headers, body)
}

/// One request to /mcp with `method` and `content_type`, as [`post`].
fn request(
    addr: SocketAddr,
    method: &str,
    content_type: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Raw {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    read_response(&mut stream)
}

/// A connection that made one authenticated request and stays open (keep-alive).
fn keep_alive(addr: SocketAddr, auth: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: keep-alive\r\nAuthorization: {auth}\r\n\r\n{INITIALIZE}",
        INITIALIZE.len()
    );
    stream.write_all(req.as_bytes()).unwrap();
    let r = read_response(&mut stream);
    assert_eq!(r.status, 200, "{}", r.body);
    stream
}

fn read_response(stream: &mut TcpStream) -> Raw {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).unwrap();
        assert_eq!(n, 1, "the connection closed before the response head ended");
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = match headers.get("content-length") {
        Some(n) => {
            let mut buf = vec![0u8; n.parse().unwrap()];
            stream.read_exact(&mut buf).unwrap();
            String::from_utf8_lossy(&buf).into_owned()
        }
        None => String::new(),
    };
    Raw {
        status,
        headers,
        body,
    }
}

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_without_the_token_or_with_a_wrong_one_is_401() {
    let ws = Ws::new();
    let good = token('a');
    let file = token_file(&ws, &[&good]);
    let addr = start(ws.gate(false).await, |o| o.token_file = Some(file)).await;
    let (good2, wrong, basic) = (bearer(&good), bearer(&token('b')), format!("Basic {good}"));
    let cases: [(&str, &[(&str, &str)]); 4] = [
        ("no Authorization header", &[]),
        ("a wrong token", &[("Authorization", &wrong)]),
        ("another scheme", &[("Authorization", &basic)]),
        (
            "the token with a byte missing",
            &[("Authorization", &good2[..good2.len() - 1])],
        ),
    ];
    for (what, headers) in cases {
        let r = tokio::task::block_in_place(|| post(addr, headers, INITIALIZE));
        assert_eq!(r.status, 401, "{what}");
        let body: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(body["jsonrpc"], "2.0", "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("Authorization: Bearer <token>"),
            "{what}: the body says what to send: {message}"
        );
        assert_eq!(
            r.headers.get("www-authenticate").map(String::as_str),
            Some("Bearer realm=\"toolgate\""),
            "{what}"
        );
    }
    let r = tokio::task::block_in_place(|| post(addr, &[("Authorization", &good2)], INITIALIZE));
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_id_presented_with_another_token_is_refused() {
    let ws = Ws::new();
    let (mine, theirs) = (token('m'), token('t'));
    let file = token_file(&ws, &[&mine, &theirs]);
    let addr = start(ws.gate(false).await, |o| o.token_file = Some(file)).await;
    let (mine, theirs) = (bearer(&mine), bearer(&theirs));
    tokio::task::block_in_place(|| {
        let r = post(addr, &[("Authorization", &mine)], INITIALIZE);
        assert_eq!(r.status, 200);
        let session = r.headers["mcp-session-id"].clone();
        // 128 random bits, in hex.
        assert_eq!(session.len(), 32, "{session}");
        assert!(session.bytes().all(|b| b.is_ascii_hexdigit()), "{session}");
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
        let with = |auth: &str, session: &str, body: &str| {
            post(
                addr,
                &[
                    ("Authorization", auth),
                    ("Mcp-Session-Id", session),
                    ("Mcp-Protocol-Version", "2025-06-18"),
                ],
                body,
            )
        };
        assert_eq!(with(&mine, &session, initialized).status, 202);
        // The other token, however valid, does not get this session: 404, as for no session.
        let r = with(&theirs, &session, list);
        assert_eq!(r.status, 404, "{}", r.body);
        let unknown = with(&mine, &"0".repeat(32), list);
        assert_eq!(unknown.status, 404);
        assert_eq!(
            r.body, unknown.body,
            "the refusal does not tell the session exists"
        );
        // Its own token still does.
        assert_eq!(with(&mine, &session, list).status, 200);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_headers_slowly_is_dropped() {
    let ws = Ws::new();
    let good = token('s');
    let file = token_file(&ws, &[&good]);
    let addr = start(ws.gate(false).await, |o| {
        o.token_file = Some(file);
        o.header_timeout = Duration::from_millis(500);
    })
    .await;
    tokio::task::block_in_place(|| {
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        slow.write_all(format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\n").as_bytes())
            .unwrap();
        // One header byte every 100 ms: never a whole head. The server must hang up.
        let started = Instant::now();
        let dropped = loop {
            let mut buf = [0u8; 256];
            match slow.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => break true,
            }
            if slow.write_all(b"X").is_err() {
                break true;
            }
            if started.elapsed() > Duration::from_secs(8) {
                break false;
            }
        };
        assert!(
            dropped,
            "a client trickling its headers kept the connection"
        );
        // The server still answers others.
        let r = post(addr, &[("Authorization", &bearer(&good))], INITIALIZE);
        assert_eq!(r.status, 200);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_get_503_until_one_closes() {
    let ws = Ws::new();
    let good = token('c');
    let file = token_file(&ws, &[&good]);
    let addr = start(ws.gate(false).await, |o| {
        o.token_file = Some(file);
        o.max_connections = 2;
    })
    .await;
    let auth = bearer(&good);
    tokio::task::block_in_place(|| {
        // Two authenticated connections kept alive hold both places (a connection that says
        // nothing holds none: it waits among the bounded unauthenticated ones, see
        // hostile::clients).
        let first = keep_alive(addr, &auth);
        let _second = keep_alive(addr, &auth);
        let r = post(addr, &[("Authorization", &auth)], INITIALIZE);
        assert_eq!(r.status, 503, "{}", r.body);
        assert_eq!(r.headers.get("retry-after").map(String::as_str), Some("1"));
        let body: Value = serde_json::from_str(&r.body).unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("too many open connections"),
            "{body}"
        );
        // When one closes, a new connection is served again.
        drop(first);
        let started = Instant::now();
        loop {
            let r = post(addr, &[("Authorization", &auth)], INITIALIZE);
            if r.status == 200 {
                break;
            }
            assert_eq!(r.status, 503);
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the closed connection's slot was never freed"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    });
}

/// Whether a process whose command line contains `pattern` is running.
fn running(pattern: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap()
        .status
        .success()
}

// One runtime worker: if any part of a call blocked the thread it runs on instead of yielding
// (or handing the work to a blocking thread), session B could not be answered at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn one_stuck_session_does_not_hold_up_another() {
    let ws = Ws::new();
    ws.write("notes.txt", "alpha\n");
    let good = token('l');
    let file = token_file(&ws, &[&good]);
    let gate = gate_granting(&ws, &["shell:sleep **"]).await;
    let addr = start(gate, |o| o.token_file = Some(file)).await;
    let url = format!("http://{addr}/mcp");
    let connect = || {
        let config =
            StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(good.clone());
        ().serve(StreamableHttpClientTransport::from_config(config))
    };
    let a = connect().await.unwrap();
    let b = connect().await.unwrap();
    // A distinctive duration so the check below finds only this test's process.
    let marker = "20.1357";
    let stuck = tokio::spawn(async move {
        let args = json!({"command": format!("sleep {marker}")});
        let Value::Object(args) = args else {
            unreachable!()
        };
        let r = a
            .call_tool(CallToolRequestParams::new("shell").with_arguments(args))
            .await;
        (a, r)
    });
    let started = Instant::now();
    while !running(&format!("sleep {marker}")) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "session A's command never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A's call is now stuck for 20 s; B is answered at once.
    let started = Instant::now();
    let Value::Object(args) = json!({"path": "notes.txt"}) else {
        unreachable!()
    };
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        b.call_tool(CallToolRequestParams::new("read").with_arguments(args)),
    )
    .await
    .expect("session B waited for session A's call")
    .unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    tokio::time::timeout(Duration::from_secs(5), b.list_all_tools())
        .await
        .expect("session B waited for session A's call")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(!stuck.is_finished(), "A's call should still be running");
    stuck.abort();
    b.cancel().await.unwrap();
}

/// The JSON-RPC error code in a response body.
fn rpc_code(r: &Raw) -> i64 {
    let body: Value = serde_json::from_str(&r.body)
        .unwrap_or_else(|e| panic!("not a JSON-RPC body ({e}): {:?}", r.body));
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    body["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no error code: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_batches_and_wrong_content_types_get_json_rpc_errors() {
    let ws = Ws::new();
    let good = token('p');
    let file = token_file(&ws, &[&good]);
    let addr = start(ws.gate(false).await, |o| o.token_file = Some(file)).await;
    let auth = bearer(&good);
    tokio::task::block_in_place(|| {
        let h = [("Authorization", auth.as_str())];
        for body in [r#"{"jsonrpc":"2.0","id":1,"method""#, "not json", ""] {
            let r = post(addr, &h, body);
            assert_eq!(r.status, 400, "{body:?}: {}", r.body);
            assert_eq!(rpc_code(&r), -32700, "{body:?}: {}", r.body);
        }
        let batch = format!("[{INITIALIZE}]");
        let r = post(addr, &h, &batch);
        assert_eq!(r.status, 400, "{}", r.body);
        assert_eq!(rpc_code(&r), -32600, "{}", r.body);
        assert!(r.body.contains("batch"), "{}", r.body);
        let r = request(addr, "POST", "text/plain", &h, INITIALIZE);
        assert_eq!(r.status, 415, "{}", r.body);
        assert_eq!(rpc_code(&r), -32600, "{}", r.body);
        assert!(r.body.contains("application/json"), "{}", r.body);
        // And a well-formed initialize still works.
        assert_eq!(post(addr, &h, INITIALIZE).status, 200);
    });
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

/// POST `body` on `session`.
fn on_session(addr: SocketAddr, auth: &str, session: &str, body: &str) -> Raw {
    post(
        addr,
        &[
            ("Authorization", auth),
            ("Mcp-Session-Id", session),
            ("Mcp-Protocol-Version", "2025-06-18"),
        ],
        body,
    )
}

/// A new initialized session's id.
fn open_session(addr: SocketAddr, auth: &str) -> String {
    let r = post(addr, &[("Authorization", auth)], INITIALIZE);
    assert_eq!(r.status, 200, "{}", r.body);
    let session = r.headers["mcp-session-id"].clone();
    assert_eq!(on_session(addr, auth, &session, INITIALIZED).status, 202);
    session
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_over_the_cap_are_refused_with_503_until_one_ends() {
    let ws = Ws::new();
    let good = token('s');
    let file = token_file(&ws, &[&good]);
    let addr = start(ws.gate(false).await, |o| {
        o.token_file = Some(file);
        o.max_sessions = 2;
    })
    .await;
    let auth = bearer(&good);
    tokio::task::block_in_place(|| {
        let a = open_session(addr, &auth);
        let b = open_session(addr, &auth);
        let r = post(addr, &[("Authorization", &auth)], INITIALIZE);
        assert_eq!(r.status, 503, "{}", r.body);
        assert_eq!(rpc_code(&r), -32000, "{}", r.body);
        assert!(r.body.contains("too many sessions"), "{}", r.body);
        assert!(!r.headers.contains_key("mcp-session-id"));
        // Refused, not evicted: both sessions still answer.
        assert_eq!(on_session(addr, &auth, &a, LIST).status, 200);
        assert_eq!(on_session(addr, &auth, &b, LIST).status, 200);
        // Ending one frees its slot.
        let r = request(
            addr,
            "DELETE",
            "application/json",
            &[
                ("Authorization", &auth),
                ("Mcp-Session-Id", &a),
                ("Mcp-Protocol-Version", "2025-06-18"),
            ],
            "",
        );
        assert!(r.status < 300, "DELETE: {} {}", r.status, r.body);
        open_session(addr, &auth);
        assert_eq!(on_session(addr, &auth, &a, LIST).status, 404);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_expires_with_404_and_frees_its_slot() {
    let ws = Ws::new();
    let good = token('i');
    let file = token_file(&ws, &[&good]);
    let addr = start(ws.gate(false).await, |o| {
        o.token_file = Some(file);
        o.max_sessions = 1;
        o.session_idle = Duration::from_secs(1);
    })
    .await;
    let auth = bearer(&good);
    tokio::task::block_in_place(|| {
        let a = open_session(addr, &auth);
        // Used within its idle time, it stays.
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(on_session(addr, &auth, &a, LIST).status, 200);
        assert_eq!(
            post(addr, &[("Authorization", &auth)], INITIALIZE).status,
            503
        );
        std::thread::sleep(Duration::from_millis(2500));
        let r = on_session(addr, &auth, &a, LIST);
        assert_eq!(r.status, 404, "{}", r.body);
        // Its slot is free again.
        let b = open_session(addr, &auth);
        assert_eq!(on_session(addr, &auth, &b, LIST).status, 200);
    });
}
