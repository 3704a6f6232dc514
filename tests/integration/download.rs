//! The `download` built-in (issue #21 part 3): keyed `download:<host>` and checked as a write
//! of its target (both must be allowed), the body streamed to a temporary file and renamed into
//! place only when it is whole, size-capped, with fetch's address and redirect rules. Every
//! server is on 127.0.0.1, started by the test.

use crate::common::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::Duration;
use toolgate::cancel::CancelToken;
use toolgate::{Gate, Status};

/// The body `/file` serves: 200 000 bytes that are not all the same.
fn file_body() -> Vec<u8> {
    (0..200_000u32).map(|i| (i % 251) as u8).collect()
}

/// A server on 127.0.0.1: `/file` (with a length), `/stream` (64 KiB, no length, ends at
/// close), `/drop` (announces 100 000 bytes, sends half, closes), `/trickle` (1 KiB every
/// 50 ms, for ever), `/to?URL` (302 to URL), anything else 404.
fn serve() -> u16 {
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
                let _ = match path.as_str() {
                    "/file" => {
                        let body = file_body();
                        let head = format!("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                        stream
                            .write_all(head.as_bytes())
                            .and_then(|()| stream.write_all(&body))
                    }
                    "/stream" => stream
                        .write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
                        .and_then(|()| stream.write_all(&[b'y'; 65536])),
                    "/drop" => stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n",
                        )
                        .and_then(|()| stream.write_all(&[b'z'; 50000])),
                    "/trickle" => {
                        let mut r = stream.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\nConnection: close\r\n\r\n",
                        );
                        while r.is_ok() {
                            r = stream.write_all(&[b't'; 1024]);
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        r
                    }
                    p if p.starts_with("/to?") => stream.write_all(
                        format!(
                            "HTTP/1.1 302 Found\r\nLocation: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                            &p[4..]
                        )
                        .as_bytes(),
                    ),
                    _ => stream.write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 12\r\nConnection: close\r\n\r\nno such file",
                    ),
                };
            });
        }
    });
    port
}

/// A workspace whose policy lets the server's port be reached on loopback (plus `extra`).
fn ws_for(port: u16, extra: &str) -> Ws {
    let ws = Ws::new();
    ws.write(
        ".toolgate/policy.toml",
        format!(
            "{extra}\n[network]\nallow_private = [\"127.0.0.1:{port}\", \"localhost:{port}\"]\n"
        ),
    );
    ws
}

/// Every file below the workspace (outside `.toolgate/`), relative, sorted.
fn files(ws: &Ws) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".toolgate" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(&ws.root(), &ws.root(), &mut out);
    out.sort();
    out
}

fn url(port: u16, path: &str) -> String {
    format!("http://127.0.0.1:{port}{path}")
}

async fn download(g: &Gate, input: Value) -> toolgate::Observation {
    call(g, "download", input).await
}

