//! A plugin author's first steps on a machine without the toolgate repository (issue #19 part
//! 1): `plugin new` writes a crate that vendors the SDK and the WIT, with a lock file; it
//! builds in a directory far from this checkout; `plugin add` finds the manifest from the
//! cargo build's `target/` path; the call works; `plugin wit` prints the world to implement.

use crate::common::*;
use std::path::Path;
use std::process::Command;

fn toolgate(ws: &Ws, args: &[&str]) -> std::process::Output {
    toolgate_command(ws).args(args).output().unwrap()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `cargo build --release --target wasm32-wasip2` of the crate at `dir`, offline first (the
/// lock pins what the guest build already fetched), else from the registry.
fn build(dir: &Path) -> std::process::Output {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-kit-target");
    let run = |offline: bool| {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(dir)
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .env("CARGO_TARGET_DIR", &target);
        for (key, _) in std::env::vars() {
            if key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_TARGET_DIR" {
                cmd.env_remove(key);
            }
        }
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().unwrap()
    };
    let out = run(true);
    if out.status.success() {
        return out;
    }
    run(false)
}

#[test]
fn a_new_plugin_builds_without_the_checkout_installs_from_target_and_runs() {
    let ws = Ws::new();
    ws.write("notes.txt", "one\ntwo\nthree\n");
    let away = tempfile::tempdir().unwrap();
    let dir = away.path().join("todo-count");
    let out = toolgate(
        &ws,
        &[
            "plugin",
            "new",
            "todo-count",
            "--dir",
            dir.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(dir.join("Cargo.lock").is_file(), "no lock file");
    // Nothing in the crate points back into this checkout.
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for entry in walk(&dir) {
        let body = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        assert!(
            !body.contains(checkout.to_str().unwrap()),
            "{} names the checkout {}",
            entry.display(),
            checkout.display()
        );
    }

    let built = build(&dir);
    assert!(
        built.status.success(),
        "the new crate does not build:\n{}",
        text(&built)
    );
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-kit-target");
    let wasm = target.join("wasm32-wasip2/release/toolgate_plugin_todo_count.wasm");
    assert!(wasm.is_file());
    // The normal layout: the component under <crate>/target/…, the manifest at the crate root.
    let in_crate = dir.join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&in_crate).unwrap();
    let component = in_crate.join("toolgate_plugin_todo_count.wasm");
    std::fs::copy(&wasm, &component).unwrap();

    let out = toolgate(
        &ws,
        &["plugin", "add", component.to_str().unwrap(), "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("installed todo-count 0.1.0"),
        "{}",
        text(&out)
    );
    let out = toolgate(
        &ws,
        &[
            "--grant",
            "plugin__todo-count",
            "call",
            "plugin__todo-count",
            r#"{"path": "notes.txt", "lines": 2}"#,
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(o["status"], "ok", "{o:#}");
    assert_eq!(o["content"], "one\ntwo\n", "{o:#}");
}

#[test]
fn plugin_add_without_a_manifest_says_where_it_looked() {
    let ws = Ws::new();
    let away = tempfile::tempdir().unwrap();
    let component = away.path().join("target/wasm32-wasip2/release/x.wasm");
    std::fs::create_dir_all(component.parent().unwrap()).unwrap();
    std::fs::write(&component, b"\0asm").unwrap();
    let out = toolgate(
        &ws,
        &["plugin", "add", component.to_str().unwrap(), "--yes"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    let root_manifest = away.path().join("toolgate-plugin.toml");
    assert!(said.contains(root_manifest.to_str().unwrap()), "{said}");
    assert!(said.contains("--manifest FILE"), "{said}");
}

#[test]
fn plugin_wit_prints_the_world_a_plugin_exports_and_writes_the_files() {
    let ws = Ws::new();
    let out = toolgate(&ws, &["plugin", "wit"]);
    assert!(out.status.success(), "{}", text(&out));
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        printed.contains("// ==== wit/since_v0.1.0/tool.wit"),
        "{printed}"
    );
    assert!(
        printed.contains("package toolgate:tool@0.1.0;"),
        "{printed}"
    );
    assert!(printed.contains("export call: func("), "{printed}");
    // Built-ins' own interfaces are refused to plugins: not offered.
    for builtin_only in ["toolgate:search", "toolgate:fs", "toolgate:host"] {
        assert!(!printed.contains(builtin_only), "{builtin_only}: {printed}");
    }

    let dir = tempfile::tempdir().unwrap();
    let out = toolgate(
        &ws,
        &["plugin", "wit", "--out", dir.path().to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out));
    let tool = std::fs::read_to_string(dir.path().join("since_v0.1.0/tool.wit")).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools-wit/wit/since_v0.1.0/tool.wit");
    assert_eq!(tool, std::fs::read_to_string(repo).unwrap());
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
