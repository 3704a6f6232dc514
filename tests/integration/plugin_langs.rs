//! Plugins written in Python (componentize-py) and JavaScript (componentize-js): the
//! word-count examples count exactly like the Rust one, a plugin scaffolded with
//! `plugin new --lang python|js` builds and runs as its README says, and a hostile Python
//! plugin is refused everything the hostile Rust plugin is refused.
//!
//! The toolchains are installed from PyPI and npm by tests/scripts/install-plugin-toolchains.sh
//! (cached under target/plugin-toolchains/); each component is built once per test process
//! (and cached by the digest of its sources across processes). Without the registries the
//! tests print why and return, except on CI (`CI` set), where they fail.

#[path = "plugin_langs_build.rs"]
pub mod build;

use crate::common::*;
use crate::plugins::refused_with;
use serde_json::{json, Value};
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;
use toolgate::sandbox::{Limits, Sandbox};
use toolgate::Status;

/// Everything the tests here build, built in parallel the first time a test asks.
struct Built {
    word_count_py: Result<PathBuf, String>,
    word_count_js: Result<PathBuf, String>,
    hostile_py: Result<PathBuf, String>,
    /// `plugin new --lang python|js` plugins, with their folders.
    scaffold_py: Result<(PathBuf, PathBuf), String>,
    scaffold_js: Result<(PathBuf, PathBuf), String>,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let tc = build::toolchains();
        let py = tc.python.clone();
        let js = tc.js.clone();
        let scaffold = |lang: &str, tc: &Result<PathBuf, String>| {
            let tc = tc.clone();
            let lang = lang.to_string();
            std::thread::spawn(move || -> Result<(PathBuf, PathBuf), String> {
                let tc = tc?;
                let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                    .join("plugin-langs")
                    .join(format!("scaffold-{lang}"));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
                let out = std::process::Command::new(crate::common::toolgate_bin())
                    .args(["plugin", "new", "line-head", "--lang", &lang, "--dir"])
                    .arg(&dir)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "plugin new --lang {lang}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let wasm = match lang.as_str() {
                    "python" => {
                        build::build(&tc, build::Lang::Python, "scaffold-py", &dir, "wit", "tool")?
                    }
                    _ => build::build(&tc, build::Lang::Js, "scaffold-js", &dir, "wit", "plugin")?,
                };
                Ok((wasm, dir))
            })
        };
        let spawn = |tc: &Result<PathBuf, String>, f: fn(&Path) -> Result<PathBuf, String>| {
            let tc = tc.clone();
            std::thread::spawn(move || f(&tc?))
        };
        let wc_py = spawn(&py, build::word_count_py);
        let wc_js = spawn(&js, build::word_count_js);
        let hostile = spawn(&py, build::hostile_py);
        let sc_py = scaffold("python", &py);
        let sc_js = scaffold("js", &js);
        Built {
            word_count_py: wc_py.join().unwrap(),
            word_count_js: wc_js.join().unwrap(),
            hostile_py: hostile.join().unwrap(),
            scaffold_py: sc_py.join().unwrap(),
            scaffold_js: sc_js.join().unwrap(),
        }
    })
}

/// The built component, or `None` after printing why the test is skipped (a missing
/// toolchain; on CI that fails the test instead). A build that fails always fails the test.
fn need<T: Clone>(what: &str, r: &Result<T, String>) -> Option<T> {
    match r {
        Ok(v) => Some(v.clone()),
        Err(why) if why.contains("is not installed") && !build::required() => {
            eprintln!("SKIPPED ({what}): {why} (PyPI or npm is not reachable from here; set CI or TOOLGATE_REQUIRE_PLUGIN_TOOLCHAINS to make this a failure)");
            None
        }
        Err(why) => panic!("{what}: {why}"),
    }
}

