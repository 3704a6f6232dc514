//! `fetch` formats (issue #18): an HTML page comes back as Markdown by default (scripts gone,
//! links kept), as plain text or as the HTML itself on request; JSON and text pass through; a
//! binary body is described; a 50 MB page and hostile pages finish inside the default limits
//! with a visible note of what was cut. Every page is served by a loopback server started
//! here; the conversion runs inside the fetch component.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};
use toolgate::{Gate, Observation, Status};

const PAGE: &str = r#"<!DOCTYPE html>
<html><head><title>Format Test</title>
<style>.x { color: red }</style>
<script>var token = "SCRIPT-SECRET";</script></head>
<body>
<nav><a href="/">Home</a></nav>
<h1>Format Test</h1>
<p>Read <a href="/docs/guide.html">the guide</a> before you start.</p>
<script>document.write("SCRIPT-VISIBLE")</script>
<div hidden>HIDDEN-TEXT</div>
<ul><li>first</li><li>second</li></ul>
</body></html>"#;

const MALFORMED: &[u8] =
    b"<html><body><div><p>Unclosed <b>bold <table><td>cell one<td>cell two</div></p></b>\
<<>><!-- never ended <p>after \xff\xfe stray bytes <a href=\"/x>broken link text</a> <i>tail words";

const PDF: &[u8] = b"%PDF-1.4\n1 0 obj << /Title (PDF-SECRET-TEXT) >> endobj\n";

const JSON_BODY: &str = r#"{"name": "<b>not html</b>", "list": [1, 2, 3]}"#;

/// Bytes of the huge page.
const HUGE: usize = 50 << 20;

fn huge_chunk() -> String {
    let mut s = String::new();
    for i in 0..200 {
        s.push_str(&format!(
            "<div class=\"row\"><p>Paragraph {i} of the huge page, <a href=\"/p/{i}\">link {i}</a>.</p><script>var x{i} = 1;</script></div>\n"
        ));
    }
    s
}

fn respond(stream: &mut std::net::TcpStream, ctype: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

/// A loopback server with the test pages; returns its port.
fn serve_pages() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    return;
                }
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
                match path.as_str() {
                    "/page" => respond(&mut stream, "text/html; charset=utf-8", PAGE.as_bytes()),
                    "/untyped" => {
                        let head = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n";
                        let _ = stream.write_all(head.as_bytes());
                        let _ = stream.write_all(PAGE.as_bytes());
                    }
                    "/json" => respond(&mut stream, "application/json", JSON_BODY.as_bytes()),
                    "/plain" => respond(&mut stream, "text/plain", b"<p>a plain file</p>\n"),
                    "/pdf" => respond(&mut stream, "application/pdf", PDF),
                    "/blob" => {
                        let noise: Vec<u8> = (0..3000u32)
                            .map(|i| (i * 7919 % 251) as u8 | 0x80)
                            .collect();
                        respond(&mut stream, "text/html", &noise)
                    }
                    "/malformed" => respond(&mut stream, "text/html", MALFORMED),
                    "/deep" => {
                        let body = "<div>".repeat(300_000) + "bottom";
                        respond(&mut stream, "text/html", body.as_bytes())
                    }
                    "/attrs" => {
                        // One tag with ~145,000 attributes: quadratic for the parser.
                        let mut body = String::from("<p>before</p><div");
                        let mut i = 0;
                        while body.len() < 1 << 20 {
                            body.push_str(&format!(" a{i}"));
                            i += 1;
                        }
                        body.push_str(">x</div>");
                        respond(&mut stream, "text/html", body.as_bytes())
                    }
                    "/bomb" => {
                        let mut body = String::from("<div>");
                        for i in 0..800 {
                            body.push_str(&format!("<b c={i}>"));
                        }
                        body.push_str("</div>");
                        body.push_str(&"<div>x</div>".repeat(80_000));
                        respond(&mut stream, "text/html", body.as_bytes())
                    }
                    "/huge" => {
                        // 50 MB, streamed; the reader hangs up long before the end.
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {HUGE}\r\nConnection: close\r\n\r\n"
                        );
                        if stream.write_all(head.as_bytes()).is_err() {
                            return;
                        }
                        let start = "<html><head><title>Huge Page</title></head><body>\n";
                        if stream.write_all(start.as_bytes()).is_err() {
                            return;
                        }
                        let chunk = huge_chunk();
                        let mut sent = start.len();
                        while sent < HUGE {
                            let n = chunk.len().min(HUGE - sent);
                            if stream.write_all(&chunk.as_bytes()[..n]).is_err() {
                                return;
                            }
                            sent += n;
                        }
                    }
                    _ => {
                        let _ = stream.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                    }
                }
            });
        }
    });
    port
}

async fn setup() -> (Ws, Gate, u16) {
    let port = serve_pages();
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\n"),
    );
    let g = gate_granting(&ws, &["fetch:127.0.0.1"]).await;
    (ws, g, port)
}

async fn fetch(g: &Gate, port: u16, path: &str, extra: Value) -> Observation {
    let mut input = json!({"url": format!("http://127.0.0.1:{port}{path}")});
    if let (Some(i), Some(e)) = (input.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            i.insert(k.clone(), v.clone());
        }
    }
    ok(g, "fetch", input).await
}