#[tokio::test]
async fn a_download_from_an_allowed_loopback_server_lands_whole_with_its_sha256() {
    let port = serve();
    let ws = ws_for(port, "");
    let g = gate_granting(&ws, &["download:127.0.0.1", "write"]).await;
    let o = download(&g, json!({"url": url(port, "/file"), "path": "data/f.bin"})).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    let body = file_body();
    assert_eq!(ws.bytes("data/f.bin"), body);
    let sha = hex::encode(Sha256::digest(&body));
    assert_eq!(o.data["sha256"], sha, "{o:#?}");
    assert_eq!(o.data["bytes"], 200_000);
    assert_eq!(o.data["path"], "data/f.bin");
    assert_eq!(o.data["content_type"], "application/octet-stream");
    assert_eq!(o.data["final_url"], url(port, "/file"));
    assert!(o.content.contains(&sha), "{}", o.content);
    // Nothing else was left beside it.
    assert_eq!(files(&ws), vec!["data/f.bin"]);

    // The file it wrote counts as read: replacing it needs `overwrite` and nothing more.
    // A redirect on the same host is followed.
    let o = download(
        &g,
        json!({"url": url(port, &format!("/to?{}", url(port, "/stream"))), "path": "data/f.bin", "overwrite": true}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(ws.bytes("data/f.bin"), vec![b'y'; 65536]);
    assert_eq!(o.data["final_url"], url(port, "/stream"));
    assert_eq!(o.data["overwritten"], true);
    assert_eq!(files(&ws), vec!["data/f.bin"]);

    // The history has the write: undoing the second download puts the first one back.
    let undo = toolgate_command(&ws)
        .args(["undo", &o.audit_id])
        .output()
        .unwrap();
    assert!(
        undo.status.success(),
        "{}",
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(ws.bytes("data/f.bin"), body);
}

#[tokio::test]
async fn a_private_address_is_refused_without_allow_private_and_nothing_is_written() {
    let port = serve();
    let ws = Ws::new();
    let g = gate_granting(&ws, &["download:127.0.0.1", "write"]).await;
    let o = download(&g, json!({"url": url(port, "/file"), "path": "data/f.bin"})).await;
    assert_eq!(code(&o), "destination-ip-prohibited", "{o:#?}");
    assert!(
        o.reason.as_deref().unwrap().contains("data/f.bin"),
        "{o:#?}"
    );
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));
}

#[tokio::test]
async fn a_body_over_the_cap_or_cut_short_leaves_no_file_and_no_temporary_file() {
    let port = serve();
    let ws = ws_for(port, "");
    let g = gate_granting(&ws, &["download:127.0.0.1", "write"]).await;
    for (path, max) in [("/file", 1000), ("/stream", 1000)] {
        let o = download(
            &g,
            json!({"url": url(port, path), "path": "data/f.bin", "max_bytes": max}),
        )
        .await;
        assert_eq!(code(&o), "too-large", "{path}: {o:#?}");
        assert!(
            o.reason.as_deref().unwrap().contains("max_bytes=1000"),
            "{o:#?}"
        );
        assert!(files(&ws).is_empty(), "{path}: {:?}", files(&ws));
    }
    // The server closes the connection half-way through the body it announced.
    let o = download(&g, json!({"url": url(port, "/drop"), "path": "data/f.bin"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert!(
        o.reason
            .as_deref()
            .unwrap()
            .contains("Nothing was written to data/f.bin"),
        "{o:#?}"
    );
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));
    // A failure status writes nothing either.
    let o = download(&g, json!({"url": url(port, "/nope"), "path": "data/f.bin"})).await;
    assert_eq!(code(&o), "bad-status", "{o:#?}");
    assert!(o.reason.as_deref().unwrap().contains("404"), "{o:#?}");
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));

    // The policy's response budget, when a policy sets it, caps a download too.
    let ws = ws_for(port, "");
    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\nmax_response_bytes = 1024\n"),
    );
    let g = gate_granting(&ws, &["download:127.0.0.1", "write"]).await;
    let o = download(&g, json!({"url": url(port, "/stream"), "path": "f.bin"})).await;
    assert_eq!(code(&o), "too-large", "{o:#?}");
    assert!(
        o.reason
            .as_deref()
            .unwrap()
            .contains("[network] max_response_bytes"),
        "{o:#?}"
    );
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));
}

#[tokio::test]
async fn a_download_stopped_by_its_deadline_or_cancelled_leaves_nothing_behind() {
    let port = serve();
    let ws = ws_for(port, "[limits]\ntimeout_ms = 1500\n");
    let g = gate_granting(&ws, &["download:127.0.0.1", "write"]).await;
    // Warm the component first, so the deadline is spent on the download.
    let o = download(&g, json!({"url": url(port, "/file"), "path": "warm.bin"})).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    let o = download(
        &g,
        json!({"url": url(port, "/trickle"), "path": "data/t.bin"}),
    )
    .await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(files(&ws), vec!["warm.bin"], "{o:#?}");

    // Cancelled by the client once the temporary file exists: the guest is stopped at its next
    // tick and never removes it; the host does.
    let cancel = CancelToken::new();
    let c = cancel.clone();
    let dir = ws.path("data");
    let watcher = tokio::spawn(async move {
        for _ in 0..400 {
            let partial = std::fs::read_dir(&dir).ok().is_some_and(|entries| {
                entries.flatten().any(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(".toolgate-download-")
                })
            });
            if partial {
                c.cancel();
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        c.cancel();
        false
    });
    let o = g
        .call_cancellable(
            SESSION,
            "download",
            json!({"url": url(port, "/trickle"), "path": "data/t.bin"}),
            None,
            cancel,
        )
        .await;
    assert!(watcher.await.unwrap(), "the temporary file never appeared");
    assert_eq!(code(&o), "cancelled", "{o:#?}");
    assert_eq!(o.data["partial_removed"], true, "{o:#?}");
    assert!(
        o.reason.as_deref().unwrap().contains("data/t.bin"),
        "{o:#?}"
    );
    assert_eq!(files(&ws), vec!["warm.bin"], "{o:#?}");
}

#[tokio::test]
async fn a_redirect_to_a_host_not_allowed_for_download_is_refused() {
    let port = serve();
    let ws = ws_for(port, "");
    // `fetch:localhost` is no allowance for a download's hop.
    let g = gate_granting(&ws, &["download:127.0.0.1", "fetch:localhost", "write"]).await;
    let to = format!("/to?http://localhost:{port}/file");
    let o = download(&g, json!({"url": url(port, &to), "path": "f.bin"})).await;
    assert_eq!(code(&o), "http-request-denied", "{o:#?}");
    assert!(
        o.data["network_refused"][0]
            .as_str()
            .unwrap()
            .contains("localhost"),
        "{o:#?}"
    );
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));
    // Allowed for download too, the hop is followed.
    let g = gate_granting(&ws, &["download:127.0.0.1", "download:localhost", "write"]).await;
    let o = download(&g, json!({"url": url(port, &to), "path": "f.bin"})).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
}

