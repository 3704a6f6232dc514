//! `toolgate plugin test`: one call with the manifest's capabilities, and the report of what it
//! touched (files, hosts), what the host refused, and which requested capabilities went unused.
//! The network case uses a loopback listener started here that counts its connections.

use crate::common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use toolgate::sandbox::{Limits, Sandbox};

fn artifact(file: &str) -> PathBuf {
    PathBuf::from(toolgate::tools::registry::GUEST_ARTIFACT_DIR).join(file)
}

/// Install `component` with `manifest` as `plugin add --yes` does (signed by the test user).
async fn install(ws: &Ws, component: &str, manifest: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolgate-plugin.toml");
    std::fs::write(&path, manifest).unwrap();
    let sandbox = Sandbox::new(Some(cache_dir())).unwrap();
    ws.plugin_store()
        .prepare(&sandbox, &Limits::default(), &artifact(component), &path)
        .await
        .unwrap()
        .commit()
        .unwrap();
}

/// `toolgate plugin test NAME INPUT [--json]`: exit code, stdout (stderr after it unless
/// `json`).
fn plugin_test(ws: &Ws, name: &str, input: &str, json: bool) -> (i32, String) {
    let mut cmd = toolgate_command(ws);
    cmd.args(["plugin", "test", name, input]);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let text = if json {
        stdout
    } else {
        format!("{stdout}{stderr}")
    };
    (out.status.code().unwrap_or(-1), text)
}

fn report(ws: &Ws, name: &str, input: &str) -> (i32, Value) {
    let (code, text) = plugin_test(ws, name, input, true);
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (code, v)
}