fn cli_json(ws: &Ws, args: &[&str]) -> Value {
    let out = toolgate_command(ws).args(args).output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn add(ws: &Ws, wasm: &Path, manifest: &Path) {
    let out = toolgate_command(ws)
        .args(["plugin", "add", "--yes"])
        .arg(wasm)
        .arg("--manifest")
        .arg(manifest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "plugin add {}: {}{}",
        wasm.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The observation without what differs from call to call.
fn comparable(mut v: Value) -> Value {
    for k in ["audit_id", "duration_ms", "elapsed_ms"] {
        if let Some(m) = v.as_object_mut() {
            m.remove(k);
        }
    }
    v
}

/// The workspace every word-count runs on: nested files, a word across the 64 KiB read
/// boundary, a name that must be quoted, a secret and skipped directories.
fn word_count_workspace() -> Ws {
    let ws = Ws::new();
    let mut big = "x".repeat(65535);
    big.push_str("yz tail\nlast");
    ws.write("src/a.txt", "one two three\nfour\n")
        .write("src/b.txt", "five\n")
        .write(
            "src/deep/c.md",
            "  leading  spaces\n\ttabbed\twords \r\nno newline at end",
        )
        .write("src/deep/big.txt", &big)
        .write("src/we:ird.txt", "colon\n")
        .write("src/empty", "")
        .write("src/.env", "SECRET=hunter2\n")
        .write("src/node_modules/x.js", "skipped entirely\n")
        .write("src/.git/HEAD", "ref: skipped\n");
    ws
}

#[test]
fn word_count_in_python_and_javascript_counts_exactly_like_the_rust_example() {
    let b = built();
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guest-tools/examples");
    let rust = (
        "rust",
        Some(crate::plugins::artifact("toolgate_plugin_word_count.wasm")),
        examples.join("word-count/toolgate-plugin.toml"),
    );
    let py = (
        "python",
        need("the Python word-count", &b.word_count_py),
        examples.join("word-count-py/toolgate-plugin.toml"),
    );
    let js = (
        "javascript",
        need("the JavaScript word-count", &b.word_count_js),
        examples.join("word-count-js/toolgate-plugin.toml"),
    );
    if py.1.is_none() && js.1.is_none() {
        return;
    }
    let ws = word_count_workspace();
    let inputs = [
        json!({"path": "src"}),
        json!({"path": "src/a.txt"}),
        json!({"path": "src/deep"}),
        json!({"path": "src/missing.txt"}),
    ];
    let mut results: Vec<(&str, Vec<Value>)> = Vec::new();
    for (lang, wasm, manifest) in [rust, py, js] {
        let Some(wasm) = wasm else { continue };
        add(&ws, &wasm, &manifest);
        let outs = inputs
            .iter()
            .map(|input| {
                comparable(cli_json(
                    &ws,
                    &[
                        "--grant",
                        "plugin__word-count:**",
                        "call",
                        "plugin__word-count",
                        input.to_string().as_str(),
                    ],
                ))
            })
            .collect();
        results.push((lang, outs));
    }
    let (_, expected) = &results[0];
    // What the Rust example says, checked against counts made here.
    let src = &expected[0];
    assert_eq!(src["status"], "ok", "{src:#}");
    let content = src["content"].as_str().unwrap();
    // a.txt 2/4/19, b.txt 1/1/5, c.md 2/8/51, big.txt 1/3/65547, "we:ird.txt" 1/1/6, empty.
    assert!(
        content.contains("       7       17      65628  total (6 files)"),
        "{content}"
    );
    assert!(content.contains("  \"src/we:ird.txt\"\n"), "{content}");
    // The secret is hidden from the listing by the sandbox, so it is not even counted.
    assert!(!content.contains(".env"), "{content}");
    assert!(!content.contains("x.js") && !content.contains("HEAD") && !content.contains("hunter2"));
    assert_eq!(expected[3]["status"], "error", "{:#}", expected[3]);
    for (lang, got) in &results[1..] {
        for (i, (want, have)) in expected.iter().zip(got).enumerate() {
            assert_eq!(
                have, want,
                "{lang} differs from the Rust example on {}: {have:#} vs {want:#}",
                inputs[i]
            );
        }
    }
}

#[test]
fn a_plugin_from_plugin_new_lang_python_or_js_builds_installs_and_runs_as_its_readme_says() {
    let b = built();
    for (what, r) in [
        ("the `plugin new --lang python` plugin", &b.scaffold_py),
        ("the `plugin new --lang js` plugin", &b.scaffold_js),
    ] {
        let Some((wasm, dir)) = need(what, r) else {
            continue;
        };
        let ws = Ws::new();
        ws.write("notes.txt", "alpha\nbeta\ngamma\n");
        // The README's command: the manifest is found beside the component.
        let component = dir.join("line-head.wasm");
        std::fs::copy(&wasm, &component).unwrap();
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(readme.contains("toolgate plugin add /path/to/this/folder/line-head.wasm"));
        let out = toolgate_command(&ws)
            .args(["plugin", "add", "--yes"])
            .arg(&component)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let v = cli_json(
            &ws,
            &[
                "--grant",
                "plugin__line-head",
                "call",
                "plugin__line-head",
                r#"{"path": "notes.txt", "lines": 2}"#,
            ],
        );
        assert_eq!(v["status"], "ok", "{what}: {v:#}");
        assert_eq!(v["content"], "alpha\nbeta\n", "{what}: {v:#}");
        assert!(
            v["summary"]
                .as_str()
                .unwrap_or("")
                .contains("notes.txt: 3 lines, showing the first 2")
                || v.to_string()
                    .contains("notes.txt: 3 lines, showing the first 2"),
            "{what}: {v:#}"
        );
        let v = cli_json(
            &ws,
            &[
                "--grant",
                "plugin__line-head",
                "call",
                "plugin__line-head",
                r#"{"path": "nope.txt"}"#,
            ],
        );
        assert_eq!(v["error_code"], "not-found", "{what}: {v:#}");
        let _ = std::fs::remove_file(&component);
    }
}

// ---- the hostile Python plugin ----

const TOOL: &str = "plugin__test-plugin";

async fn install_hostile(ws: &Ws, wasm: &Path, caps: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mpath = dir.path().join("toolgate-plugin.toml");
    std::fs::write(
        &mpath,
        format!("name = \"test-plugin\"\nversion = \"0.0.1\"\nwit = \"toolgate:tool@0.1.0\"\n[capabilities]\n{caps}\n"),
    )
    .unwrap();
    let sandbox = Sandbox::new(Some(cache_dir())).unwrap();
    ws.plugin_store()
        .prepare(&sandbox, &Limits::default(), wasm, &mpath)
        .await
        .unwrap()
        .commit()
        .unwrap();
}

/// A loopback listener that counts the connections it accepts.
fn listener() -> (u16, impl Fn() -> usize) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    l.set_nonblocking(true).unwrap();
    let seen = move || {
        std::thread::sleep(Duration::from_millis(200));
        let mut n = 0;
        while let Ok((mut s, _)) = l.accept() {
            let mut buf = [0u8; 64];
            let _ = s.read(&mut buf);
            n += 1;
        }
        n
    };
    (port, seen)
}

#[tokio::test]
async fn a_hostile_python_plugin_is_refused_like_the_rust_one() {
    let Some(wasm) = need("the hostile Python plugin", &built().hostile_py) else {
        return;
    };
    let granted_port = crate::plugins::serve_http();
    let (other_port, other_seen) = listener();
    let (socket_port, socket_seen) = listener();
    let ws = Ws::new();
    ws.write("granted/a.txt", "inside")
        .write("other/b.txt", "outside")
        .write(".env", "API_KEY=hunter2")
        .write("granted/.env", "API_KEY=hunter2")
        .write(
            ".toolgate/policy.toml",
            format!("[network]\nallow_private = [\"127.0.0.1:{granted_port}\", \"127.0.0.1:{other_port}\"]\n"),
        );
    install_hostile(
        &ws,
        &wasm,
        &format!("fs_read = [\"granted\"]\nhttp = [\"127.0.0.1:{granted_port}\"]\nenv = [\"TOOLGATE_LANGS_VISIBLE\"]"),
    )
    .await;
    std::env::set_var("TOOLGATE_LANGS_VISIBLE", "yes");
    std::env::set_var("TOOLGATE_LANGS_HIDDEN", "no");
    let g = gate_granting(&ws, &[TOOL]).await;
    let h = |input: Value| {
        let g = &g;
        async move { call(g, TOOL, input).await }
    };

    // What it was granted works, so the refusals below are the host's, not a broken plugin.
    let o = h(json!({"mode": "read", "path": "/workspace/granted/a.txt"})).await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(o.content, "inside", "{o:#?}");
    let o = h(json!({"mode": "fetch", "url": format!("http://127.0.0.1:{granted_port}/ok")})).await;
    assert_eq!(o.content, "status=200\nhello", "{o:#?}");

    // Reading outside its grant: the path is not in its sandbox.
    for path in [
        "/workspace/other/b.txt",
        "/workspace/granted/../other/b.txt",
        "/workspace/.env",
        "/workspace/granted/.env",
        "/etc/passwd",
        "/workspace/../../etc/passwd",
        "/workspace/.toolgate/policy.toml",
    ] {
        let o = h(json!({"mode": "read", "path": path})).await;
        assert_eq!(o.status, Status::Error, "{path}: {o:#?}");
        assert!(
            !o.content.contains("outside")
                && !o.content.contains("root:")
                && !o.content.contains("hunter2"),
            "{path}: {o:#?}"
        );
    }
    // The secret inside the granted directory is not even listed.
    let o = h(json!({"mode": "list", "path": "/workspace/granted"})).await;
    assert_eq!(o.content, "a.txt", "{o:#?}");
    // Writing is not granted.
    let o = h(json!({"mode": "write", "path": "/workspace/granted/a.txt", "text": "x"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert_eq!(ws.read("granted/a.txt"), "inside");

    // A host not in its manifest (even one the policy lets through) is refused by the host.
    let o = h(json!({"mode": "fetch", "url": format!("http://127.0.0.1:{other_port}/ok")})).await;
    refused_with(&o, "http-request-denied");
    refused_with(&o, "not on this call's network allowlist");
    let o = h(json!({"mode": "fetch", "url": "http://169.254.169.254/latest/meta-data/"})).await;
    refused_with(&o, "http-request-denied");

    // Raw sockets: it may import them, but no socket can be made and no name resolved.
    let o = h(json!({"mode": "socket", "host": "127.0.0.1", "port": socket_port})).await;
    refused_with(&o, "socket-refused");
    // Name lookup fails in the host (`permanent-resolver-failure`); CPython's wasi-libc
    // `getaddrinfo` traps on it, which is a failed call all the same.
    let o = h(json!({"mode": "resolve", "host": "localhost"})).await;
    assert_eq!(o.status, Status::Error, "{o:#?}");
    assert!(!o.content.contains("resolved"), "{o:#?}");
    assert_eq!(
        socket_seen(),
        0,
        "a socket call reached the loopback listener"
    );
    assert_eq!(
        other_seen(),
        0,
        "a refused request reached the loopback listener"
    );

    // The environment: only the granted name.
    let o = h(json!({"mode": "env"})).await;
    assert_eq!(o.content.trim(), "TOOLGATE_LANGS_VISIBLE=yes", "{o:#?}");
}
