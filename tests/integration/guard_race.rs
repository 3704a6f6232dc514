//! The filesystem guard acts on the object it checked (issue #14): a symlink into the state
//! directory, already in the workspace or swapped in while a call runs, cannot make a guest
//! create, truncate, rename onto, remove or look at anything under `.toolgate/`
//! (host/src/sandbox/fsguard.rs; the same attacks on a writable root preopen with every path
//! operation are its unit tests, which drive the sandbox directly).

use crate::common::*;
use crate::plugins::artifact;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgate::plugins::Record;
use toolgate::sandbox::{Limits, Sandbox};
use toolgate::{Gate, Status};

const PLUGIN: &str = "plugin__test-plugin";

/// Install the test plugin with the whole workspace readable and writable.
async fn install_plugin(ws: &Ws) -> Record {
    let dir = tempfile::tempdir().unwrap();
    let mpath = dir.path().join("toolgate-plugin.toml");
    // The test plugin imports wasi:http, so it only loads with some network grant.
    std::fs::write(
        &mpath,
        "name = \"test-plugin\"\nversion = \"0.0.1\"\nwit = \"toolgate:tool@0.1.0\"\n[capabilities]\nfs_read = [\".\"]\nfs_write = [\".\"]\nhttp = [\"unused.example.com\"]\n",
    )
    .unwrap();
    let sandbox = Sandbox::new(Some(cache_dir())).unwrap();
    ws.plugin_store()
        .prepare(
            &sandbox,
            &Limits::default(),
            &artifact("toolgate_tool_test_plugin.wasm"),
            &mpath,
        )
        .await
        .unwrap()
        .commit()
        .unwrap()
}

