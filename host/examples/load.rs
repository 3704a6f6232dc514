//! Load script for `toolgate serve --http` (issue #15 part 6; not a test):
//!
//! ```text
//! cargo run --profile dev --example load -- --duration 60
//! ```
//!
//! It builds nothing itself: it runs the `toolgate` binary next to it in the target directory
//! (build it first: `cargo build --profile dev`, or pass `--bin PATH`). In a temporary
//! workspace (a few hundred small files) it starts one server on 127.0.0.1 (port 0) with a
//! policy raising `[http] max_sessions` and `max_connections` for what is asked for, opens `--sessions` MCP
//! sessions (2025-11-25: `initialize`, the `Mcp-Session-Id` header, `notifications/initialized`)
//! and then, for `--duration` seconds, keeps `--inflight` calls in flight, each worker on its
//! own keep-alive connection, going round its share of the sessions with `read` (4 of 5 calls)
//! and `grep` (1 of 5; `--grep-every N` for 1 of N, 0 for reads only), each worker starting
//! at another point of that cycle. It prints throughput, p50/p99 per tool, every error by kind and the
//! server's peak RSS (`VmHWM` in /proc/PID/status), then stops the server it started. Before
//! the load, three `read` calls one at a time, 60 ms apart, as a server in use has had.
//! Loopback only; bounded in time; it stops by itself.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PROTOCOL: &str = "2025-11-25";

struct Args {
    duration: Duration,
    sessions: usize,
    inflight: usize,
    bin: PathBuf,
    /// Diagnostic: the client sets TCP_QUICKACK after every read, so a server answer written in
    /// two segments without TCP_NODELAY is not held for the client's delayed ACK (~40 ms).
    quickack: bool,
    /// Every how many calls one is a `grep` (0: only reads).
    grep_every: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: load [--duration SECS] [--sessions N] [--inflight N] [--bin PATH] [--quickack] [--grep-every N]"
    );
    std::process::exit(2)
}

fn args() -> Args {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/examples/load -> target/<profile>/toolgate
    let default_bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("toolgate"))
        .unwrap_or_else(|| PathBuf::from("toolgate"));
    let mut a = Args {
        duration: Duration::from_secs(60),
        sessions: 1000,
        inflight: 100,
        bin: default_bin,
        quickack: false,
        grep_every: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--duration" => {
                a.duration = Duration::from_secs_f64(value().parse().unwrap_or_else(|_| usage()))
            }
            "--sessions" => a.sessions = value().parse().unwrap_or_else(|_| usage()),
            "--inflight" => a.inflight = value().parse().unwrap_or_else(|_| usage()),
            "--bin" => a.bin = PathBuf::from(value()),
            "--quickack" => a.quickack = true,
            "--grep-every" => a.grep_every = value().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    a.inflight = a.inflight.max(1);
    a.sessions = a.sessions.max(a.inflight);
    a
}

/// The server under load, stopped (killed and reaped) when dropped.
struct Server {
    child: Child,
    port: u16,
    token: String,
    /// Lines the server wrote on stderr after it listened.
    stderr_lines: Arc<std::sync::atomic::AtomicU64>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn status_kib(&self, field: &str) -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        text.lines()
            .find(|l| l.starts_with(field))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }
}

