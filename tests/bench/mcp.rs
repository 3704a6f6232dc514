//! MCP section of the benchmark (issue #15): ping, tools/list and tools/call over the real
//! binary on one stdio connection and over HTTP with keep-alive, and what a call costs over
//! the protocol alone (call p50 - ping p50; target <= 150 µs, call p99 <= 1 ms).
//!
//! Over HTTP both revisions are measured on one keep-alive connection: a 2025-11-25 session
//! (`ping` is the protocol-only baseline) and stateless 2026-07-28 requests (`ping` is gone
//! there; `server/discover` is the baseline).
//!
//! Last, authenticated calls on new connections under an idle-socket attack (issue #49: sockets
//! opened before any token and left idle), beside the same calls without it (target: p99 <=
//! 50 ms, no call refused). `TG_MCP=preauth` runs only that part.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const FILE: &str = "hello from a thirty-five byte file\n";

fn n() -> usize {
    std::env::var("TG_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn serve(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.env("TOOLGATE_CACHE_DIR", super::cache_dir())
        .env("XDG_CONFIG_HOME", dir.join("xdg-config"))
        .env("XDG_STATE_HOME", dir.join("xdg-state"))
        .env_remove("TOOLGATE_LOG")
        .env_remove("TOOLGATE_SESSION")
        .env_remove("TOOLGATE_WORKSPACE")
        .env_remove("TOOLGATE_MCP_STATE_KEY_FILE")
        .arg("--workspace")
        .arg(dir.join("ws"))
        .arg("serve");
    cmd
}

/// Median and 99th percentile, in µs.
fn stats(mut t: Vec<Duration>) -> (f64, f64) {
    t.sort();
    (
        super::percentile(&t, 0.5).as_secs_f64() * 1e6,
        super::percentile(&t, 0.99).as_secs_f64() * 1e6,
    )
}

fn time(k: usize, mut f: impl FnMut()) -> (f64, f64) {
    for _ in 0..k / 10 + 20 {
        f();
    }
    let mut t = Vec::with_capacity(k);
    for _ in 0..k {
        let s = Instant::now();
        f();
        t.push(s.elapsed());
    }
    stats(t)
}

fn print(label: &str, rows: &[(&str, (f64, f64))], baseline: &str) {
    println!("{label}");
    for (name, (p50, p99)) in rows {
        println!("  {name:<14} p50 {p50:>8.1} µs   p99 {p99:>8.1} µs");
    }
    let base = rows.iter().find(|r| r.0 == baseline).map(|r| r.1 .0);
    let call = rows.iter().find(|r| r.0 == "call read").map(|r| r.1);
    if let (Some(base), Some((p50, p99))) = (base, call) {
        println!(
            "  call - {baseline}: {:>6.1} µs (target <= 150 µs); call p99 {p99:.1} µs (target <= 1000 µs)",
            p50 - base
        );
    }
}

struct Stdio_ {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    id: u64,
    line: String,
}

impl Stdio_ {
    fn rpc(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let m = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        writeln!(self.stdin, "{m}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            self.line.clear();
            assert!(
                self.stdout.read_line(&mut self.line).unwrap() > 0,
                "serve ended"
            );
            let v: Value = serde_json::from_str(&self.line).unwrap();
            if v.get("id") == Some(&json!(self.id)) {
                return v;
            }
        }
    }
}

fn stdio(dir: &Path) {
    let mut child = serve(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut c = Stdio_ {
        child,
        stdin,
        stdout,
        id: 0,
        line: String::new(),
    };
    c.rpc(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
    );
    writeln!(
        c.stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let call = json!({"name": "read", "arguments": {"path": "small.txt"}});
    let r = c.rpc("tools/call", call.clone());
    assert_eq!(r["result"]["isError"], false, "{r}");
    let k = n();
    let ping = time(k, || {
        c.rpc("ping", json!({}));
    });
    let list = time(k / 4, || {
        c.rpc("tools/list", json!({}));
    });
    let read = time(k, || {
        c.rpc("tools/call", call.clone());
    });
    let unknown = time(k, || {
        c.rpc(
            "tools/call",
            json!({"name": "no-such-tool", "arguments": {}}),
        );
    });
    print(
        &format!("MCP over stdio (real binary, one connection, raw JSON-RPC, {k} calls)"),
        &[
            ("ping", ping),
            ("tools/list", list),
            ("call read", read),
            ("call unknown", unknown),
        ],
        "ping",
    );
    drop(c.stdin);
    let _ = c.child.wait();
}

/// A keep-alive HTTP/1.1 client of one connection.
struct Http {
    stream: BufReader<std::net::TcpStream>,
    port: u16,
    token: String,
    session: Option<String>,
    id: u64,
}

impl Http {
    fn post(&mut self, method: &str, params: Value) -> Value {
        self.id += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params});
        let body = body.to_string();
        let session = match &self.session {
            Some(s) => format!("Mcp-Session-Id: {s}\r\nMCP-Protocol-Version: 2025-11-25\r\n"),
            None if method == "initialize" => String::new(),
            None => {
                let name = params
                    .get("name")
                    .and_then(Value::as_str)
                    .map(|n| format!("Mcp-Name: {n}\r\n"))
                    .unwrap_or_default();
                format!("MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}")
            }
        };
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n{body}",
            self.port, self.token, body.len()
        );
        self.stream.get_mut().write_all(req.as_bytes()).unwrap();
        let (headers, body) = self.response();
        if let Some(s) = headers
            .iter()
            .find_map(|h| h.strip_prefix("mcp-session-id: "))
        {
            self.session = Some(s.trim().to_string());
        }
        // JSON, or an SSE stream whose `data:` lines carry the messages.
        let text = String::from_utf8(body).unwrap();
        if text.trim_start().starts_with('{') {
            return serde_json::from_str(&text).unwrap();
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id") == Some(&json!(self.id)))
            .unwrap_or_else(|| panic!("no answer in {text}"))
    }

    /// A notification on the session (answered 202 with no body).
    fn notify(&mut self, method: &str) {
        let body = json!({"jsonrpc": "2.0", "method": method}).to_string();
        let session = self.session.as_deref().expect("a session");
        let req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
            self.port, self.token, body.len()
        );
        self.stream.get_mut().write_all(req.as_bytes()).unwrap();
        let (headers, _) = self.response();
        assert!(headers[0].contains(" 202 "), "{headers:?}");
    }

    fn response(&mut self) -> (Vec<String>, Vec<u8>) {
        let (status, mut headers, body) = crate::raw_http::read_response(&mut self.stream);
        headers.insert(0, status.to_ascii_lowercase());
        assert!(
            headers[0].contains(" 200 ") || headers[0].contains(" 202 "),
            "{headers:?}"
        );
        (headers, body)
    }
}