/// `(op, path)` of every recorded file operation that `outcome` describes.
fn files(v: &Value, outcome: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["outcome"] == outcome)
        .map(|e| {
            (
                e["op"].as_str().unwrap().to_string(),
                e["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn capability<'a>(v: &'a Value, kind: &str, value: &str) -> &'a Value {
    v["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == kind && c["value"] == value)
        .unwrap_or_else(|| panic!("no {kind} {value} in {v:#}"))
}

#[tokio::test]
async fn the_report_lists_the_files_read_the_hidden_secret_and_the_unused_write_grant() {
    let ws = Ws::new();
    ws.write("src/a.txt", "one two three\nfour\n")
        .write("src/sub/b.txt", "five\n")
        .write("src/.env", "TOKEN=hunter2\n")
        .write("docs/c.txt", "elsewhere\n");
    install(
        &ws,
        "toolgate_plugin_word_count.wasm",
        "name = \"word-count\"\nversion = \"0.1.0\"\nwit = \"toolgate:tool@0.1.0\"\n[capabilities]\nfs_read = [\"src\"]\nfs_write = [\"out\"]\n",
    )
    .await;
    let (code, v) = report(&ws, "word-count", r#"{"path": "src"}"#);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["result"]["status"], "ok", "{v:#}");
    assert!(!v.to_string().contains("hunter2"), "{v:#}");
    let touched = files(&v, "ok");
    let read: Vec<&str> = touched
        .iter()
        .filter(|(op, _)| op == "read")
        .map(|(_, p)| p.as_str())
        .collect();
    assert_eq!(read, ["src/a.txt", "src/sub/b.txt"], "{v:#}");
    let listed: Vec<&str> = touched
        .iter()
        .filter(|(op, _)| op == "list")
        .map(|(_, p)| p.as_str())
        .collect();
    assert_eq!(listed, ["src", "src/sub"], "{v:#}");
    assert_eq!(v["hidden"], serde_json::json!(["src/.env"]), "{v:#}");
    assert_eq!(v["mounts"][0]["path"], "src", "{v:#}");
    assert_eq!(capability(&v, "fs_read", "src")["state"], "used");
    let out = capability(&v, "fs_write", "out");
    assert_eq!(out["state"], "unused", "{v:#}");
    assert_eq!(
        out["advice"],
        "fs_write `out` was requested but never used: remove it from [capabilities]"
    );

    // The text report says the same, then prints the result as `toolgate call` does.
    let (code, text) = plugin_test(&ws, "plugin__word-count", r#"{"path": "src"}"#, false);
    assert_eq!(code, 0, "{text}");
    for needle in [
        "read      src/a.txt",
        "hidden    src/.env",
        "fs_write `out` was requested but never used: remove it from [capabilities]",
        "result (as `toolgate call` prints it):",
        "\"status\": \"ok\"",
    ] {
        assert!(text.contains(needle), "`{needle}` in:\n{text}");
    }

    // A path argument outside fs_read is refused before the plugin runs, even here.
    let (code, v) = report(&ws, "word-count", r#"{"path": "docs"}"#);
    assert_eq!(code, 3, "{v:#}");
    assert_eq!(v["result"]["status"], "denied", "{v:#}");
    assert!(v["files"].as_array().unwrap().is_empty(), "{v:#}");
    let refused = v["refused"].to_string();
    assert!(
        refused.contains("outside what the plugin may read"),
        "{v:#}"
    );
}

/// A loopback HTTP server answering `hello` to everything; counts the connections it accepts.
fn counting_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            seen.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        }
    });
    (port, count)
}

#[tokio::test]
async fn secrets_reads_outside_the_grant_and_hosts_not_in_the_manifest_are_refused_and_reported() {
    let (port, connections) = counting_server();
    let ws = Ws::new();
    ws.write("src/a.txt", "inside\n")
        .write("src/.env", "TOKEN=hunter2\n")
        .write("top.txt", "outside the grant\n")
        .write(
            ".toolgate/policy.toml",
            format!("[network]\nallow_private = [\"127.0.0.1:{port}\", \"localhost:{port}\"]\n"),
        );
    install(
        &ws,
        "toolgate_tool_test_plugin.wasm",
        &format!("name = \"test-plugin\"\nversion = \"0.0.1\"\nwit = \"toolgate:tool@0.1.0\"\n[capabilities]\nfs_read = [\"src\"]\nhttp = [\"127.0.0.1:{port}\", \"unused.example.com\"]\n"),
    )
    .await;

    // The secret inside the grant: refused by the host, named in the report.
    let (code, v) = report(
        &ws,
        "test-plugin",
        r#"{"mode": "read", "path": "src/.env"}"#,
    );
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(
        files(&v, "refused"),
        [("read".to_string(), "src/.env".to_string())]
    );
    let refused = &v["refused"][0];
    assert_eq!(refused["why"], "on the secrets deny-list", "{v:#}");
    assert!(!v.to_string().contains("hunter2"), "{v:#}");

    // Nothing more than the manifest: a file outside fs_read is not there, even here.
    let (code, v) = report(&ws, "test-plugin", r#"{"mode": "read", "path": "top.txt"}"#);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["result"]["status"], "error", "{v:#}");
    assert!(!v.to_string().contains("outside the grant\\n"), "{v:#}");
    assert!(v["files"].as_array().unwrap().is_empty(), "{v:#}");

    // The manifest's host: sent, and marked used; the other requested host is unused.
    let (code, v) = report(
        &ws,
        "test-plugin",
        &format!(r#"{{"mode": "send", "url": "http://127.0.0.1:{port}/ok"}}"#),
    );
    assert_eq!(code, 0, "{v:#}");
    let host = &v["hosts"][0];
    assert_eq!(host["method"], "GET");
    assert_eq!(host["target"], format!("http://127.0.0.1:{port}"));
    assert_eq!(host["outcome"], "ok");
    assert_eq!(host["status"], 200);
    let hp = format!("127.0.0.1:{port}");
    assert_eq!(capability(&v, "http", &hp)["state"], "used");
    assert_eq!(
        capability(&v, "http", "unused.example.com")["state"],
        "unused"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 1);

    // A host the manifest does not list (though the policy would let it resolve to loopback):
    // refused, reported with the reason, and never connected to.
    let (code, v) = report(
        &ws,
        "test-plugin",
        &format!(r#"{{"mode": "send", "url": "http://localhost:{port}/ok"}}"#),
    );
    assert_eq!(code, 1, "{v:#}");
    let host = &v["hosts"][0];
    assert_eq!(host["target"], format!("http://localhost:{port}"));
    assert_eq!(host["outcome"], "refused", "{v:#}");
    assert!(
        host["why"]
            .as_str()
            .unwrap()
            .contains("is not on this call's network allowlist"),
        "{v:#}"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 1, "{v:#}");
    let (_, text) = plugin_test(
        &ws,
        "test-plugin",
        &format!(r#"{{"mode": "send", "url": "http://localhost:{port}/ok"}}"#),
        false,
    );
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("  GET       http://localhost:{port}  ")))
        .unwrap_or_else(|| panic!("no refused line in:\n{text}"));
    assert!(
        line.ends_with("`localhost` is not on this call's network allowlist"),
        "{text}"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_plugin_the_repository_shipped_is_refused_by_plugin_test_too() {
    // Installed (and signed) in one workspace, then shipped into another inside the repository.
    let from = Ws::new();
    install(
        &from,
        "toolgate_plugin_word_count.wasm",
        "name = \"word-count\"\nversion = \"0.1.0\"\nwit = \"toolgate:tool@0.1.0\"\n[capabilities]\nfs_read = [\".\"]\n",
    )
    .await;
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let shipped = from.path(".toolgate/plugins/word-count");
    for f in ["plugin.toml", "component.wasm"] {
        ws.plant(
            &format!(".toolgate/plugins/word-count/{f}"),
            std::fs::read(shipped.join(f)).unwrap(),
        );
    }
    let (code, v) = report(&ws, "word-count", r#"{"path": "."}"#);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["result"]["error_code"], "plugin-refused", "{v:#}");
    assert!(
        v["result"]["reason"]
            .as_str()
            .unwrap()
            .contains("was not installed by your toolgate"),
        "{v:#}"
    );
    assert!(v["files"].as_array().unwrap().is_empty(), "{v:#}");
    assert!(v["notes"].to_string().contains("did not run"), "{v:#}");

    // Not installed at all: said plainly, exit 2.
    let (code, text) = plugin_test(&ws, "nope", "{}", false);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("no plugin `nope` is installed"), "{text}");
}
