//! Issue #49, item 10: a write through a symbolic link whose target leaves the workspace is
//! an escape, denied at scope before any tool runs, whether the target exists or not (a link
//! to a missing file passed the scope as its own name and answered `error`, "not a regular
//! file"). A link to a deny-listed path inside the workspace is denied as that secret.

use crate::common::*;
use serde_json::{json, Value};
use std::os::unix::fs::symlink;
use toolgate::Status;

/// The tools that take a path and follow its last component, each with an input for `path`.
fn inputs(path: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("write", json!({"path": path, "content": "planted\n"})),
        (
            "edit",
            json!({"path": path, "old_string": "", "new_string": "planted\n"}),
        ),
        (
            "multiedit",
            json!({"path": path, "edits": [{"old_string": "", "new_string": "planted\n"}]}),
        ),
        ("read", json!({"path": path})),
        ("ls", json!({"path": path})),
        ("grep", json!({"pattern": "x", "path": path})),
        ("glob", json!({"pattern": "*", "path": path})),
    ]
}

#[tokio::test]
async fn a_link_out_of_the_workspace_is_denied_at_scope_even_to_a_missing_target() {
    let ws = Ws::new();
    let out = tempfile::tempdir().unwrap();
    let out_root = out.path().canonicalize().unwrap();
    // A file link and a directory link to targets that do not exist yet, and a chain.
    symlink(out_root.join("new.txt"), ws.path("notes.txt")).unwrap();
    symlink(out_root.join("missing"), ws.path("vendor")).unwrap();
    symlink("hop", ws.path("first.txt")).unwrap();
    symlink(out_root.join("far.txt"), ws.path("hop")).unwrap();
    ws.mkdir("src");
    symlink("../../escape.txt", ws.path("src/up.txt")).unwrap();
    let gate = ws.gate(true).await;
    for path in ["notes.txt", "vendor/planted.txt", "first.txt", "src/up.txt"] {
        for (tool, input) in inputs(path) {
            let o = call(&gate, tool, input).await;
            assert_eq!(o.status, Status::Denied, "{tool} {path}: {o:#?}");
            assert_eq!(o.stage.as_deref(), Some("scope"), "{tool} {path}: {o:#?}");
            assert_eq!(o.source.as_deref(), Some("path `path`"), "{tool} {path}");
            let reason = o.reason.clone().unwrap();
            assert!(
                reason.starts_with(&format!("`{path}` goes through the symbolic link `"))
                    && reason.contains("which is outside the workspace"),
                "{tool} {path}: {reason}"
            );
        }
    }
    let o = call(
        &gate,
        "write",
        json!({"path": "notes.txt", "content": "planted\n"}),
    )
    .await;
    assert_eq!(
        o.reason.unwrap(),
        format!(
            "`notes.txt` goes through the symbolic link `notes.txt` -> `{0}/new.txt` and leads to {0}/new.txt, which is outside the workspace {1}",
            out_root.display(),
            ws.root().display()
        )
    );
    // Nothing was created anywhere outside, and the links are still links.
    assert!(std::fs::read_dir(&out_root).unwrap().next().is_none());
    let parent = ws.root().parent().unwrap().to_path_buf();
    assert!(!exists(&parent.join("escape.txt")));
    for l in ["notes.txt", "vendor", "first.txt", "hop", "src/up.txt"] {
        assert!(ws.path(l).symlink_metadata().unwrap().is_symlink(), "{l}");
    }
}

#[tokio::test]
async fn a_link_to_a_secret_is_denied_as_the_secret_whether_it_exists_or_not() {
    let ws = Ws::new();
    symlink(".env", ws.path("settings.txt")).unwrap();
    symlink("keys/id_ed25519", ws.path("deploy.txt")).unwrap();
    symlink(".toolgate/planted.toml", ws.path("db.txt")).unwrap();
    symlink(".git/hooks/pre-commit", ws.path("hook.sh")).unwrap();
    let gate = ws.gate(true).await;
    for (path, matched) in [
        ("settings.txt", "deny-list (`.env`)"),
        ("deploy.txt", "deny-list (`keys/id_ed25519`)"),
        ("db.txt", "toolgate's own state"),
        ("hook.sh", "git internals"),
    ] {
        let o = call(&gate, "write", json!({"path": path, "content": "X=1\n"})).await;
        assert_eq!(o.status, Status::Denied, "{path}: {o:#?}");
        assert_eq!(o.stage.as_deref(), Some("scope"), "{path}");
        let reason = o.reason.unwrap();
        assert!(
            reason.starts_with(&format!(
                "`{path}` goes through the symbolic link `{path}` -> `"
            )) && reason.contains(matched),
            "{path}: {reason}"
        );
    }
    assert!(!exists(&ws.path(".env")));
    assert!(!exists(&ws.path("keys")));
    assert!(!exists(&ws.path(".git")));
    assert!(!exists(&ws.path(".toolgate/planted.toml")));
    // An existing secret behind a link was denied before (as its target): still so.
    ws.write(".env", "TOKEN=hunter2\n");
    let o = call(
        &gate,
        "write",
        json!({"path": "settings.txt", "content": "x"}),
    )
    .await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    assert!(o.reason.unwrap().contains("secrets deny-list"));
    assert_eq!(ws.read(".env"), "TOKEN=hunter2\n");
}

/// Links that stay inside to a file that exists keep working.
#[tokio::test]
async fn a_link_inside_the_workspace_still_works() {
    let ws = Ws::new();
    ws.write("src/main.rs", "fn main() {}\n");
    symlink("src", ws.path("alias")).unwrap();
    let gate = ws.gate(true).await;
    let o = ok(&gate, "read", json!({"path": "alias/main.rs"})).await;
    assert_eq!(o.data["path"], json!("src/main.rs"));
    ok(
        &gate,
        "write",
        json!({"path": "alias/new.rs", "content": "// new\n"}),
    )
    .await;
    assert_eq!(ws.read("src/new.rs"), "// new\n");
}
