//! The guard against a hostile guest: a real sandbox call probes the filesystem through a
//! guarded (or unguarded) writable preopen of a scratch workspace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tests::deny;
use crate::sandbox::{wit, Capabilities, GuestResult, Limits, Preopen, Sandbox};
use crate::workspace::GUEST_ROOT;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;

fn hostile() -> Vec<u8> {
    let file = format!(
        "{}/toolgate_tool_test_hostile.wasm",
        crate::tools::registry::GUEST_ARTIFACT_DIR
    );
    std::fs::read(file).unwrap()
}

/// Run the hostile guest's `probe` mode with the workspace root preopened writable.
async fn probe(root: &std::path::Path, guarded: bool, ops: Value) -> Vec<Value> {
    let cache = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(Some(cache.path().to_path_buf())).unwrap();
    let limits = Limits::default();
    let loaded = sandbox.load("test-hostile", &hostile()).unwrap();
    let caps = Capabilities {
        preopens: vec![Preopen {
            host: root.to_path_buf(),
            guest: GUEST_ROOT.to_string(),
            writable: true,
        }],
        deny: guarded.then(|| Arc::new(deny(root))),
        exec: None,
        ..Capabilities::default()
    };
    let context = wit::CallContext {
        workspace_root: GUEST_ROOT.to_string(),
        max_output_bytes: 1 << 20,
        denied_globs: Vec::new(),
    };
    let input = json!({"mode": "probe", "ops": ops}).to_string();
    let result = sandbox
        .call(
            &loaded,
            &caps,
            &limits,
            &input,
            &context,
            &crate::cancel::CancelToken::never(),
        )
        .await
        .unwrap();
    let GuestResult::Output(out) = result else {
        panic!("the probe failed");
    };
    let data: Value = serde_json::from_str(&out.data).unwrap();
    data["results"].as_array().unwrap().clone()
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join(".env"), "SECRET=1").unwrap();
    std::fs::write(root.join("notes.txt"), "hello").unwrap();
    std::fs::create_dir_all(root.join(".toolgate/outputs")).unwrap();
    std::fs::write(root.join(".toolgate/outputs/call-1.txt"), "saved").unwrap();
    std::fs::write(root.join(".toolgate/grants.toml"), "").unwrap();
    std::fs::create_dir_all(root.join("src/.ssh")).unwrap();
    std::fs::write(root.join("src/.ssh/id_ed25519"), "key").unwrap();
    std::fs::write(root.join("src/lib.rs"), "// lib").unwrap();
    std::os::unix::fs::symlink(".env", root.join("innocent")).unwrap();
    std::os::unix::fs::symlink("..", root.join("src/up")).unwrap();
    (dir, root)
}

fn ok(results: &[Value], i: usize) -> bool {
    results[i]["ok"].as_bool().unwrap()
}

#[tokio::test]
async fn writable_root_preopen_is_filtered() {
    let (_dir, root) = workspace();
    let ops = json!([
        {"op": "read", "path": "/workspace/.env"},
        {"op": "write", "path": "/workspace/.toolgate/x"},
        {"op": "write", "path": "/workspace/.toolgate/grants.toml"},
        {"op": "read", "path": "/workspace/.toolgate/outputs/call-1.txt"},
        {"op": "write", "path": "/workspace/.toolgate/outputs/call-2.txt"},
        {"op": "read", "path": "/workspace/notes.txt"},
        {"op": "write", "path": "/workspace/new.txt"},
        {"op": "list", "path": "/workspace"},
        {"op": "list", "path": "/workspace/src"},
        {"op": "read", "path": "/workspace/src/.ssh/id_ed25519"},
        {"op": "read", "path": "/workspace/src/../.env"},
        {"op": "stat", "path": "/workspace/.env"},
        {"op": "remove", "path": "/workspace/.env"},
        {"op": "rename", "path": "/workspace/.env", "to": "/workspace/plain"},
        {"op": "rename", "path": "/workspace/notes.txt", "to": "/workspace/.toolgate/n"},
        {"op": "symlink", "path": "/workspace/link", "target": ".env"},
        {"op": "symlink", "path": "/workspace/src/link", "target": "../.toolgate/outputs/call-1.txt"},
        {"op": "read", "path": "/workspace/innocent"},
        {"op": "mkdir", "path": "/workspace/.ssh"},
        {"op": "mkdir", "path": "/workspace/made"},
        {"op": "symlink", "path": "/workspace/here", "target": "."},
        {"op": "write", "path": "/workspace/here/.toolgate/grants.toml"},
        {"op": "rename", "path": "/workspace/new.txt", "to": "/workspace/src/up/.toolgate/grants.toml"},
        {"op": "read", "path": "/workspace/src/up/.env"},
        {"op": "read", "path": "/workspace/src/up/notes.txt"},
    ]);
    let r = probe(&root, true, ops).await;
    let expect = [
        false, false, false, true, false, true, true, true, true, false, false, false, false,
        false, false, false, false, false, false, true,
    ];
    for (i, want) in expect.iter().enumerate() {
        assert_eq!(ok(&r, i), *want, "{}", r[i]);
    }
    assert_eq!(r[3]["detail"], "saved");
    let top: Vec<&str> = r[7]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        !top.contains(&".env") && !top.contains(&".toolgate"),
        "{top:?}"
    );
    assert!(
        top.contains(&"notes.txt") && top.contains(&"src"),
        "{top:?}"
    );
    assert_eq!(r[8]["entries"], json!(["lib.rs", "up"]));
    assert!(
        r[0]["detail"].as_str().unwrap().contains("ermission"),
        "{}",
        r[0]
    );
    assert!(!root.join(".toolgate/x").exists());
    assert_eq!(
        std::fs::read_to_string(root.join(".toolgate/grants.toml")).unwrap(),
        ""
    );
    assert!(root.join(".env").exists() && !root.join("plain").exists());
    assert!(!root.join("link").exists() && !root.join("src/link").exists());
    assert!(root.join("new.txt").exists() && root.join("made").is_dir());
}

