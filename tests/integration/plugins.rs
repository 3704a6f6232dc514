//! Third-party plugins: install, digest, imports, capability intersection, and a hostile plugin
//! trying to get out of what it was granted. Network tests use a loopback server started here.

use crate::common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use toolgate::plugins::Record;
use toolgate::sandbox::{Limits, Sandbox};
use toolgate::{Gate, Observation, Status};

pub fn artifact(file: &str) -> PathBuf {
    PathBuf::from(toolgate::tools::registry::GUEST_ARTIFACT_DIR).join(file)
}

const HOSTILE: &str = "toolgate_tool_test_plugin.wasm";
const TOOL: &str = "plugin__test-plugin";

/// A manifest for the hostile plugin with these `[capabilities]` lines.
fn manifest_exactly(caps: &str) -> String {
    format!("name = \"test-plugin\"\nversion = \"0.0.1\"\nwit = \"toolgate:tool@0.1.0\"\n[capabilities]\n{caps}\n")
}

pub fn manifest(caps: &str, limits: &str) -> String {
    // The hostile plugin imports wasi:http, so it only loads with some network grant.
    let caps = if caps.contains("http") || caps.contains("exec") {
        caps.to_string()
    } else {
        format!("{caps}\nhttp = [\"unused.example.com\"]")
    };
    format!(
        "name = \"test-plugin\"\nversion = \"0.0.1\"\nwit = \"toolgate:tool@0.1.0\"\n[capabilities]\n{caps}\n[limits]\n{limits}\n"
    )
}

/// Install `component` with `manifest_text` through the library (what `plugin add --yes` does).
pub async fn install(ws: &Ws, component: &str, manifest_text: &str) -> toolgate::Result<Record> {
    let dir = tempfile::tempdir().unwrap();
    let mpath = dir.path().join("toolgate-plugin.toml");
    std::fs::write(&mpath, manifest_text).unwrap();
    let sandbox = Sandbox::new(Some(cache_dir())).unwrap();
    let store = ws.plugin_store();
    store
        .prepare(&sandbox, &Limits::default(), &artifact(component), &mpath)
        .await?
        .commit()
}

/// A gate over the workspace with `grants` for this run.
async fn gate(ws: &Ws, grants: &[&str]) -> Gate {
    gate_granting(ws, grants).await
}

async fn hostile(gate: &Gate, input: Value) -> Observation {
    call(gate, TOOL, input).await
}

pub fn refused_with(o: &Observation, needle: &str) {
    assert_ne!(o.status, Status::Ok, "expected a refusal, got {o:#?}");
    let text = format!(
        "{} {} {} {}",
        o.content,
        o.reason.clone().unwrap_or_default(),
        o.data,
        code(o)
    );
    assert!(text.contains(needle), "expected `{needle}` in {o:#?}");
}

