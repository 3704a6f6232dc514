//! A stateless 2026-07-28 `tools/call` is run beside rmcp's stateless service (issue #15):
//! what that path takes must be exactly what rmcp would let through (a request whose
//! SEP-2243 headers, version header or `_meta` disagree with its body is refused as rmcp
//! refuses it), and a client hanging up stops its call, whether the call ran in its
//! request's task (a quiet server) or in a task of its own (under load).

use crate::common::*;
use crate::mcp::{http_server, HttpServer};
use serde_json::{json, Value};
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A stateless call's `_meta`, complete for 2026-07-28.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    })
}

fn call_body(tool: &str, args: Value, meta: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": meta}})
    .to_string()
}

/// The request's head (without the blank line) with `headers` after the fixed ones.
fn head(server: &HttpServer, body: &str, headers: &[(&str, &str)]) -> String {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        server.port,
        server.token,
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head
}

/// One request on a new connection: status and body.
fn post(server: &HttpServer, body: &str, headers: &[(&str, &str)]) -> (String, String) {
    let mut stream = BufReader::new(TcpStream::connect(("127.0.0.1", server.port)).unwrap());
    stream
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream.get_mut(),
        "{}\r\n{body}",
        head(server, body, headers)
    )
    .unwrap();
    let (status, _, body) = crate::raw_http::read_response(&mut stream);
    (status, String::from_utf8_lossy(&body).into_owned())
}

const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const VERSION: (&str, &str) = ("MCP-Protocol-Version", "2026-07-28");
const METHOD: (&str, &str) = ("Mcp-Method", "tools/call");

/// A refused request: what it is, its headers and body, the status and the text wanted.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String, &'a str, &'a str);

#[test]
fn stateless_calls_are_answered_or_refused_exactly_as_rmcp_would() {
    let ws = Ws::new();
    ws.write("a.txt", "alpha file\n");
    let server = http_server(&ws, &[]);
    let read = call_body("read", json!({"path": "a.txt"}), meta());
    // Past the quiet window: the calls below may be served beside rmcp.
    std::thread::sleep(Duration::from_millis(120));

    let (status, body) = post(
        &server,
        &read,
        &[ACCEPT, VERSION, METHOD, ("Mcp-Name", "read")],
    );
    assert!(status.contains(" 200 "), "{status}: {body}");
    assert!(body.contains("alpha file"), "{body}");
    // The name in SEP-2243's Base64 form is rmcp's to decode: still answered.
    let (status, body) = post(
        &server,
        &read,
        &[ACCEPT, VERSION, METHOD, ("Mcp-Name", "=?base64?cmVhZA==?=")],
    );
    assert!(status.contains(" 200 "), "{status}: {body}");
    assert!(body.contains("alpha file"), "{body}");

    // Each of these disagrees with its body or misses what 2026-07-28 requires.
    let mismatch = "-32020";
    let cases: Vec<Case> = vec![
        (
            "a name header naming another tool",
            vec![ACCEPT, VERSION, METHOD, ("Mcp-Name", "write")],
            read.clone(),
            " 400 ",
            mismatch,
        ),
        (
            "the name header twice",
            vec![
                ACCEPT,
                VERSION,
                METHOD,
                ("Mcp-Name", "read"),
                ("Mcp-Name", "read"),
            ],
            read.clone(),
            " 400 ",
            mismatch,
        ),
        (
            "no method header",
            vec![ACCEPT, VERSION, ("Mcp-Name", "read")],
            read.clone(),
            " 400 ",
            mismatch,
        ),
        (
            "a method header naming another method",
            vec![
                ACCEPT,
                VERSION,
                ("Mcp-Method", "tools/list"),
                ("Mcp-Name", "read"),
            ],
            read.clone(),
            " 400 ",
            mismatch,
        ),
        (
            "no version header",
            vec![ACCEPT, METHOD, ("Mcp-Name", "read")],
            read.clone(),
            " 400 ",
            mismatch,
        ),
        (
            "a version header of another revision",
            vec![
                ACCEPT,
                ("MCP-Protocol-Version", "2025-11-25"),
                METHOD,
                ("Mcp-Name", "read"),
            ],
            read.clone(),
            " 400 ",
            mismatch,
        ),
        (
            "a _meta without the client's capabilities",
            vec![ACCEPT, VERSION, METHOD, ("Mcp-Name", "read")],
            call_body(
                "read",
                json!({"path": "a.txt"}),
                json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}),
            ),
            " 400 ",
            "-32602",
        ),
        (
            "an Accept without the event stream",
            vec![
                ("Accept", "application/json"),
                VERSION,
                METHOD,
                ("Mcp-Name", "read"),
            ],
            read.clone(),
            " 406 ",
            "",
        ),
    ];
    for (what, headers, body, want, says) in cases {
        let (status, answer) = post(&server, &body, &headers);
        assert!(
            status.contains(want),
            "{what}: wanted{want}, got {status}: {answer}"
        );
        assert!(
            answer.contains(says) && !answer.contains("alpha file"),
            "{what}: {answer}"
        );
    }
}

/// How busy the server is when the call under test comes.
#[derive(Clone, Copy, Debug)]
enum Load {
    /// No other request for longer than the server's quiet window (50 ms).
    Alone,
    /// Another call is being handled at the same time.
    Crowd,
}

#[test]
fn a_client_hanging_up_stops_its_stateless_call() {
    for load in [Load::Alone, Load::Crowd] {
        let ws = Ws::new();
        let hostile = hostile_component();
        let server = http_server(&ws, &["--component", hostile.to_str().unwrap()]);
        let looping = call_body("test-hostile", json!({"mode": "loop"}), meta());
        let headers = [ACCEPT, VERSION, METHOD, ("Mcp-Name", "test-hostile")];
        let send = || {
            let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            write!(s, "{}\r\n{looping}", head(&server, &looping, &headers)).unwrap();
            s
        };
        let _crowd = match load {
            Load::Alone => {
                std::thread::sleep(Duration::from_millis(120));
                None
            }
            Load::Crowd => {
                let other = send();
                std::thread::sleep(Duration::from_millis(200));
                Some(other)
            }
        };
        let mine = send();
        std::thread::sleep(Duration::from_millis(400));
        let gone_at = Instant::now();
        mine.shutdown(std::net::Shutdown::Both).unwrap();
        drop(mine);
        let audit = hostile_completed(&ws, gone_at);
        assert_eq!(
            audit["detail"]["error_code"], "cancelled",
            "{load:?}: {audit}"
        );
    }
}
