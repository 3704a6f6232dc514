//! The egress proxy's cost, next to a direct connection in the same run (issue #20;
//! `cargo bench --profile dev --bench egress`):
//!
//! 1. **latency**: a small HTTP/1.1 response (`Connection: close`, a new connection per
//!    request) from a server on loopback, fetched directly, through the proxy as plain HTTP
//!    (`GET http://127.0.0.1:PORT/`), and through a `CONNECT` tunnel followed by the `GET`;
//!    p50/p99 of each and what the proxy adds. The three ways take turns, request by request,
//!    so a change in the machine's load falls on all of them alike;
//! 2. **throughput**: a 100 MB body from the same server, the same three ways, best of 3.
//!
//! Loopback only; the client is written by hand on tokio's `TcpStream`, so the figures are the
//! proxy's and not an HTTP library's. `TG_ONLY=latency|throughput` runs one section;
//! `TG_REQUESTS=N` sets the number of requests per way (default 2000).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toolgate::sandbox::net::egress::{Egress, EgressPolicy};
use toolgate::sandbox::net::HostPattern;

/// The small response's body.
const SMALL: &[u8] = b"hello from the egress benchmark's loopback server\n";

/// The large response's size.
const BIG: usize = 100 << 20;

/// Bound on any one exchange, so a stuck connection fails the bench instead of hanging it.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(30);

fn main() {
    // Errors capture backtraces when this is set, which distorts timings.
    std::env::remove_var("RUST_BACKTRACE");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run());
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// How a request reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    Direct,
    /// Plain HTTP to the proxy (absolute-form request target).
    Plain,
    /// `CONNECT` to the proxy, then the request inside the tunnel.
    Tunnel,
}

impl Way {
    const ALL: [Way; 3] = [Way::Direct, Way::Plain, Way::Tunnel];

    fn label(self) -> &'static str {
        match self {
            Way::Direct => "direct",
            Way::Plain => "proxy, plain HTTP",
            Way::Tunnel => "proxy, CONNECT tunnel",
        }
    }
}

async fn run() {
    let only = std::env::var("TG_ONLY").unwrap_or_default();
    let on = |s: &str| only.is_empty() || only == s;
    let requests: usize = std::env::var("TG_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);

    let server = serve().await;
    let entry = format!("127.0.0.1:{}", server.port());
    let pattern = HostPattern::parse(&entry).expect("pattern");
    let policy = EgressPolicy {
        allow: vec![pattern.clone()],
        deny: vec![],
        limited: false,
        allow_private: vec![pattern],
        timeout: Duration::from_secs(10),
        ..EgressPolicy::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let proxy = Egress::serve(listener, policy).expect("proxy");
    let client = Client {
        server,
        proxy: proxy.addr(),
    };

    let started = Instant::now();
    if on("latency") {
        latency(&client, requests).await;
    }
    if on("throughput") {
        throughput(&client).await;
    }
    // The proxy records a connection once its task ends: give the last one a moment.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (recorded, unrecorded) = proxy.connections();
    let refused = recorded.iter().filter(|c| !c.allowed).count();
    println!(
        "\nproxy connections: {} ({} refused among the {} recorded); whole run {:.1} s",
        recorded.len() as u64 + unrecorded,
        refused,
        recorded.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(refused, 0, "the proxy refused a benchmark connection");
}

/// The loopback server: reads one request head, answers `/big` with `BIG` bytes and anything
/// else with `SMALL`, then closes.
async fn serve() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind server");
    let addr = listener.local_addr().expect("server address");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = Vec::with_capacity(1024);
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let big = buf.starts_with(b"GET /big ");
                let len = if big { BIG } else { SMALL.len() };
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
                );
                if big {
                    if s.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    let block = vec![b'x'; 1 << 20];
                    for _ in 0..BIG / block.len() {
                        if s.write_all(&block).await.is_err() {
                            return;
                        }
                    }
                } else {
                    // One write: head and body in one segment, as a small real response.
                    let mut reply = head.into_bytes();
                    reply.extend_from_slice(SMALL);
                    if s.write_all(&reply).await.is_err() {
                        return;
                    }
                }
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

struct Client {
    server: SocketAddr,
    proxy: SocketAddr,
}

impl Client {
    /// Fetch `path` the given way; the body's length (the status and length are checked).
    async fn fetch(&self, way: Way, path: &str) -> usize {
        tokio::time::timeout(EXCHANGE_TIMEOUT, self.exchange(way, path))
            .await
            .unwrap_or_else(|_| panic!("{}: {path} did not finish in time", way.label()))
    }

    async fn exchange(&self, way: Way, path: &str) -> usize {
        let server = self.server;
        let (mut s, request) = match way {
            Way::Direct => (
                TcpStream::connect(server).await.expect("connect to server"),
                format!("GET {path} HTTP/1.1\r\nHost: {server}\r\n\r\n"),
            ),
            Way::Plain => (
                TcpStream::connect(self.proxy)
                    .await
                    .expect("connect to proxy"),
                format!("GET http://{server}{path} HTTP/1.1\r\nHost: {server}\r\n\r\n"),
            ),
            Way::Tunnel => {
                let mut s = TcpStream::connect(self.proxy)
                    .await
                    .expect("connect to proxy");
                s.set_nodelay(true).expect("nodelay");
                let connect = format!("CONNECT {server} HTTP/1.1\r\nHost: {server}\r\n\r\n");
                s.write_all(connect.as_bytes()).await.expect("CONNECT");
                let (head, rest) = read_head(&mut s).await;
                assert!(head.starts_with("HTTP/1.1 200"), "CONNECT refused: {head}");
                assert!(rest.is_empty(), "data before the request: {rest:?}");
                (s, format!("GET {path} HTTP/1.1\r\nHost: {server}\r\n\r\n"))
            }
        };
        s.set_nodelay(true).expect("nodelay");
        s.write_all(request.as_bytes()).await.expect("request");
        let (head, rest) = read_head(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{}: {head}", way.label());
        let length: usize = head
            .split("\r\n")
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .expect("Content-Length");
        // Read to the end of the connection (`Connection: close`), counting, not keeping.
        let mut got = rest.len();
        let mut buf = vec![0u8; 256 << 10];
        loop {
            match s.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) => panic!("{}: reading the body: {e}", way.label()),
            }
        }
        assert_eq!(got, length, "{}: body length", way.label());
        got
    }
}

/// Read a response head; the head (without the blank line) and any bytes read past it.
async fn read_head(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).into_owned();
            return (head, buf[i + 4..].to_vec());
        }
        match s.read(&mut chunk).await {
            Ok(0) => panic!(
                "the connection closed before a response head: {:?}",
                String::from_utf8_lossy(&buf)
            ),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("reading a response head: {e}"),
        }
    }
}