#[tokio::test]
async fn without_a_policy_everything_passes() {
    let (_dir, root) = workspace();
    let ops = json!([
        {"op": "read", "path": "/workspace/.env"},
        {"op": "list", "path": "/workspace"},
    ]);
    let r = probe(&root, false, ops).await;
    assert!(ok(&r, 0) && ok(&r, 1), "{r:?}");
    assert!(r[1]["entries"].as_array().unwrap().contains(&json!(".env")));
}

/// Every write-ish operation on a path with a `.git` component is refused, the same
/// operations elsewhere work, and reading `.git` still works.
#[tokio::test]
async fn git_internals_are_refused_to_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(root.join("a.txt"), "a").unwrap();
    std::fs::create_dir(root.join("d")).unwrap();
    let ws = "/workspace";
    let r = probe(
        &root,
        true,
        json!([
            {"op": "write", "path": format!("{ws}/.git/hooks/pre-commit")},
            {"op": "write", "path": format!("{ws}/.git/config")},
            {"op": "mkdir", "path": format!("{ws}/.git/x")},
            {"op": "mkdir", "path": format!("{ws}/d/.git")},
            {"op": "rename", "path": format!("{ws}/a.txt"), "to": format!("{ws}/.git/hooks/post-checkout")},
            {"op": "rename", "path": format!("{ws}/.git/config"), "to": format!("{ws}/config.bak")},
            {"op": "rename", "path": format!("{ws}/d"), "to": format!("{ws}/.GIT")},
            {"op": "symlink", "path": format!("{ws}/.git/hooks/pre-push"), "target": "../../a.txt"},
            {"op": "symlink", "path": format!("{ws}/hooks"), "target": ".git/hooks"},
            {"op": "remove", "path": format!("{ws}/.git/config")},
            {"op": "write", "path": format!("{ws}/sub/.Git")},
            // Allowed: reading git internals, and the same writes elsewhere.
            {"op": "read", "path": format!("{ws}/.git/config")},
            {"op": "list", "path": format!("{ws}/.git")},
            {"op": "write", "path": format!("{ws}/b.txt")},
            {"op": "mkdir", "path": format!("{ws}/d/e")},
            {"op": "rename", "path": format!("{ws}/a.txt"), "to": format!("{ws}/c.txt")},
        ]),
    )
    .await;
    for (i, result) in r.iter().enumerate() {
        assert_eq!(result["ok"], json!(i >= 11), "{i}: {result}");
    }
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_dir(root.join(".git/hooks")).unwrap().count(),
        0
    );
    assert!(!root.join(".GIT").exists());
    assert!(!root.join("hooks").exists());
}

/// Everything under `dir`, not following symlinks: path -> contents (`dir` for
/// directories, `-> target` for symlinks).
fn listing(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = path.symlink_metadata().unwrap();
            let what = if meta.is_dir() {
                stack.push(path.clone());
                "dir".to_string()
            } else if meta.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else {
                std::fs::read_to_string(&path).unwrap()
            };
            out.push((rel, what));
        }
    }
    out.sort();
    out
}