#[tokio::test]
async fn targets_in_toolgate_state_or_on_the_deny_list_are_refused() {
    let port = serve();
    let ws = ws_for(port, "");
    let g = gate_granting(&ws, &["download:127.0.0.1", "*"]).await;
    for path in [
        ".toolgate/x.bin",
        ".env",
        "sub/.env",
        ".git/hooks/pre-commit",
    ] {
        let o = download(&g, json!({"url": url(port, "/file"), "path": path})).await;
        assert_eq!(o.status, Status::Denied, "{path}: {o:#?}");
        assert_eq!(o.stage.as_deref(), Some("scope"), "{path}: {o:#?}");
    }
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));
    assert!(!ws.path(".toolgate/x.bin").exists());
}

#[tokio::test]
async fn an_existing_file_is_replaced_only_with_overwrite_and_after_a_read() {
    let port = serve();
    let ws = ws_for(port, "");
    ws.write("data/f.bin", "old\n");
    let g = gate_granting(&ws, &["download:127.0.0.1", "write"]).await;
    let o = download(&g, json!({"url": url(port, "/file"), "path": "data/f.bin"})).await;
    assert_eq!(code(&o), "exists", "{o:#?}");
    assert!(o.hint.as_deref().unwrap().contains("overwrite"), "{o:#?}");
    assert_eq!(ws.read("data/f.bin"), "old\n");
    let input = json!({"url": url(port, "/file"), "path": "data/f.bin", "overwrite": true});
    let o = download(&g, input.clone()).await;
    assert_eq!(code(&o), "not-read", "{o:#?}");
    assert_eq!(ws.read("data/f.bin"), "old\n");
    read_first(&g, "data/f.bin").await;
    let o = download(&g, input).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(ws.bytes("data/f.bin"), file_body());
    assert_eq!(files(&ws), vec!["data/f.bin"]);
}

#[tokio::test]
async fn headless_without_a_grant_is_denied_naming_the_download_key() {
    let port = serve();
    let ws = ws_for(port, "");
    let g = gate_granting(&ws, &[]).await;
    let o = download(&g, json!({"url": url(port, "/file"), "path": "f.bin"})).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert!(
        o.hint.as_deref().unwrap().contains("download:127.0.0.1"),
        "{o:#?}"
    );
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));
}

#[tokio::test]
async fn the_write_must_be_allowed_as_well_as_the_host() {
    let port = serve();
    let ws = ws_for(port, "");
    // The host alone: the write is asked about, and headless that is a refusal naming it.
    let g = gate_granting(&ws, &["download:127.0.0.1"]).await;
    let o = download(&g, json!({"url": url(port, "/file"), "path": "data/f.bin"})).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert!(o.hint.as_deref().unwrap().contains("write:data/"), "{o:#?}");
    assert!(
        o.reason.as_deref().unwrap().contains("data/f.bin"),
        "{o:#?}"
    );
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));
    // A grant for that directory's writes completes it.
    let g = gate_granting(&ws, &["download:127.0.0.1", "write:data/**"]).await;
    let o = download(&g, json!({"url": url(port, "/file"), "path": "data/f.bin"})).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");

    // A deny rule for the write refuses the download before anyone is asked.
    let ws = ws_for(
        port,
        "[[rules]]\nkey = \"write:vendor/**\"\ndecision = \"deny\"\nreason = \"vendored code is reviewed\"\n",
    );
    let g = gate_granting(&ws, &["download:127.0.0.1", "write"]).await;
    let o = download(
        &g,
        json!({"url": url(port, "/file"), "path": "vendor/f.bin"}),
    )
    .await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("rules"), "{o:#?}");
    assert!(
        o.reason.as_deref().unwrap().contains("vendored code"),
        "{o:#?}"
    );
    assert!(files(&ws).is_empty(), "{:?}", files(&ws));
}
