//! The host-assisted walk (`toolgate:fs/walk`, host/src/sandbox/walk.rs): a guest asking the
//! host for a listing gets only what it could list itself, and the walking tools return the
//! same results as their in-guest walk did (ignore files incl. parents, default ignores, name
//! order, deny-list).

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};

/// Ask the host's walk directly from the hostile guest, once per start path.
async fn walks(gate: &toolgate::Gate, starts: &[&str]) -> Vec<Value> {
    let ops = starts
        .iter()
        .map(|s| json!({"op": "walk", "path": s}))
        .collect();
    probe(gate, ops).await
}

fn workspace() -> (Ws, tempfile::TempDir) {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("outside-secret.txt"), "x").unwrap();
    ws.write(".env", "SECRET=1")
        .write(".env.local", "SECRET=2")
        .write("src/lib.rs", "// lib")
        .write("src/.ssh/id_ed25519", "key")
        .write("certs/server.pem", "pem")
        .write("docs/guide.md", "guide")
        .write(".toolgate/outputs/call-1.txt", "saved")
        .write(".toolgate/grants.toml", "");
    std::os::unix::fs::symlink(outside.path(), ws.path("out")).unwrap();
    std::os::unix::fs::symlink("/etc", ws.path("etc")).unwrap();
    (ws, outside)
}

#[tokio::test]
async fn walk_lists_nothing_denied_and_never_follows_symlinks_out() {
    let (ws, _outside) = workspace();
    let gate = ws.gate(false).await;
    let r = walks(&gate, &["/workspace", "/workspace/src"]).await;
    assert_eq!(
        entries(&r[0]),
        [
            "certs/",
            "docs/",
            "docs/guide.md",
            "etc",
            "out",
            "src/",
            "src/lib.rs"
        ]
    );
    assert_eq!(entries(&r[1]), ["lib.rs"]);
    let all = serde_json::to_string(&r).unwrap();
    for hidden in [
        ".env",
        "id_ed25519",
        "server.pem",
        ".toolgate",
        "call-1",
        "outside-secret",
        "passwd",
    ] {
        assert!(!all.contains(hidden), "{hidden} leaked: {all}");
    }
}

/// A guest asking the walk for files matching any glob (`toolgate:fs/walk@0.2.0`) gets only
/// files it could list itself: a glob cannot match a secret, the state directory or a file
/// behind a symlink into view, and a glob too long to compile in the host is refused by name.
#[tokio::test]
async fn a_files_glob_matches_nothing_the_walk_hides() {
    let (ws, _outside) = workspace();
    let gate = ws.gate(false).await;
    let globs = [
        "**",
        "**/*",
        "**/.env*",
        ".env",
        "**/id_*",
        "**/*.pem",
        ".toolgate/**",
        "out/**",
        "etc/**",
        "**/passwd",
        "{**/.env,src/.ssh/*}",
    ];
    let ops = globs
        .iter()
        .map(|g| json!({"op": "walk", "path": "/workspace", "target": g}))
        .collect();
    let r = probe(&gate, ops).await;
    assert_eq!(
        entries(&r[0]),
        ["docs/guide.md", "etc", "out", "src/lib.rs"]
    );
    assert_eq!(entries(&r[1]), entries(&r[0]));
    for (glob, result) in globs.iter().zip(&r).skip(2) {
        assert_eq!(result["ok"], true, "{glob}: {result}");
        assert!(entries(result).is_empty(), "{glob}: {result}");
    }
    let all = serde_json::to_string(&r).unwrap();
    for hidden in [
        "id_ed25519",
        "server.pem",
        "call-1",
        "grants",
        "outside-secret",
    ] {
        assert!(!all.contains(hidden), "{hidden} leaked: {all}");
    }
    let long = format!("{}*", "{a,b}".repeat(1000));
    let r = probe(
        &gate,
        vec![json!({"op": "walk", "path": "/workspace", "target": long})],
    )
    .await;
    assert_eq!(r[0]["ok"], false, "{}", r[0]);
    let detail = r[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("files-matching") && detail.contains("4096"),
        "{detail}"
    );
}

