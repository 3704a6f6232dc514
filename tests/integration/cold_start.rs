//! Cold start of one-shot `toolgate call`s (issue #15): a first use compiles only the called
//! tool and says so on stderr; later calls map the cached artifact and say nothing; listing
//! still shows every tool (plugins included) exactly as before; a corrupt artifact is rebuilt.

use crate::common::{toolgate_command, Ws};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A one-shot `toolgate` run over `ws` with its own component cache `cache`.
fn run(ws: &Ws, cache: &Path, args: &[&str]) -> Output {
    toolgate_command(ws)
        .env("TOOLGATE_CACHE_DIR", cache)
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn artifacts(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "cwasm"));
    v.sort();
    v
}

fn read_ok(ws: &Ws, cache: &Path) -> Output {
    let out = run(
        ws,
        cache,
        &["call", "read", r#"{"path": "a.txt"}"#, "--compact"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["content"].as_str().unwrap().contains("hello"), "{v:#}");
    out
}

#[test]
fn a_first_call_compiles_only_the_called_tool_and_says_so() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    let cache = tempfile::tempdir().unwrap();
    let first = read_ok(&ws, cache.path());
    let err = stderr(&first);
    assert!(
        err.contains("compiling read (first use, ~"),
        "a first use says what it compiles: {err}"
    );
    assert!(!err.contains("compiling grep"), "{err}");
    assert_eq!(
        artifacts(cache.path()).len(),
        1,
        "only the called tool is compiled: {:?}",
        artifacts(cache.path())
    );
    let second = read_ok(&ws, cache.path());
    assert!(
        !stderr(&second).contains("compiling"),
        "a warm cache compiles nothing: {}",
        stderr(&second)
    );
    assert_eq!(artifacts(cache.path()).len(), 1);
    // Another tool compiles that tool only.
    let out = run(&ws, cache.path(), &["call", "ls", r#"{"path": "."}"#]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("compiling ls (first use"),
        "{}",
        stderr(&out)
    );
    assert_eq!(artifacts(cache.path()).len(), 2);
}

/// `read`'s image and PDF decoders are a component of their own (`read-media`): a text read
/// never compiles them; the first image does, once, and says so.
#[test]
fn a_text_read_never_compiles_the_image_decoders_and_the_first_image_compiles_them_once() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    ws.write("a.png", crate::read_media::png(3, 2));
    let cache = tempfile::tempdir().unwrap();
    let first = read_ok(&ws, cache.path());
    assert!(
        !stderr(&first).contains("images and PDFs"),
        "{}",
        stderr(&first)
    );
    assert_eq!(artifacts(cache.path()).len(), 1);
    let image = |ws: &Ws| {
        let out = run(
            ws,
            cache.path(),
            &["call", "read", r#"{"path": "a.png"}"#, "--compact"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["tool"], "read", "{v:#}");
        assert_eq!(v["data"]["format"], "PNG", "{v:#}");
        assert_eq!(
            (v["data"]["width"].as_u64(), v["data"]["height"].as_u64()),
            (Some(3), Some(2))
        );
        out
    };
    let out = image(&ws);
    assert!(
        stderr(&out).contains("compiling read for images and PDFs (first use, ~"),
        "{}",
        stderr(&out)
    );
    assert_eq!(artifacts(cache.path()).len(), 2);
    let again = image(&ws);
    assert!(!stderr(&again).contains("compiling"), "{}", stderr(&again));
    let text = read_ok(&ws, cache.path());
    assert!(!stderr(&text).contains("compiling"), "{}", stderr(&text));
}

#[test]
fn listing_is_the_same_cold_and_warm_and_includes_an_installed_plugin_which_still_runs() {
    let ws = Ws::new();
    ws.write("src/a.txt", "one two three\n");
    let cache = tempfile::tempdir().unwrap();
    let example =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../guest-tools/examples/word-count");
    let wasm = format!(
        "{}/toolgate_plugin_word_count.wasm",
        toolgate::tools::registry::GUEST_ARTIFACT_DIR
    );
    let manifest = example.join("toolgate-plugin.toml");
    let out = toolgate_command(&ws)
        .env("TOOLGATE_CACHE_DIR", cache.path())
        .args(["plugin", "add", "--yes", &wasm, "--manifest"])
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));

    // Cold: every built-in is compiled and described now, `read`'s image and PDF part too.
    let cold = run(&ws, cache.path(), &["tools", "--json"]);
    assert!(cold.status.success(), "{}", stderr(&cold));
    assert!(
        stderr(&cold).contains("compiling grep (first use"),
        "{}",
        stderr(&cold)
    );
    assert!(
        stderr(&cold).contains("compiling read for images and PDFs (first use"),
        "{}",
        stderr(&cold)
    );
    // Warm: from the descriptions cached beside the artifacts, nothing compiled.
    let warm = run(&ws, cache.path(), &["tools", "--json"]);
    assert!(warm.status.success(), "{}", stderr(&warm));
    assert!(!stderr(&warm).contains("compiling"), "{}", stderr(&warm));
    assert_eq!(
        String::from_utf8_lossy(&cold.stdout),
        String::from_utf8_lossy(&warm.stdout),
        "a listing from cached descriptions is the listing from the components"
    );
    ws.write("a.png", crate::read_media::png(2, 2));
    let image = run(&ws, cache.path(), &["call", "read", r#"{"path": "a.png"}"#]);
    assert_eq!(image.status.code(), Some(0), "{}", stderr(&image));
    assert!(!stderr(&image).contains("compiling"), "{}", stderr(&image));
    let tools: Vec<Value> = serde_json::from_slice(&warm.stdout).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for builtin in toolgate::tools::registry::BUILTINS.iter().map(|(n, _)| *n) {
        assert!(names.contains(&builtin), "{builtin} missing from {names:?}");
    }
    assert!(names.contains(&"plugin__word-count"), "{names:?}");
    let shell = tools.iter().find(|t| t["name"] == "shell").unwrap();
    assert_eq!(shell["ceiling"], "session", "{shell:#}");
    assert_eq!(shell["risk"], "exec", "{shell:#}");

    // And the same as a gate that loads everything in process (the tests' shared cache).
    let gate_list = run(&ws, &crate::common::cache_dir(), &["tools", "--json"]);
    assert_eq!(
        String::from_utf8_lossy(&gate_list.stdout),
        String::from_utf8_lossy(&warm.stdout)
    );

    // A plugin call after a cold start of its own still works.
    let out = run(
        &ws,
        cache.path(),
        &[
            "--grant",
            "plugin__word-count",
            "call",
            "plugin__word-count",
            r#"{"path": "src"}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["content"].as_str().unwrap().contains("src/a.txt"),
        "{v:#}"
    );
}

#[test]
fn a_corrupt_cached_artifact_or_sidecar_is_rebuilt() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    let cache = tempfile::tempdir().unwrap();
    read_ok(&ws, cache.path());
    let [artifact] = artifacts(cache.path()).try_into().unwrap();
    // Same length, different bytes (a flipped page in the middle of the code).
    let mut bytes = std::fs::read(&artifact).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 4096] {
        *b ^= 0xff;
    }
    std::fs::write(&artifact, &bytes).unwrap();
    let out = read_ok(&ws, cache.path());
    assert!(
        stderr(&out).contains("compiling read (first use"),
        "a corrupt artifact is compiled again, never mapped: {}",
        stderr(&out)
    );
    assert_ne!(std::fs::read(&artifact).unwrap(), bytes, "rebuilt in place");
    let out = read_ok(&ws, cache.path());
    assert!(!stderr(&out).contains("compiling"), "{}", stderr(&out));

    // A truncated artifact, and then a sidecar edited by hand: rebuilt as well.
    let len = std::fs::metadata(&artifact).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&artifact)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    assert!(stderr(&read_ok(&ws, cache.path())).contains("compiling read"));
    let sidecar = artifact.with_extension("json");
    let text = std::fs::read_to_string(&sidecar).unwrap();
    std::fs::write(&sidecar, text.replace("read-only", "write")).unwrap();
    assert!(stderr(&read_ok(&ws, cache.path())).contains("compiling read"));
    assert!(!stderr(&read_ok(&ws, cache.path())).contains("compiling"));
}