#[tokio::test]
async fn reads_only_inside_its_granted_paths() {
    let ws = Ws::new();
    ws.write("granted/a.txt", "inside")
        .write("other/b.txt", "outside");
    install(&ws, HOSTILE, &manifest("fs_read = [\"granted\"]", ""))
        .await
        .unwrap();
    let g = gate(&ws, &[TOOL]).await;
    let o = hostile(
        &g,
        json!({"mode": "read", "path": "/workspace/granted/a.txt"}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.content, "inside");
    for path in [
        "/workspace/other/b.txt",
        "/workspace/granted/../other/b.txt",
        "/etc/passwd",
        "/workspace/../../etc/passwd",
    ] {
        let o = hostile(&g, json!({"mode": "read", "path": path})).await;
        assert_eq!(o.status, Status::Error, "{path}: {o:#?}");
        assert!(
            !o.content.contains("outside") && !o.content.contains("root:"),
            "{o:#?}"
        );
    }
    // Writing is not granted at all.
    let o = hostile(
        &g,
        json!({"mode": "write", "path": "/workspace/granted/a.txt", "text": "x"}),
    )
    .await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(ws.read("granted/a.txt"), "inside");
}

#[tokio::test]
async fn secrets_and_host_state_stay_closed_inside_a_granted_workspace() {
    let ws = Ws::new();
    ws.write(".env", "API_KEY=hunter2")
        .write("src/ok.txt", "fine")
        .write(".toolgate/grants.toml", "");
    install(
        &ws,
        HOSTILE,
        &manifest("fs_read = [\".\"]\nfs_write = [\".\"]", ""),
    )
    .await
    .unwrap();
    let g = gate(&ws, &[TOOL]).await;
    let o = hostile(&g, json!({"mode": "read", "path": "/workspace/src/ok.txt"})).await;
    assert_eq!(o.content, "fine", "{o:#?}");
    for path in [
        "/workspace/.env",
        "/workspace/.toolgate/grants.toml",
        "/workspace/.toolgate/plugins/test-plugin/plugin.toml",
        "/workspace/.toolgate/state.db",
    ] {
        let o = hostile(&g, json!({"mode": "read", "path": path})).await;
        assert_eq!(o.status, Status::Error, "{path}: {o:#?}");
        assert!(!o.content.contains("hunter2"), "{o:#?}");
    }
    for path in [
        "/workspace/.toolgate/grants.toml",
        "/workspace/.toolgate/plugins/test-plugin/plugin.toml",
        "/workspace/.env",
    ] {
        let o = hostile(
            &g,
            json!({"mode": "write", "path": path, "text": "[[grants]]\nkey = \"shell\"\n"}),
        )
        .await;
        assert_eq!(o.status, Status::Error, "{path}: {o:#?}");
    }
    assert_eq!(ws.read(".toolgate/grants.toml"), "");
    assert_eq!(ws.read(".env"), "API_KEY=hunter2");
    // The listing of the workspace does not show what it may not open.
    let o = hostile(&g, json!({"mode": "list", "path": "/workspace"})).await;
    assert!(!o.content.contains(".env"), "{o:#?}");
    // What it was granted, it can write.
    let o = hostile(
        &g,
        json!({"mode": "write", "path": "/workspace/src/new.txt", "text": "made"}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(ws.read("src/new.txt"), "made");
}

#[tokio::test]
async fn it_sees_only_the_environment_variables_both_sides_named() {
    let ws = Ws::new();
    // Set for this process only; the names are unique to this test.
    std::env::set_var("TOOLGATE_PLUGIN_TEST_VISIBLE", "yes");
    std::env::set_var("TOOLGATE_PLUGIN_TEST_HIDDEN", "no");
    install(
        &ws,
        HOSTILE,
        &manifest(
            "fs_read = [\"src\"]\nenv = [\"TOOLGATE_PLUGIN_TEST_VISIBLE\"]",
            "",
        ),
    )
    .await
    .unwrap();
    let g = gate(&ws, &[TOOL]).await;
    let o = hostile(&g, json!({"mode": "env"})).await;
    assert_eq!(
        o.content.trim(),
        "TOOLGATE_PLUGIN_TEST_VISIBLE=yes",
        "{o:#?}"
    );
}

#[tokio::test]
async fn a_component_importing_host_only_interfaces_does_not_install() {
    let ws = Ws::new();
    // The host exec capability: not for plugins.
    let e = install(
        &ws,
        "toolgate_tool_job_kill.wasm",
        &manifest("", "").replace("test-plugin", "job_kill"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("toolgate:host/exec"), "{e}");
    // The host-assisted walk and read-ahead: built-ins only, even with a filesystem grant.
    for (wasm, name, import) in [
        ("toolgate_tool_glob.wasm", "glob", "toolgate:fs/walk"),
        (
            "toolgate_tool_grep.wasm",
            "grep",
            "toolgate:search/read-ahead",
        ),
    ] {
        let e = install(
            &ws,
            wasm,
            &manifest_exactly("fs_read = [\".\"]").replace("test-plugin", name),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(import) && e.contains("built-in tools only"),
            "{e}"
        );
    }
    // Asking for exec in the manifest is refused by name.
    let e = install(&ws, HOSTILE, &manifest("exec = true", ""))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("exec"), "{e}");
    // Nothing was installed by any of these.
    assert!(!ws.path(".toolgate/plugins/test-plugin").exists());
    assert!(!ws.path(".toolgate/plugins/job_kill").exists());
    assert!(!ws.path(".toolgate/plugins/grep").exists());
}

/// The WASI interfaces language toolchains link in (sockets, the filesystem, HTTP) install
/// without a grant for them, and then reach nothing: no socket is ever made, there is no file
/// to open, every request is refused by the host.
#[tokio::test]
async fn wasi_imports_without_a_grant_install_but_reach_nothing() {
    // Raw sockets: the component connects to 127.0.0.1:9 with std::net. Listen there when
    // this process may (it is the discard port; usually free), to see that nothing arrives.
    let discard = TcpListener::bind("127.0.0.1:9").ok();
    let ws = Ws::new();
    ws.write("src/a.txt", "secret-ish");
    install(
        &ws,
        "toolgate_tool_test_sockets.wasm",
        &manifest_exactly("").replace("test-plugin", "test-sockets"),
    )
    .await
    .unwrap();
    let g = gate(&ws, &["plugin__test-sockets"]).await;
    let o = call(&g, "plugin__test-sockets", json!({})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "connect-failed", "{o:#?}");
    assert!(
        o.content.to_lowercase().contains("permission denied")
            || o.content.to_lowercase().contains("access"),
        "{o:#?}"
    );
    if let Some(l) = discard {
        l.set_nonblocking(true).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            l.accept().is_err(),
            "the plugin's socket reached 127.0.0.1:9"
        );
    }
    drop(g);

    // wasi:http without an http grant: installed, and every request is refused by the host
    // before anything is resolved or connected.
    let port = serve_http();
    let (seen_port, seen) = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        l.set_nonblocking(true).unwrap();
        (p, l)
    };
    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\", \"127.0.0.1:{seen_port}\"]\n"),
    );
    install(&ws, HOSTILE, &manifest_exactly("fs_read = [\"src\"]"))
        .await
        .unwrap();
    let g = gate(&ws, &[TOOL]).await;
    let tool = g.tools().find(|t| t.name == TOOL).unwrap();
    assert_eq!(
        serde_json::to_value(tool.risk).unwrap(),
        json!("read-only"),
        "no network grant: its risk is not raised"
    );
    for url in [
        format!("http://127.0.0.1:{port}/ok"),
        format!("http://127.0.0.1:{seen_port}/ok"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ] {
        let o = hostile(&g, json!({"mode": "fetch", "url": url})).await;
        refused_with(&o, "http-request-denied");
        assert!(!o.content.contains("hello"), "{o:#?}");
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        seen.accept().is_err(),
        "a request without a network grant connected"
    );
    // The grant it has still works.
    let o = hostile(&g, json!({"mode": "read", "path": "/workspace/src/a.txt"})).await;
    assert_eq!(o.content, "secret-ish", "{o:#?}");
    drop(g);

    // wasi:filesystem without a filesystem grant: installed, with nothing to open.
    install(&ws, HOSTILE, &manifest("http = [\"example.com\"]", ""))
        .await
        .unwrap();
    let g = gate(&ws, &[TOOL]).await;
    for path in ["/workspace/src/a.txt", "/workspace", "/", "/etc/passwd"] {
        let mode = if path.ends_with(".txt") || path.ends_with("passwd") {
            "read"
        } else {
            "list"
        };
        let o = hostile(&g, json!({"mode": mode, "path": path})).await;
        assert_eq!(o.status, Status::Error, "{path}: {o:#?}");
        assert!(
            !o.content.contains("secret-ish") && !o.content.contains("root:"),
            "{o:#?}"
        );
    }
    let o = hostile(
        &g,
        json!({"mode": "write", "path": "/workspace/src/new.txt", "text": "x"}),
    )
    .await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert!(!ws.path("src/new.txt").exists());
}