/// The walk and the read-ahead (`toolgate:search/read-ahead`, which walks the same way) refuse
/// the same starts.
#[tokio::test]
async fn walk_and_read_ahead_refuse_starts_outside_the_workspace_or_denied() {
    let (ws, outside) = workspace();
    let gate = ws.gate(false).await;
    let outside = outside.path().to_string_lossy().into_owned();
    let starts = [
        "/",
        "/etc",
        outside.as_str(),
        "workspace/src",
        "/workspace/..",
        "/workspace/src/../../etc",
        "/workspace/src/../docs",
        "/workspace/out",
        "/workspace/etc",
        "/workspace/.toolgate",
        "/workspace/.toolgate/outputs",
        "/workspace/src/.ssh",
        "/workspace/.env",
        "/workspace/certs/server.pem",
    ];
    for op in ["walk", "read-ahead"] {
        let ops = starts
            .iter()
            .map(|s| json!({"op": op, "path": s}))
            .collect();
        let r = probe(&gate, ops).await;
        for (start, result) in starts.iter().zip(&r) {
            assert_eq!(result["ok"], false, "{op} {start}: {result}");
            let detail = result["detail"].as_str().unwrap();
            assert!(detail.contains(start), "{op} {start}: {detail}");
            assert!(!detail.contains("outside-secret"), "{detail}");
        }
    }
    // A denied name is refused the same way whether it exists or not.
    let r = walks(&gate, &["/workspace/.env", "/workspace/missing/.env"]).await;
    assert_eq!(
        r[0]["detail"]
            .as_str()
            .unwrap()
            .replace("/workspace/.env", "X"),
        r[1]["detail"]
            .as_str()
            .unwrap()
            .replace("/workspace/missing/.env", "X")
    );
}

#[tokio::test]
async fn grep_glob_ls_keep_their_walk_semantics() {
    let ws = Ws::new();
    ws.write(".gitignore", "*.log\ngen/\n")
        .write("src/.ignore", "!keep.log\n")
        .write("src/keep.log", "needle keep\n")
        .write("src/drop.log", "needle drop\n")
        .write("src/b/.gitignore", "x.rs\n")
        .write("src/b/x.rs", "needle x\n")
        .write("src/b/y.rs", "needle y\n")
        .write("src/a.rs", "needle a\n")
        .write("src/Z.rs", "needle Z\n")
        .write("gen/g.rs", "needle gen\n")
        .write("node_modules/m/i.js", "needle nm\n")
        .write("dist/d.js", "needle dist\n")
        .write(".git/HEAD", "needle git\n")
        .write(".github/ci.yml", "needle ci\n")
        .write(".env", "needle secret\n");
    let gate = ws.gate(false).await;
    let o = ok(&gate, "grep", json!({"pattern": "needle"})).await;
    assert_eq!(
        o.content,
        ".github/ci.yml:1:needle ci\nsrc/Z.rs:1:needle Z\nsrc/a.rs:1:needle a\nsrc/b/y.rs:1:needle y\nsrc/keep.log:1:needle keep\n"
    );
    // Parent ignore files count when the search starts below them.
    let o = ok(&gate, "grep", json!({"pattern": "needle", "path": "src/b"})).await;
    assert_eq!(o.content, "src/b/y.rs:1:needle y\n");
    let o = ok(&gate, "grep", json!({"pattern": "needle", "path": "gen"})).await;
    assert_eq!(o.content, "gen/g.rs:1:needle gen\n");
    let o = ok(&gate, "glob", json!({"pattern": "**/*.rs"})).await;
    let mut files: Vec<&str> = o.content.lines().collect();
    files.sort();
    assert_eq!(files, ["src/Z.rs", "src/a.rs", "src/b/y.rs"]);
    let o = ok(&gate, "ls", json!({"depth": 2, "ignore": ["b"]})).await;
    assert_eq!(
        o.content,
        "./\n  .github/\n    ci.yml\n  .gitignore\n  src/\n    .ignore\n    Z.rs\n    a.rs\n    keep.log\n"
    );
}