/// Every path operation through a symlink to the state directory (`x2 -> .toolgate`, or
/// `src/up -> ..` then `x2`) is refused and leaves it exactly as it was; the same
/// operations through a symlink to an ordinary directory (`lnk -> src`) work.
#[tokio::test]
async fn operations_through_a_symlink_act_on_what_was_checked() {
    let (_dir, root) = workspace();
    std::os::unix::fs::symlink(".toolgate", root.join("x2")).unwrap();
    std::os::unix::fs::symlink("src", root.join("lnk")).unwrap();
    std::fs::write(root.join(".toolgate/grants.toml"), "# grants").unwrap();
    std::fs::write(root.join(".toolgate/state.db"), "audit").unwrap();
    std::fs::write(root.join("mine.txt"), "mine").unwrap();
    let before = listing(&root.join(".toolgate"));
    let ws = "/workspace";
    let refused = json!([
        {"op": "rename", "path": format!("{ws}/mine.txt"), "to": format!("{ws}/x2/grants.toml")},
        {"op": "rename", "path": format!("{ws}/x2/grants.toml"), "to": format!("{ws}/stolen.toml")},
        {"op": "rename", "path": format!("{ws}/mine.txt"), "to": format!("{ws}/src/up/x2/grants.toml")},
        {"op": "remove", "path": format!("{ws}/x2/state.db")},
        {"op": "remove", "path": format!("{ws}/src/up/x2/state.db")},
        {"op": "rmdir", "path": format!("{ws}/x2/outputs")},
        {"op": "mkdir", "path": format!("{ws}/x2/policy.toml")},
        {"op": "mkdir", "path": format!("{ws}/x2/outputs/x")},
        {"op": "symlink", "path": format!("{ws}/x2/evil"), "target": "../src"},
        {"op": "link", "path": format!("{ws}/x2/hard"), "target": format!("{ws}/mine.txt")},
        {"op": "link", "path": format!("{ws}/stolen"), "target": format!("{ws}/x2/grants.toml")},
        {"op": "write", "path": format!("{ws}/x2/grants.toml")},
        {"op": "write", "path": format!("{ws}/x2/new.toml")},
        {"op": "write", "path": format!("{ws}/x2/outputs/call-1.txt")},
        {"op": "stat", "path": format!("{ws}/x2/state.db")},
        {"op": "stat-follow", "path": format!("{ws}/x2/state.db")},
        {"op": "stat-follow", "path": format!("{ws}/x2/")},
        {"op": "readlink", "path": format!("{ws}/x2/state.db")},
        {"op": "read", "path": format!("{ws}/x2/grants.toml")},
        {"op": "list", "path": format!("{ws}/x2")},
        {"op": "write", "path": format!("{ws}/src/up/x2/grants.toml")},
    ]);
    let n = refused.as_array().unwrap().len();
    let r = probe(&root, true, refused).await;
    for (i, result) in r.iter().enumerate() {
        assert!(!ok(&r, i), "{i}: {result}");
        let detail = result["detail"].as_str().unwrap();
        assert!(detail.contains("ermission denied"), "{i}: {result}");
    }
    assert_eq!(r.len(), n);
    assert_eq!(listing(&root.join(".toolgate")), before);
    assert!(!root.join("stolen.toml").exists() && !root.join("stolen").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("mine.txt")).unwrap(),
        "mine"
    );

    let r = probe(
        &root,
        true,
        json!([
            {"op": "mkdir", "path": format!("{ws}/lnk/made")},
            {"op": "rename", "path": format!("{ws}/mine.txt"), "to": format!("{ws}/lnk/mine.txt")},
            {"op": "stat", "path": format!("{ws}/lnk/mine.txt")},
            {"op": "stat-follow", "path": format!("{ws}/lnk")},
            {"op": "link", "path": format!("{ws}/lnk/hard.txt"), "target": format!("{ws}/lnk/mine.txt")},
            {"op": "symlink", "path": format!("{ws}/lnk/l2"), "target": "lib.rs"},
            {"op": "readlink", "path": format!("{ws}/lnk/l2")},
            {"op": "read", "path": format!("{ws}/lnk/l2")},
            {"op": "remove", "path": format!("{ws}/lnk/hard.txt")},
            {"op": "rmdir", "path": format!("{ws}/lnk/made")},
            {"op": "write", "path": format!("{ws}/lnk/w.txt")},
            {"op": "read", "path": format!("{ws}/lnk/up/notes.txt")},
            {"op": "write", "path": format!("{ws}/lnk/up/notes.txt")},
            {"op": "stat", "path": format!("{ws}/x2")},
            {"op": "read", "path": format!("{ws}/x2/outputs/call-1.txt")},
            {"op": "rename", "path": format!("{ws}/lnk/w.txt"), "to": format!("{ws}/src/up/w2.txt")},
        ]),
    )
    .await;
    for (i, result) in r.iter().enumerate() {
        assert!(ok(&r, i), "{i}: {result}");
    }
    assert_eq!(r[2]["detail"], "4 bytes");
    assert_eq!(r[6]["detail"], "lib.rs");
    assert_eq!(r[7]["detail"], "// lib");
    assert_eq!(r[11]["detail"], "hello");
    assert_eq!(r[14]["detail"], "saved");
    assert_eq!(
        std::fs::read_to_string(root.join("src/mine.txt")).unwrap(),
        "mine"
    );
    assert!(!root.join("src/made").exists() && !root.join("src/hard.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("w2.txt")).unwrap(),
        "probe"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "probe"
    );
    assert_eq!(listing(&root.join(".toolgate")), before);
}