#[tokio::test]
async fn an_html_page_is_markdown_by_default_without_scripts_and_with_links() {
    let (_ws, g, port) = setup().await;
    let o = fetch(&g, port, "/page", json!({})).await;
    let c = &o.content;
    assert!(c.starts_with("# Format Test\n"), "{c}");
    assert!(!c.contains("SCRIPT-"), "a script's text is shown: {c}");
    assert!(!c.contains("HIDDEN-TEXT"), "{c}");
    assert!(!c.contains("color: red"), "{c}");
    assert!(!c.contains('<'), "markup left: {c}");
    assert!(
        c.contains(&format!(
            "[the guide](http://127.0.0.1:{port}/docs/guide.html)"
        )),
        "{c}"
    );
    assert!(c.contains("- first\n- second"), "{c}");
    assert_eq!(o.data["format"], "markdown", "{o:#?}");
    assert_eq!(o.data["title"], "Format Test", "{o:#?}");
    assert!(!o.truncated, "{o:#?}");
    // An untyped body that starts like a page is treated as one.
    let o = fetch(&g, port, "/untyped", json!({})).await;
    assert!(o.content.starts_with("# Format Test\n"), "{}", o.content);
    assert!(!o.content.contains("SCRIPT-"), "{}", o.content);
}

#[tokio::test]
async fn format_text_is_plain_and_format_raw_is_the_html() {
    let (_ws, g, port) = setup().await;
    let o = fetch(&g, port, "/page", json!({"format": "text"})).await;
    let c = &o.content;
    assert!(c.starts_with("Format Test\n"), "{c}");
    assert!(c.contains("Read the guide before you start."), "{c}");
    for markup in ["<", "](", "# ", "**"] {
        assert!(!c.contains(markup), "{markup:?} in {c}");
    }
    assert!(!c.contains("SCRIPT-"), "{c}");
    assert_eq!(o.data["format"], "text");

    let o = fetch(&g, port, "/page", json!({"format": "raw"})).await;
    assert_eq!(o.content, PAGE);
    assert_eq!(o.data["format"], "raw");

    let o = call(
        &g,
        "fetch",
        json!({"url": format!("http://127.0.0.1:{port}/page"), "format": "pdf"}),
    )
    .await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
}

#[tokio::test]
async fn json_and_text_pass_through_whatever_the_format() {
    let (_ws, g, port) = setup().await;
    for format in ["markdown", "text", "raw"] {
        let o = fetch(&g, port, "/json", json!({"format": format})).await;
        assert_eq!(o.content, JSON_BODY, "{format}");
        let o = fetch(&g, port, "/plain", json!({"format": format})).await;
        assert_eq!(o.content, "<p>a plain file</p>\n", "{format}");
    }
}

#[tokio::test]
async fn a_binary_body_is_described_not_dumped() {
    let (_ws, g, port) = setup().await;
    let o = fetch(&g, port, "/pdf", json!({})).await;
    assert!(!o.content.contains("PDF-SECRET-TEXT"), "{}", o.content);
    assert!(
        o.content.contains(&format!(
            "binary body: {} bytes of application/pdf",
            PDF.len()
        )),
        "{}",
        o.content
    );
    assert!(o.summary.contains("binary not shown"), "{}", o.summary);
    // Bytes that are not text, whatever the content-type says.
    let o = fetch(&g, port, "/blob", json!({"format": "text"})).await;
    assert!(
        o.content
            .starts_with("[binary body: 3000 bytes of text/html"),
        "{}",
        o.content
    );
    assert!(!o.content.contains('\u{FFFD}'), "{}", o.content);
}

#[tokio::test]
async fn a_50_mb_page_finishes_within_the_default_limits_and_says_what_was_cut() {
    let (_ws, g, port) = setup().await;
    // The largest max_bytes is the policy's default response limit: the body is cut there, not lost.
    for max_bytes in [None, Some(8u64 << 20), Some(10u64 << 20)] {
        let extra = match max_bytes {
            Some(n) => json!({"max_bytes": n}),
            None => json!({}),
        };
        let started = Instant::now();
        let o = fetch(&g, port, "/huge", extra).await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(30), "{max_bytes:?}: {took:?}");
        let c = &o.content;
        assert!(o.truncated, "{o:#?}");
        assert!(c.starts_with("# Huge Page\n"), "{}", &c[..c.len().min(300)]);
        assert!(c.contains("Paragraph 0 of the huge page"), "{}", &c[..300]);
        assert!(!c.contains("<p>") && !c.contains("var x"), "{}", &c[..300]);
        assert!(
            c.contains("[truncated: showing the first "),
            "{max_bytes:?}"
        );
        assert!(
            c.contains("[body cut at max_bytes="),
            "{max_bytes:?}: {}",
            &c[c.len() - 400..]
        );
        assert!(c.len() <= 60 << 10, "{}", c.len());
    }
}

#[tokio::test]
async fn malformed_and_hostile_pages_convert_or_are_cut_visibly() {
    let (_ws, g, port) = setup().await;
    let o = fetch(&g, port, "/malformed", json!({})).await;
    let c = &o.content;
    for word in ["Unclosed", "bold", "cell one", "cell two"] {
        assert!(c.contains(word), "{word} missing: {c}");
    }
    assert!(!c.contains("<table>") && !c.contains("<b>"), "{c}");

    // Nesting 300,000 deep, an element bomb, a tag too slow to parse: cut, said so, inside the
    // limits.
    for (path, why) in [
        ("/deep", "nests HTML elements more than"),
        ("/bomb", "builds more than"),
        ("/attrs", "took too long to parse"),
    ] {
        let started = Instant::now();
        let o = fetch(&g, port, path, json!({})).await;
        assert!(started.elapsed() < Duration::from_secs(30), "{path}");
        assert!(o.truncated, "{path}: {o:#?}");
        assert!(
            o.content.contains(&format!("[page cut: it {why}")),
            "{path}: {}",
            o.content
        );
    }
}