fn http(dir: &Path) {
    let token = "b".repeat(64);
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{token}\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut child = serve(dir)
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port: u16 = loop {
        let line = lines.next().expect("serve exited").unwrap();
        if let Some(rest) = line.strip_prefix("toolgate: serving MCP on http://127.0.0.1:") {
            break rest.trim_end_matches("/mcp").trim().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut c = Http {
        stream: BufReader::new(stream),
        port,
        token,
        session: None,
        id: 0,
    };
    let k = n();
    let call = json!({"name": "read", "arguments": {"path": "small.txt"}});

    // 2025-11-25: one session.
    c.post(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
    );
    c.notify("notifications/initialized");
    let r = c.post("tools/call", call.clone());
    assert_eq!(r["result"]["isError"], false, "{r}");
    let ping = time(k, || {
        c.post("ping", json!({}));
    });
    let list = time(k / 4, || {
        c.post("tools/list", json!({}));
    });
    let read = time(k, || {
        c.post("tools/call", call.clone());
    });
    print(
        &format!("MCP over HTTP, 2025-11-25 session (keep-alive, one connection, {k} calls)"),
        &[("ping", ping), ("tools/list", list), ("call read", read)],
        "ping",
    );

    // 2026-07-28: stateless requests on the same connection.
    c.session = None;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut modern_call = call.clone();
    modern_call["_meta"] = meta.clone();
    let r = c.post("tools/call", modern_call.clone());
    assert_eq!(r["result"]["isError"], false, "{r}");
    let discover = time(k, || {
        c.post("server/discover", json!({"_meta": meta}));
    });
    let list = time(k / 4, || {
        c.post("tools/list", json!({"_meta": meta}));
    });
    let read = time(k, || {
        c.post("tools/call", modern_call.clone());
    });
    print(
        &format!("MCP over HTTP, 2026-07-28 stateless (keep-alive, one connection, {k} calls)"),
        &[
            ("server/discover", discover),
            ("tools/list", list),
            ("call read", read),
        ],
        "server/discover",
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The same `read` through the gate in process, for what the MCP layer adds beyond it.
async fn in_process(dir: &Path) -> (f64, f64) {
    let gate = toolgate::Gate::open(toolgate::GateOptions {
        workspace: dir.join("ws"),
        cache_dir: Some(super::cache_dir()),
        ..toolgate::GateOptions::default()
    })
    .await
    .expect("gate");
    let input = json!({"path": "small.txt"});
    for _ in 0..200 {
        let o = gate.call("bench", "read", input.clone()).await;
        assert_eq!(o.status, toolgate::Status::Ok, "{o:?}");
    }
    let k = n();
    let mut t = Vec::with_capacity(k);
    for _ in 0..k {
        let s = Instant::now();
        gate.call("bench", "read", input.clone()).await;
        t.push(s.elapsed());
    }
    stats(t)
}

pub async fn run() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("ws")).unwrap();
    std::fs::write(dir.path().join("ws/small.txt"), FILE).unwrap();
    if std::env::var("TG_MCP").as_deref() == Ok("preauth") {
        let path = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || preauth(&path))
            .await
            .unwrap();
        return;
    }
    let (p50, p99) = in_process(dir.path()).await;
    println!("MCP reference: the same `read` through the gate in process");
    println!("  in process     p50 {p50:>8.1} µs   p99 {p99:>8.1} µs   (call - ping - this = what the MCP layer adds)");
    let path = dir.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        stdio(&path);
        http(&path);
        preauth(&path);
    })
    .await
    .unwrap();
}