/// A directory exchanged (`RENAME_EXCHANGE`) with a symlink to the state directory over
/// and over while a guest on a writable root preopen writes, renames onto, makes and
/// removes entries below its name: nothing ever lands in `.toolgate/`.
#[tokio::test]
async fn a_swap_during_path_calls_changes_no_state() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let (_dir, root) = workspace();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(".toolgate", root.join("sl")).unwrap();
    let before = listing(&root.join(".toolgate"));
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        let dir = std::fs::File::open(&root).unwrap();
        std::thread::spawn(move || {
            let exchange = || {
                rustix::fs::renameat_with(
                    &dir,
                    "sub",
                    &dir,
                    "sl",
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap()
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                exchange();
                swaps += 1;
            }
            if swaps % 2 == 1 {
                exchange();
            }
            swaps
        })
    };
    let ws = "/workspace";
    let mut ops = Vec::new();
    for i in 0..100 {
        ops.extend([
            json!({"op": "write", "path": format!("{ws}/sub/policy.toml")}),
            json!({"op": "mkdir", "path": format!("{ws}/sub/d{i}")}),
            json!({"op": "write", "path": format!("{ws}/mine{i}.txt")}),
            json!({"op": "rename", "path": format!("{ws}/mine{i}.txt"), "to": format!("{ws}/sub/grants.toml")}),
            json!({"op": "symlink", "path": format!("{ws}/sub/l{i}"), "target": "x"}),
            json!({"op": "remove", "path": format!("{ws}/sub/policy.toml")}),
            json!({"op": "remove", "path": format!("{ws}/sub/grants.toml")}),
            json!({"op": "remove", "path": format!("{ws}/sub/l{i}")}),
            json!({"op": "rmdir", "path": format!("{ws}/sub/d{i}")}),
        ]);
    }
    let ops = Value::Array(ops);
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut calls = 0;
    let mut written = 0;
    let mut changed = None;
    while Instant::now() < deadline {
        let r = probe(&root, true, ops.clone()).await;
        written += r
            .iter()
            .step_by(9)
            .filter(|x| x["ok"] == json!(true))
            .count();
        calls += 1;
        let now = listing(&root.join(".toolgate"));
        if now != before {
            changed = Some(now);
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    assert!(swaps > 100, "only {swaps} swaps");
    assert_eq!(changed, None, "after {calls} calls and {swaps} swaps");
    // The race was real: some writes landed in the real directory, others were refused.
    assert!(
        written > 0 && written < calls * 100,
        "{written} of {calls}00 written"
    );
    assert_eq!(listing(&root.join(".toolgate")), before);
}

/// A hard link to a secret is the secret: not opened for reading or writing, by any path;
/// a hard link between ordinary files works as any file does.
#[tokio::test]
async fn a_hard_link_to_a_secret_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join(".env"), "KEY=hunter2").unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::hard_link(root.join(".env"), root.join("src/notes.txt")).unwrap();
    std::os::unix::fs::symlink("src/notes.txt", root.join("via-link")).unwrap();
    std::fs::write(root.join("a.txt"), "plain").unwrap();
    std::fs::hard_link(root.join("a.txt"), root.join("b.txt")).unwrap();
    let ws = "/workspace";
    let r = probe(
        &root,
        true,
        json!([
            {"op": "read", "path": format!("{ws}/src/notes.txt")},
            {"op": "read", "path": format!("{ws}/src/../src/notes.txt")},
            {"op": "read", "path": format!("{ws}/via-link")},
            {"op": "write", "path": format!("{ws}/src/notes.txt")},
            {"op": "write", "path": format!("{ws}/via-link")},
            {"op": "read", "path": format!("{ws}/b.txt")},
            {"op": "write", "path": format!("{ws}/b.txt")},
        ]),
    )
    .await;
    for (i, result) in r.iter().enumerate() {
        assert_eq!(result["ok"], json!(i >= 5), "{i}: {result}");
        assert!(!result.to_string().contains("hunter2"), "{result}");
    }
    assert_eq!(
        std::fs::read_to_string(root.join(".env")).unwrap(),
        "KEY=hunter2"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "probe"
    );
}