/// Everything under `dir` (not following symlinks): path -> kind and, for files, contents.
/// The audit database (and its journal files) changes with every call and is left out.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            if rel.starts_with("state.db") {
                continue;
            }
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                out.insert(rel, "dir".into());
                walk(base, &path, out);
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, format!("symlink {}", target.display()));
            } else {
                let bytes = std::fs::read(&path).unwrap();
                let what = match std::str::from_utf8(&bytes) {
                    Ok(text) if text.len() < 4096 => format!("file {text}"),
                    _ => {
                        use std::hash::{Hash, Hasher};
                        let mut h = std::collections::hash_map::DefaultHasher::new();
                        bytes.hash(&mut h);
                        format!("file of {} bytes, hash {:x}", bytes.len(), h.finish())
                    }
                };
                out.insert(rel, what);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A workspace with state (grants, a saved output) and `x2 -> .toolgate`, `lnk -> src`.
async fn workspace() -> (Ws, Gate) {
    let ws = Ws::new();
    ws.write("src/lib.rs", "// lib\n")
        .write("notes.txt", "hello\n")
        .write(".toolgate/outputs/call-1.txt", "saved");
    let gate = ws.gate(true).await;
    // Something for the state directory to hold besides the database.
    ws.plant(".toolgate/grants.toml", "# grants\n");
    std::os::unix::fs::symlink(".toolgate", ws.path("x2")).unwrap();
    std::os::unix::fs::symlink("src", ws.path("lnk")).unwrap();
    (ws, gate)
}

/// A plugin granted the whole workspace cannot create or truncate anything in the state
/// directory through a symlink to it (`x2 -> .toolgate`), not even for a moment.
#[tokio::test]
async fn a_plugin_cannot_create_or_truncate_state_through_a_symlink() {
    let (ws, _) = workspace().await;
    install_plugin(&ws).await;
    let g = gate_granting(&ws, &[PLUGIN]).await;
    let before = snapshot(&ws.path(".toolgate"));
    for path in [
        "/workspace/x2/grants.toml",
        "/workspace/x2/policy.toml",
        "/workspace/x2/outputs/call-1.txt",
        "/workspace/x2/../x2/grants.toml",
    ] {
        let o = call(
            &g,
            PLUGIN,
            json!({"mode": "write", "path": path, "text": "[grants]\nshell = [\"*\"]\n"}),
        )
        .await;
        assert_eq!(o.status, Status::Error, "{path}: {o:#?}");
    }
    assert_eq!(snapshot(&ws.path(".toolgate")), before);
    // Through a symlink to an ordinary directory it writes as before.
    let o = call(
        &g,
        PLUGIN,
        json!({"mode": "write", "path": "/workspace/lnk/new.rs", "text": "// new\n"}),
    )
    .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
    assert_eq!(ws.read("src/new.rs"), "// new\n");
}

/// Looking through the symlink tells nothing about the state directory.
#[tokio::test]
async fn stat_and_list_through_a_symlink_to_state_are_refused() {
    let (_ws, gate) = workspace().await;
    let r = probe(
        &gate,
        vec![
            json!({"op": "stat", "path": "/workspace/x2/grants.toml"}),
            json!({"op": "stat-follow", "path": "/workspace/x2/grants.toml"}),
            json!({"op": "stat-follow", "path": "/workspace/x2/state.db"}),
            json!({"op": "stat-follow", "path": "/workspace/x2"}),
            json!({"op": "read", "path": "/workspace/x2/grants.toml"}),
            json!({"op": "list", "path": "/workspace/x2"}),
            json!({"op": "readlink", "path": "/workspace/x2/grants.toml"}),
            // Allowed: the link itself, the saved outputs, and a link to an ordinary directory.
            json!({"op": "stat", "path": "/workspace/x2"}),
            json!({"op": "read", "path": "/workspace/x2/outputs/call-1.txt"}),
            json!({"op": "stat-follow", "path": "/workspace/lnk/lib.rs"}),
            json!({"op": "stat", "path": "/workspace/lnk/lib.rs"}),
            json!({"op": "read", "path": "/workspace/lnk/lib.rs"}),
            json!({"op": "list", "path": "/workspace/lnk"}),
        ],
    )
    .await;
    for (i, result) in r.iter().enumerate() {
        assert_eq!(result["ok"], json!(i >= 7), "{i}: {result}");
        if i < 7 {
            let detail = result["detail"].as_str().unwrap();
            assert!(detail.contains("ermission denied"), "{i}: {result}");
        }
    }
    assert_eq!(r[8]["detail"], "saved");
    assert_eq!(r[9]["detail"], "7 bytes");
    assert_eq!(r[11]["detail"], "// lib\n");
    assert_eq!(entries(&r[12]), ["lib.rs"]);
}

/// A real directory `sub` and a symlink `sl -> .toolgate` swap places (`RENAME_EXCHANGE`)
/// over and over while the `write` tool writes `sub/policy.toml` and `sub/grants.toml`:
/// whatever each write lands on, nothing in the state directory is created or changed, and
/// the workspace still works afterwards.
#[tokio::test]
async fn swapping_a_directory_with_a_symlink_to_state_during_writes_changes_no_state() {
    swap_race_against_writes(&["policy.toml", "grants.toml"]).await;
}

/// The same race when the write must first create a directory (`sub/policy.toml/x`): the host
/// makes the parent before the guest runs, and `create_dir_all` followed the swapped link,
/// leaving `.toolgate/policy.toml/` as a directory (which bricked the workspace).
#[tokio::test]
async fn swapping_during_writes_that_create_directories_creates_nothing_in_state() {
    swap_race_against_writes(&["policy.toml/x", "grants.toml/y/z"]).await;
}

async fn swap_race_against_writes(targets: &[&str]) {
    let (ws, gate) = workspace().await;
    ws.mkdir("sub");
    std::os::unix::fs::symlink(".toolgate", ws.path("sl")).unwrap();
    let before = snapshot(&ws.path(".toolgate"));
    // The real directory, however it is named at the moment, for cleaning up between writes.
    let real = std::fs::File::open(ws.path("sub")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        let root = std::fs::File::open(ws.root()).unwrap();
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            let deadline = Instant::now() + Duration::from_secs(10);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                rustix::fs::renameat_with(
                    &root,
                    "sub",
                    &root,
                    "sl",
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                swaps += 1;
                std::thread::yield_now();
            }
            // Leave `sub` the real directory.
            if swaps % 2 == 1 {
                rustix::fs::renameat_with(
                    &root,
                    "sub",
                    &root,
                    "sl",
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
            }
            swaps
        })
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut calls = 0u32;
    let mut written = 0u32;
    let mut changed = None;
    while Instant::now() < deadline {
        let name = targets[calls as usize % targets.len()];
        let o = call(
            &gate,
            "write",
            json!({"path": format!("sub/{name}"), "content": format!("mode = \"allow-all\"\n# {calls}\n")}),
        )
        .await;
        calls += 1;
        if o.status == Status::Ok {
            written += 1;
        }
        // Whatever the write did went to the real directory; empty it for the next one (the
        // file, then each directory the write made, deepest first).
        let _ = rustix::fs::unlinkat(&real, name, rustix::fs::AtFlags::empty());
        let mut dir = std::path::Path::new(name).parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            let _ = rustix::fs::unlinkat(&real, d, rustix::fs::AtFlags::REMOVEDIR);
            dir = d.parent();
        }
        let now = snapshot(&ws.path(".toolgate"));
        if now != before {
            changed = Some((calls, now));
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    assert!(swaps > 100, "the racer swapped only {swaps} times");
    if let Some((at, now)) = changed {
        panic!(
            "call {at} of {calls} ({written} written, {swaps} swaps) changed the state directory:\nbefore {before:#?}\nafter {now:#?}"
        );
    }
    assert!(calls > 20, "only {calls} calls");
    eprintln!("{calls} writes ({written} succeeded) against {swaps} swaps");
    assert_eq!(snapshot(&ws.path(".toolgate")), before);
    assert!(ws.path(".toolgate/policy.toml").symlink_metadata().is_err());
    // The workspace still works: a new gate opens, reads and writes, the CLI lists grants.
    drop(gate);
    let gate = ws.gate(true).await;
    let o = ok(&gate, "read", json!({"path": "src/lib.rs"})).await;
    assert!(o.content.contains("// lib"), "{o:#?}");
    ok(
        &gate,
        "write",
        json!({"path": "sub/after.txt", "content": "ok\n"}),
    )
    .await;
    assert_eq!(ws.read("sub/after.txt"), "ok\n");
    let out = toolgate_command(&ws)
        .args(["grants", "list"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Ordinary use through a symlink to a workspace directory (`lnk -> src`) is unchanged.
#[tokio::test]
async fn work_through_a_symlink_to_an_ordinary_directory_still_works() {
    let (ws, gate) = workspace().await;
    let o = ok(
        &gate,
        "write",
        json!({"path": "lnk/made.rs", "content": "// made\n"}),
    )
    .await;
    assert_eq!(o.status, Status::Ok);
    assert_eq!(ws.read("src/made.rs"), "// made\n");
    let o = ok(&gate, "read", json!({"path": "lnk/lib.rs"})).await;
    assert!(o.content.contains("// lib"), "{o:#?}");
    let r: Vec<Value> = probe(
        &gate,
        vec![
            json!({"op": "stat-follow", "path": "/workspace/lnk"}),
            json!({"op": "list", "path": "/workspace/lnk"}),
        ],
    )
    .await;
    assert!(r.iter().all(|x| x["ok"] == json!(true)), "{r:?}");
}

/// A read-only preopen still refuses every change, as wasmtime-wasi refuses it
/// (`not-permitted`), now that the guard makes these calls itself.
#[tokio::test]
async fn a_read_only_preopen_still_refuses_changes() {
    let (ws, gate) = workspace().await;
    let r = probe(
        &gate,
        vec![
            json!({"op": "write", "path": "/workspace/new.txt"}),
            json!({"op": "write", "path": "/workspace/notes.txt"}),
            json!({"op": "write", "path": "/workspace/lnk/new.rs"}),
            json!({"op": "mkdir", "path": "/workspace/made"}),
            json!({"op": "mkdir", "path": "/workspace/src/made"}),
            json!({"op": "remove", "path": "/workspace/notes.txt"}),
            json!({"op": "rmdir", "path": "/workspace/src"}),
            json!({"op": "rename", "path": "/workspace/notes.txt", "to": "/workspace/n2.txt"}),
            json!({"op": "symlink", "path": "/workspace/l3", "target": "notes.txt"}),
            json!({"op": "link", "path": "/workspace/h3", "target": "/workspace/notes.txt"}),
        ],
    )
    .await;
    for (i, result) in r.iter().enumerate() {
        assert_eq!(result["ok"], json!(false), "{i}: {result}");
        let detail = result["detail"].as_str().unwrap();
        assert!(detail.contains("not permitted"), "{i}: {result}");
    }
    assert_eq!(ws.read("notes.txt"), "hello\n");
    for rel in [
        "new.txt",
        "src/new.rs",
        "made",
        "src/made",
        "n2.txt",
        "l3",
        "h3",
    ] {
        assert!(!exists(&ws.path(rel)), "{rel}");
    }
}