fn start_server(bin: &Path, dir: &Path, sessions: usize, inflight: usize) -> Server {
    let ws = dir.join("ws");
    for d in 0..10 {
        let sub = ws.join(format!("src/d{d}"));
        std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("{}: {e}", sub.display()));
        for f in 0..30 {
            let text: String = (0..40)
                .map(|l| {
                    format!(
                        "line {l} of file {f} in d{d}: the quick brown fox {}\n",
                        l * f
                    )
                })
                .collect();
            std::fs::write(sub.join(format!("f{f}.txt")), text).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let policy = dir.join("load-policy.toml");
    std::fs::write(
        &policy,
        format!(
            "mode = \"ask\"\n[http]\nmax_sessions = {}\nsession_idle_secs = 3600\nmax_connections = {}\n",
            sessions + 64,
            inflight + 64
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut child = Command::new(bin)
        .env("XDG_CONFIG_HOME", dir.join("xdg-config"))
        .env("XDG_STATE_HOME", dir.join("xdg-state"))
        .env_remove("TOOLGATE_MANAGED_POLICY")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .arg("--workspace")
        .arg(&ws)
        .arg("--policy")
        .arg(&policy)
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {}: {e} (build it first, or pass --bin)",
                bin.display()
            )
        });
    let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
    let mut lines = std::io::BufReader::new(stderr).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(rest) = line.strip_prefix("toolgate: serving MCP on ") {
                    break rest.trim().to_string();
                }
                eprintln!("server: {line}");
            }
            _ => panic!("the server exited before it listened"),
        }
    };
    // Keep draining the server's stderr so it never blocks on a full pipe; the first lines
    // are shown, the rest counted.
    let stderr_lines = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = stderr_lines.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 3 {
                eprintln!("server: {line}");
            }
        }
    });
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap_or_else(|_| panic!("unexpected address {url}"));
    let token = std::fs::read_to_string(dir.join("xdg-state/toolgate/http-token"))
        .unwrap_or_else(|e| panic!("token file: {e}"))
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .unwrap_or_default()
        .trim()
        .to_string();
    Server {
        child,
        port,
        token,
        stderr_lines,
    }
}

/// One keep-alive HTTP/1.1 connection (reopened when the server closes it).
struct Conn {
    quickack: bool,
    port: u16,
    token: Arc<str>,
    sender: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
}

#[derive(Debug)]
enum Failure {
    Connect(String),
    Status(u16),
    Body(String),
    JsonRpc(String),
    ToolError(String),
}

impl Failure {
    fn kind(&self) -> String {
        match self {
            Failure::Connect(e) => format!("connect: {e}"),
            Failure::Status(s) => format!("HTTP {s}"),
            Failure::Body(e) => format!("body: {e}"),
            Failure::JsonRpc(e) => format!("JSON-RPC error: {e}"),
            Failure::ToolError(e) => format!("tool error: {e}"),
        }
    }
}

impl Conn {
    async fn sender(
        &mut self,
    ) -> Result<&mut hyper::client::conn::http1::SendRequest<Full<Bytes>>, Failure> {
        if let Some(s) = &mut self.sender {
            if s.ready().await.is_err() {
                self.sender = None;
            }
        }
        if self.sender.is_none() {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .map_err(|e| Failure::Connect(e.to_string()))?;
            let _ = tcp.set_nodelay(true);
            let io = QuickAck {
                inner: tcp,
                on: self.quickack,
            };
            let (sender, conn) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
                    .await
                    .map_err(|e| Failure::Connect(e.to_string()))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            self.sender = Some(sender);
        }
        self.sender
            .as_mut()
            .ok_or_else(|| Failure::Connect("no connection".into()))
    }

    /// POST one JSON-RPC message; the answer's `Mcp-Session-Id` and JSON body (none for 202).
    async fn post(
        &mut self,
        session: Option<&str>,
        body: &Value,
    ) -> Result<(Option<String>, Option<Value>), Failure> {
        let mut req = hyper::Request::post("/mcp")
            .header("host", format!("127.0.0.1:{}", self.port))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(s) = session {
            req = req
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", PROTOCOL);
        }
        let req = req
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| Failure::Body(e.to_string()))?;
        let sender = self.sender().await?;
        let response = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => {
                self.sender = None;
                return Err(Failure::Connect(e.to_string()));
            }
        };
        let status = response.status().as_u16();
        let sid = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| Failure::Body(e.to_string()))?
            .to_bytes();
        if status == 202 {
            return Ok((sid, None));
        }
        if status != 200 {
            return Err(Failure::Status(status));
        }
        let text = String::from_utf8_lossy(&bytes);
        let json = if sse {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|v| v.get("id").is_some())
        } else {
            serde_json::from_str(&text).ok()
        };
        let json =
            json.ok_or_else(|| Failure::Body(format!("no JSON-RPC answer in {text:.200}")))?;
        if let Some(e) = json.get("error") {
            return Err(Failure::JsonRpc(e.to_string()));
        }
        Ok((sid, Some(json)))
    }
}

/// A TCP stream that (when `on`) re-arms TCP_QUICKACK after every read (Linux).
struct QuickAck {
    inner: tokio::net::TcpStream,
    on: bool,
}