#[tokio::test]
async fn a_tampered_component_is_refused_at_load_with_the_reason() {
    let ws = Ws::new();
    ws.write("src/a.txt", "x");
    install(&ws, HOSTILE, &manifest("fs_read = [\"src\"]", ""))
        .await
        .unwrap();
    let g = gate(&ws, &[TOOL]).await;
    assert_eq!(hostile(&g, json!({"mode": "ok"})).await.status, Status::Ok);
    drop(g);
    // One byte changed in the installed copy.
    let file = ws.path(".toolgate/plugins/test-plugin/component.wasm");
    let mut bytes = std::fs::read(&file).unwrap();
    let i = bytes.len() / 2;
    bytes[i] ^= 0x01;
    std::fs::write(&file, bytes).unwrap();
    let g = gate(&ws, &[TOOL]).await;
    let o = hostile(&g, json!({"mode": "ok"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(code(&o), "plugin-refused");
    assert!(
        o.content.contains("sha256") && o.content.contains("changed"),
        "{o:#?}"
    );
    assert!(g.tools().all(|t| t.name != TOOL));
    // `policy check` reports it too, as an error.
    let problems = g.check();
    assert!(
        problems
            .iter()
            .any(|p| p.severity == "error" && p.message.contains("refused at load")),
        "{problems:#?}"
    );
}

#[tokio::test]
async fn a_manifest_digest_that_does_not_match_is_refused_at_install() {
    let ws = Ws::new();
    let wrong = "0".repeat(64);
    let text = manifest("fs_read = [\".\"]\nhttp = [\"example.com\"]", "")
        .replace("wit =", &format!("sha256 = \"{wrong}\"\nwit ="));
    let e = install(&ws, HOSTILE, &text).await.unwrap_err().to_string();
    assert!(
        e.contains("not the component the manifest describes"),
        "{e}"
    );
    let right = toolgate::plugins::sha256_hex(&std::fs::read(artifact(HOSTILE)).unwrap());
    let text = text.replace(&wrong, &right);
    let r = install(&ws, HOSTILE, &text).await.unwrap();
    assert_eq!(r.sha256, right);
}

#[tokio::test]
async fn a_plugin_never_skips_the_ladder_and_cannot_shadow_a_builtin() {
    let ws = Ws::new();
    ws.write("src/a.txt", "x");
    // It calls itself `read`... no: its component calls itself `test-plugin`, so a manifest
    // naming it `read` is refused; and a plugin is served under its prefix anyway.
    let e = install(
        &ws,
        HOSTILE,
        &manifest("fs_read = [\".\"]\nhttp = [\"example.com\"]", "").replace("test-plugin", "read"),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("read"), "{e}");
    install(&ws, HOSTILE, &manifest("fs_read = [\"src\"]", ""))
        .await
        .unwrap();
    // Read-only, but a stranger's code: headless without a grant, it is denied.
    let g = gate(&ws, &[]).await;
    let o = hostile(&g, json!({"mode": "ok"})).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert!(o.hint.as_deref().unwrap_or("").contains(TOOL), "{o:#?}");
    let names: Vec<String> = g.tools().map(|t| t.name.clone()).collect();
    assert!(names.contains(&TOOL.to_string()) && names.contains(&"read".to_string()));
}

#[tokio::test]
async fn manifest_limits_stop_a_looping_or_greedy_plugin_and_the_host_keeps_serving() {
    let ws = Ws::new();
    ws.write("src/a.txt", "x");
    install(
        &ws,
        HOSTILE,
        &manifest("fs_read = [\"src\"]", "timeout_ms = 300\nmemory_mb = 32"),
    )
    .await
    .unwrap();
    let g = gate(&ws, &[TOOL]).await;
    let o = hostile(&g, json!({"mode": "loop"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert!(o.content.contains("300 ms"), "{o:#?}");
    let o = hostile(&g, json!({"mode": "alloc"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert!(o.content.contains("memory"), "{o:#?}");
    assert_eq!(hostile(&g, json!({"mode": "ok"})).await.status, Status::Ok);
}

/// A loopback HTTP server: `/ok` answers `hello`, `/big` 64 KiB, `/to?L` redirects to `L`,
/// `/stall` sends 5 of 100 body bytes and then nothing.
/// Returns its port.
pub fn serve_http() -> u16 {
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
                let response = if path == "/ok" {
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_string()
                } else if path == "/big" {
                    let body = "x".repeat(65536);
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else if path == "/stall" {
                    // A head and a little of the body, then nothing: a slow-loris server.
                    let _ =
                        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello");
                    std::thread::sleep(std::time::Duration::from_secs(20));
                    return;
                } else if let Some(target) = path.strip_prefix("/to?") {
                    format!("HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                } else {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_string()
                };
                let _ = stream.write_all(response.as_bytes());
            });
        }
    });
    port
}

#[tokio::test]
async fn network_reaches_only_granted_hosts_and_never_private_addresses_unless_the_policy_names_them(
) {
    let port = serve_http();
    let other = serve_http();
    let ws = Ws::new();
    ws.write("src/a.txt", "x");
    install(
        &ws,
        HOSTILE,
        &manifest(
            &format!("fs_read = [\"src\"]\nhttp = [\"127.0.0.1:{port}\", \"169.254.169.254\"]"),
            "",
        ),
    )
    .await
    .unwrap();
    // Without the policy naming loopback, even a granted loopback host is refused.
    let g = gate(&ws, &[TOOL]).await;
    let o = hostile(
        &g,
        json!({"mode": "fetch", "url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    refused_with(&o, "destination-ip-prohibited");
    drop(g);

    ws.write(
        ".toolgate/policy.toml",
        format!("[network]\nallow_private = [\"127.0.0.1:{port}\"]\n"),
    );
    let g = gate(&ws, &[TOOL]).await;
    let o = hostile(
        &g,
        json!({"mode": "fetch", "url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.content, "status=200\nhello");
    // Another port on the same address is not on the list.
    let o = hostile(
        &g,
        json!({"mode": "fetch", "url": format!("http://127.0.0.1:{other}/ok")}),
    )
    .await;
    refused_with(&o, "http-request-denied");
    // A redirect to a host not on the list is refused at the hop.
    let o = hostile(
        &g,
        json!({"mode": "fetch", "url": format!("http://127.0.0.1:{port}/to?http://127.0.0.1:{other}/ok")}),
    )
    .await;
    refused_with(&o, "http-request-denied");
    let o = hostile(
        &g,
        json!({"mode": "fetch", "url": format!("http://127.0.0.1:{port}/to?http://localhost:{port}/ok")}),
    )
    .await;
    refused_with(&o, "not on this call's network allowlist");
    // A redirect that stays on the list is followed.
    let o = hostile(
        &g,
        json!({"mode": "fetch", "url": format!("http://127.0.0.1:{port}/to?/ok")}),
    )
    .await;
    assert_eq!(o.content, "status=200\nhello", "{o:#?}");
    // Cloud metadata: listed by the plugin, but a link-local address the policy does not name.
    let o = hostile(
        &g,
        json!({"mode": "fetch", "url": "http://169.254.169.254/latest/meta-data/"}),
    )
    .await;
    refused_with(&o, "destination-ip-prohibited");
}

#[tokio::test]
async fn the_grant_narrows_what_the_manifest_requests() {
    let port = serve_http();
    let ws = Ws::new();
    ws.write("src/a.txt", "in src")
        .write("docs/b.txt", "in docs");
    ws.write(
        ".toolgate/policy.toml",
        "[network]\nallow_private = [\"127.0.0.1\"]\n",
    );
    install(
        &ws,
        HOSTILE,
        &manifest(
            "fs_read = [\".\"]\nhttp = [\"127.0.0.1\"]\nenv = [\"HOME\"]",
            "",
        ),
    )
    .await
    .unwrap();
    // The user narrows the grant by hand: only src/, and a port that is not the server's.
    let record = ws.path(".toolgate/plugins/test-plugin/plugin.toml");
    let text = std::fs::read_to_string(&record).unwrap();
    let (head, _) = text.split_once("\n[granted]").unwrap();
    let narrowed =
        format!("{head}\n[granted]\nfs_read = [\"src\"]\nhttp = [\"127.0.0.1:1\"]\n\n[limits]\n");
    std::fs::write(&record, narrowed).unwrap();
    let g = gate(&ws, &[TOOL]).await;
    let o = hostile(&g, json!({"mode": "read", "path": "/workspace/src/a.txt"})).await;
    assert_eq!(o.content, "in src", "{o:#?}");
    let o = hostile(&g, json!({"mode": "read", "path": "/workspace/docs/b.txt"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    let o = hostile(
        &g,
        json!({"mode": "fetch", "url": format!("http://127.0.0.1:{port}/ok")}),
    )
    .await;
    refused_with(&o, "http-request-denied");
    let o = hostile(&g, json!({"mode": "env"})).await;
    assert_eq!(o.content.trim(), "", "{o:#?}");
}

#[test]
fn the_example_plugin_installs_lists_runs_and_is_removed_from_the_command_line() {
    let ws = Ws::new();
    ws.write("src/a.txt", "one two three\nfour\n")
        .write("src/b.txt", "five\n");
    let example =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guest-tools/examples/word-count");
    let wasm = artifact("toolgate_plugin_word_count.wasm");
    let manifest = example.join("toolgate-plugin.toml");
    // Without a terminal, installing needs --yes; nothing is written before that.
    let out = toolgate_command(&ws)
        .args(["plugin", "add"])
        .arg(&wasm)
        .arg("--manifest")
        .arg(&manifest)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("read     ."),
        "shows what it asks for: {stdout}"
    );
    assert!(!ws.path(".toolgate/plugins/word-count").exists());
    let out = toolgate_command(&ws)
        .args(["plugin", "add", "--yes"])
        .arg(&wasm)
        .arg("--manifest")
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = toolgate_command(&ws)
        .args(["plugin", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("plugin__word-count\t0.1.0\tok"), "{listed}");

    let out = toolgate_command(&ws)
        .args([
            "--grant",
            "plugin__word-count:**",
            "call",
            "plugin__word-count",
            r#"{"path": "src"}"#,
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "ok", "{v:#}");
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("src/a.txt") && content.contains("src/b.txt"),
        "{content}"
    );
    // 3 lines, 5 words, 24 bytes in all.
    assert!(
        content
            .lines()
            .any(|l| l.contains('3') && l.contains('5') && l.contains("24")),
        "{content}"
    );

    let out = toolgate_command(&ws)
        .args(["plugin", "remove", "word-count"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = toolgate_command(&ws)
        .args([
            "--grant",
            "plugin__word-count",
            "call",
            "plugin__word-count",
            r#"{"path": "src"}"#,
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error_code"], "unknown-tool", "{v:#}");
}

#[tokio::test]
async fn a_path_argument_outside_the_grant_is_denied_before_anyone_is_asked() {
    let ws = Ws::new();
    ws.write("src/a.txt", "one two\n")
        .write("docs/b.txt", "three\n");
    install(
        &ws,
        "toolgate_plugin_word_count.wasm",
        "name = \"word-count\"\nversion = \"1.0.0\"\nwit = \"toolgate:tool@0.1.0\"\n[capabilities]\nfs_read = [\"src\"]\n",
    )
    .await
    .unwrap();
    let g = gate(&ws, &["plugin__word-count:**"]).await;
    let o = ok(&g, "plugin__word-count", json!({"path": "src"})).await;
    assert!(o.content.contains("src/a.txt"), "{o:#?}");
    let o = call(&g, "plugin__word-count", json!({"path": "docs"})).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert_eq!(o.stage.as_deref(), Some("scope"));
    assert!(
        o.reason
            .as_deref()
            .unwrap()
            .contains("outside what the plugin may read (src)"),
        "{o:#?}"
    );
}