async fn latency(client: &Client, requests: usize) {
    // Warm up: the runtime's threads, the proxy's first connections, the allocator.
    for _ in 0..100 {
        for way in Way::ALL {
            client.fetch(way, "/").await;
        }
    }
    let mut times: [Vec<Duration>; 3] = Default::default();
    for i in 0..requests {
        // Rotate the order so that no way always follows the same one.
        for k in 0..3 {
            let j = (i + k) % 3;
            let t = Instant::now();
            client.fetch(Way::ALL[j], "/").await;
            times[j].push(t.elapsed());
        }
    }
    for t in &mut times {
        t.sort();
    }
    let p50 = |j: usize| percentile(&times[j], 0.5);
    println!(
        "latency: GET of a {}-byte body from a loopback server, a new connection each, {requests} requests per way (interleaved)",
        SMALL.len()
    );
    println!(
        "  {:<24} {:>10} {:>10} {:>14}",
        "way", "p50", "p99", "added p50"
    );
    for (j, way) in Way::ALL.iter().enumerate() {
        let added = if j == 0 {
            "-".to_string()
        } else {
            format!("+{:.0} µs", us(p50(j)) - us(p50(0)))
        };
        println!(
            "  {:<24} {:>7.0} µs {:>7.0} µs {:>14}",
            way.label(),
            us(p50(j)),
            us(percentile(&times[j], 0.99)),
            added
        );
    }
}

async fn throughput(client: &Client) {
    println!(
        "\nthroughput: one {} MB body from a loopback server, best of 3 per way (interleaved)",
        BIG >> 20
    );
    let mut best = [Duration::MAX; 3];
    for _ in 0..3 {
        for (j, way) in Way::ALL.iter().enumerate() {
            let t = Instant::now();
            let n = client.fetch(*way, "/big").await;
            let took = t.elapsed();
            assert_eq!(n, BIG);
            best[j] = best[j].min(took);
        }
    }
    let rate = |d: Duration| BIG as f64 / (1 << 20) as f64 / d.as_secs_f64();
    println!(
        "  {:<24} {:>10} {:>12} {:>10}",
        "way", "best time", "MB/s", "vs direct"
    );
    for (j, way) in Way::ALL.iter().enumerate() {
        println!(
            "  {:<24} {:>7.0} ms {:>12.0} {:>9.2}x",
            way.label(),
            best[j].as_secs_f64() * 1e3,
            rate(best[j]),
            rate(best[j]) / rate(best[0])
        );
    }
}