impl tokio::io::AsyncRead for QuickAck {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut this.inner), cx, buf);
        #[cfg(target_os = "linux")]
        if this.on {
            let _ = rustix::net::sockopt::set_tcp_quickack(&this.inner, true);
        }
        r
    }
}

impl tokio::io::AsyncWrite for QuickAck {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        tokio::io::AsyncWrite::poll_write(std::pin::Pin::new(&mut self.get_mut().inner), cx, buf)
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        tokio::io::AsyncWrite::poll_flush(std::pin::Pin::new(&mut self.get_mut().inner), cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        tokio::io::AsyncWrite::poll_shutdown(std::pin::Pin::new(&mut self.get_mut().inner), cx)
    }
}

async fn open_session(conn: &mut Conn) -> Result<String, Failure> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "toolgate-load", "version": "0"}}});
    let (sid, _) = conn.post(None, &init).await?;
    let sid =
        sid.ok_or_else(|| Failure::Body("initialize answered without Mcp-Session-Id".into()))?;
    conn.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await?;
    Ok(sid)
}

#[derive(Default)]
struct Stats {
    /// Latencies in microseconds, by tool.
    latencies: BTreeMap<&'static str, Vec<u32>>,
    errors: BTreeMap<String, u64>,
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i.min(sorted.len() - 1)]) / 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = args();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
    let server = start_server(&a.bin, dir.path(), a.sessions, a.inflight);
    let pid = server.child.id();
    let token: Arc<str> = server.token.clone().into();
    println!(
        "server pid {pid} on 127.0.0.1:{}; {} sessions, {} in flight, {} s; idle VmRSS {} KiB",
        server.port,
        a.sessions,
        a.inflight,
        a.duration.as_secs_f64(),
        server.status_kib("VmRSS:").unwrap_or(0)
    );

    // The sessions are opened first (over a few connections), then the workers go round them.
    let stats = Arc::new(Mutex::new(Stats::default()));
    let began = Instant::now();
    let openers = a.inflight.min(32);
    let mut opening = Vec::new();
    for o in 0..openers {
        let (token, port, stats) = (token.clone(), server.port, stats.clone());
        let quickack = a.quickack;
        let count = (o..a.sessions).step_by(openers).count();
        opening.push(tokio::spawn(async move {
            let mut conn = Conn {
                quickack,
                port,
                token,
                sender: None,
            };
            let mut ids = Vec::new();
            for _ in 0..count {
                match open_session(&mut conn).await {
                    Ok(s) => ids.push(s),
                    Err(e) => {
                        *stats
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .errors
                            .entry(format!("initialize: {}", e.kind()))
                            .or_default() += 1
                    }
                }
            }
            ids
        }));
    }
    let mut all = Vec::new();
    for o in opening {
        all.extend(o.await.unwrap_or_default());
    }
    let init_took = began.elapsed();
    let after_init = server.status_kib("VmRSS:").unwrap_or(0);
    println!(
        "opened {} sessions in {:.1} s; VmRSS {} KiB, VmHWM {} KiB",
        all.len(),
        init_took.as_secs_f64(),
        after_init,
        server.status_kib("VmHWM:").unwrap_or(0)
    );
    // A server in use has answered calls one at a time before (with the idle work the quiet
    // server does between them, `mcp/http/quiet.rs`): a few such calls, then the crowd.
    if let Some(first) = all.first() {
        let mut conn = Conn {
            quickack: a.quickack,
            port: server.port,
            token: token.clone(),
            sender: None,
        };
        for id in 0..3 {
            tokio::time::sleep(Duration::from_millis(60)).await;
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "read", "arguments": {"path": "src/d0/f0.txt"}}});
            if let Err(e) = conn.post(Some(first), &body).await {
                eprintln!("a call before the load failed: {}", e.kind());
            }
        }
    }
    let all = Arc::new(all);
    let calls_began = Instant::now();
    let deadline = calls_began + a.duration;
    let mut workers = Vec::new();
    for w in 0..a.inflight {
        let (stats, token, all) = (stats.clone(), token.clone(), all.clone());
        let port = server.port;
        let quickack = a.quickack;
        workers.push(tokio::spawn(async move {
            let mut conn = Conn {
                quickack,
                port,
                token,
                sender: None,
            };
            let sessions: Vec<&String> = all.iter().skip(w).step_by(a.inflight).collect();
            let mut n = 0u64;
            let mut errors: BTreeMap<String, u64> = BTreeMap::new();
            let mut lat: BTreeMap<&'static str, Vec<u32>> = BTreeMap::new();
            while !sessions.is_empty() && Instant::now() < deadline {
                let session = sessions[(n as usize) % sessions.len()];
                // Each worker starts at another point of its cycle, so the mix holds from the
                // first call on (not every worker reading at once, then every one in a grep).
                let (tool, args) =
                    if a.grep_every > 0 && (n + w as u64).is_multiple_of(a.grep_every) {
                        ("grep", json!({"pattern": "fox 1[0-9]", "path": "src"}))
                    } else {
                        let d = (n as usize + w) % 10;
                        let f = (n as usize / 10 + w) % 30;
                        ("read", json!({"path": format!("src/d{d}/f{f}.txt")}))
                    };
                let body = json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}});
                let t = Instant::now();
                let r = conn.post(Some(session), &body).await;
                let took = u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX);
                let r = r.and_then(|(_, v)| {
                    let result = v.and_then(|v| v.get("result").cloned()).unwrap_or_default();
                    if result.get("isError").and_then(Value::as_bool) == Some(true) {
                        Err(Failure::ToolError(
                            result
                                .pointer("/structuredContent/error_code")
                                .and_then(Value::as_str)
                                .unwrap_or("?")
                                .to_string(),
                        ))
                    } else {
                        Ok(())
                    }
                });
                match r {
                    Ok(()) => lat.entry(tool).or_default().push(took),
                    Err(e) => {
                        let refused = matches!(e, Failure::Status(503) | Failure::Connect(_));
                        *errors.entry(format!("{tool}: {}", e.kind())).or_default() += 1;
                        if refused {
                            // Not a hot loop against a server that turns connections away.
                            conn.sender = None;
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                    }
                }
                n += 1;
            }
            let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
            for (k, mut v) in lat {
                s.latencies.entry(k).or_default().append(&mut v);
            }
            for (k, c) in errors {
                *s.errors.entry(k).or_default() += c;
            }
            n
        }));
    }
    // Sample RSS while the calls run.
    let mut peak_rss = after_init;
    let sampler = async {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            peak_rss = peak_rss.max(server.status_kib("VmRSS:").unwrap_or(0));
            if calls_began.elapsed() >= a.duration {
                break;
            }
        }
    };
    sampler.await;
    let mut total = 0u64;
    for w in workers {
        total += w.await.unwrap_or(0);
    }
    let wall = calls_began.elapsed();
    let hwm = server.status_kib("VmHWM:").unwrap_or(0);
    let mut stats = stats.lock().unwrap_or_else(|p| p.into_inner());
    println!(
        "{total} calls in {:.1} s: {:.0} calls/s",
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64()
    );
    for (tool, v) in stats.latencies.iter_mut() {
        v.sort_unstable();
        println!(
            "{tool:<5} {:>8} ok   p50 {:>7.2} ms   p99 {:>7.2} ms   max {:>7.2} ms",
            v.len(),
            percentile(v, 0.50),
            percentile(v, 0.99),
            percentile(v, 1.0)
        );
    }
    let ok: usize = stats.latencies.values().map(Vec::len).sum();
    println!(
        "{ok} answered calls: {:.0} calls/s",
        ok as f64 / wall.as_secs_f64()
    );
    let errors: u64 = stats.errors.values().sum();
    println!("errors: {errors}");
    for (k, c) in &stats.errors {
        println!("  {c:>8}  {k}");
    }
    println!(
        "server peak RSS: VmHWM {} KiB ({:.0} MB); highest VmRSS sampled {} KiB",
        hwm,
        hwm as f64 / 1024.0,
        peak_rss
    );
    println!(
        "server stderr lines after it listened: {}",
        server
            .stderr_lines
            .load(std::sync::atomic::Ordering::Relaxed)
    );
    drop(server);
}