/// A `serve --http` with one token in a file of `dir`'s: the child and its port.
fn http_server(dir: &Path, token: &str) -> (Child, u16) {
    let tokens = dir.join("preauth-tokens");
    std::fs::write(&tokens, format!("{token}\n")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut child = serve(dir)
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port: u16 = loop {
        let line = lines.next().expect("serve exited").unwrap();
        if let Some(rest) = line.strip_prefix("toolgate: serving MCP on http://127.0.0.1:") {
            break rest.trim_end_matches("/mcp").trim().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines.by_ref() {});
    (child, port)
}

/// One authenticated stateless `read` on a new connection: its time, or `None` when it was
/// refused (503) or the connection was closed unanswered.
fn fresh_call(port: u16, token: &str) -> Option<Duration> {
    use std::io::Read as _;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "read", "arguments": {"path": "small.txt"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: read\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_nodelay(true).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .ok()?;
    stream.write_all(req.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let took = started.elapsed();
    answer.starts_with(b"HTTP/1.1 200").then_some(took)
}

/// `k` fresh-connection calls: p50, p99 (of those answered, µs) and how many were refused.
fn fresh_calls(port: u16, token: &str, k: usize) -> ((f64, f64), usize) {
    let mut times = Vec::with_capacity(k);
    let mut refused = 0;
    for _ in 0..k {
        match fresh_call(port, token) {
            Some(t) => times.push(t),
            None => refused += 1,
        }
        // An agent's pace, not a flood of our own.
        std::thread::sleep(Duration::from_millis(5));
    }
    if times.is_empty() {
        return ((f64::NAN, f64::NAN), refused);
    }
    (stats(times), refused)
}

/// Authenticated calls with and without `IDLE` sockets held open by someone without a token,
/// all of them re-opened every 2 s (the server closes idle ones after 3 s).
fn preauth(dir: &Path) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const IDLE: usize = 200;
    let token = "p".repeat(64);
    let (mut child, port) = http_server(dir, &token);
    let k = (n() / 4).max(100);
    for _ in 0..20 {
        fresh_call(port, &token).expect("the server answers");
    }
    let (reference, refused_ref) = fresh_calls(port, &token, k);
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut opened = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let idle: Vec<_> = (0..IDLE)
                    .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
                    .collect();
                opened += idle.len();
                let until = Instant::now() + Duration::from_secs(2);
                while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                drop(idle);
            }
            opened
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let (attacked, refused_att) = fresh_calls(port, &token, k);
    stop.store(true, Ordering::Relaxed);
    let opened = attacker.join().unwrap();
    println!(
        "MCP over HTTP, authenticated calls on new connections ({k} each), p99 target <= 50 ms"
    );
    for (name, (p50, p99), refused) in [
        ("no attack", reference, refused_ref),
        ("idle sockets", attacked, refused_att),
    ] {
        println!(
            "  {name:<14} p50 {p50:>8.1} µs   p99 {p99:>8.1} µs   refused or closed {refused}/{k}"
        );
    }
    println!("  (the attack held {IDLE} idle sockets open, re-opened every 2 s: {opened} in all)");
    let _ = child.kill();
    let _ = child.wait();
}
