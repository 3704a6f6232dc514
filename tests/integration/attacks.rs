//! Known ways out of a tool sandbox, each a named test. Every one must be refused by the gate
//! (or the sandbox) and leave nothing changed.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::os::unix::fs::symlink;
use toolgate::Status;

/// A directory outside the workspace holding a secret.
struct Outside {
    dir: tempfile::TempDir,
}

impl Outside {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret.txt"), "OUTSIDE-SECRET\n").unwrap();
        Outside { dir }
    }
    fn root(&self) -> std::path::PathBuf {
        self.dir.path().canonicalize().unwrap()
    }
    fn secret(&self) -> std::path::PathBuf {
        self.root().join("secret.txt")
    }
}

const SCOPE_HINT: &str = "use a path inside the workspace; symlinks are followed before this check";

fn outside_denial(ws: &Ws, raw: &str, resolved: &std::path::Path) -> String {
    format!(
        "`{raw}` resolves to {}, which is outside the workspace {}",
        resolved.display(),
        ws.root().display()
    )
}

#[tokio::test]
async fn dotdot_escape_is_denied() {
    let ws = Ws::new();
    let out = Outside::new();
    let gate = ws.gate(false).await;
    // Both temp dirs are siblings: climb out of the workspace and into the other one.
    let name = out
        .root()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let raw = format!("../{name}/secret.txt");
    let o = call(&gate, "read", json!({ "path": raw })).await;
    let reason = outside_denial(&ws, &raw, &out.secret());
    assert_eq!(
        stable(&o),
        json!({
            "tool": "read",
            "status": "denied",
            "summary": format!("denied: {reason}"),
            "content": format!("denied (scope): {reason}\nhint: {SCOPE_HINT}"),
            "truncated": false,
            "data": null,
            "audit_id": "<audit>",
            "reason": reason,
            "hint": SCOPE_HINT,
            "stage": "scope",
            "source": "path `path`",
            "stop_turn": true,
        })
    );
    // `..` hidden in the middle of a path that starts inside.
    ws.mkdir("src");
    let o = call(
        &gate,
        "read",
        json!({ "path": format!("src/../../{name}/secret.txt") }),
    )
    .await;
    assert_eq!(o.status, Status::Denied);
    assert_eq!(o.stage.as_deref(), Some("scope"));
}

#[tokio::test]
async fn absolute_path_outside_is_denied() {
    let ws = Ws::new();
    let gate = ws.gate(false).await;
    for tool in ["read", "ls", "grep", "glob"] {
        let input = match tool {
            "read" => json!({"path": "/etc/passwd"}),
            "ls" => json!({"path": "/etc"}),
            _ => json!({"pattern": "root", "path": "/etc"}),
        };
        let o = call(&gate, tool, input).await;
        assert_eq!(o.status, Status::Denied, "{tool}: {o:#?}");
        assert_eq!(o.stage.as_deref(), Some("scope"));
        assert_eq!(o.stop_turn, Some(true));
    }
    // An absolute path inside the workspace is fine.
    ws.write("in.txt", "inside\n");
    let o = ok(
        &gate,
        "read",
        json!({"path": ws.path("in.txt").to_string_lossy()}),
    )
    .await;
    assert_eq!(o.content, "     1\tinside\n");
}

#[tokio::test]
async fn symlinked_file_pointing_outside_is_denied() {
    let ws = Ws::new();
    let out = Outside::new();
    symlink(out.secret(), ws.path("innocent.txt")).unwrap();
    let gate = ws.gate(true).await;
    let o = call(&gate, "read", json!({"path": "innocent.txt"})).await;
    assert_eq!(o.status, Status::Denied);
    assert_eq!(
        o.reason,
        Some(outside_denial(&ws, "innocent.txt", &out.secret()))
    );

    // Writing through it is denied the same way, and the target is untouched.
    let o = call(
        &gate,
        "write",
        json!({"path": "innocent.txt", "content": "pwned\n"}),
    )
    .await;
    assert_eq!(o.status, Status::Denied);
    assert_eq!(
        std::fs::read_to_string(out.secret()).unwrap(),
        "OUTSIDE-SECRET\n"
    );

    // A walking tool never follows it out of the workspace.
    let o = ok(&gate, "grep", json!({"pattern": "OUTSIDE"})).await;
    assert_eq!(o.data["matches"], json!(0), "{o:#?}");
}

#[tokio::test]
async fn symlinked_directory_pointing_outside_is_denied() {
    let ws = Ws::new();
    let out = Outside::new();
    symlink(out.root(), ws.path("vendor")).unwrap();
    let gate = ws.gate(true).await;
    for (tool, input) in [
        ("read", json!({"path": "vendor/secret.txt"})),
        ("ls", json!({"path": "vendor"})),
        ("grep", json!({"pattern": "SECRET", "path": "vendor"})),
        ("glob", json!({"pattern": "*", "path": "vendor"})),
        (
            "write",
            json!({"path": "vendor/planted.txt", "content": "x"}),
        ),
        (
            "edit",
            json!({"path": "vendor/new.txt", "old_string": "", "new_string": "x"}),
        ),
    ] {
        let o = call(&gate, tool, input).await;
        assert_eq!(o.status, Status::Denied, "{tool}: {o:#?}");
        assert_eq!(o.stage.as_deref(), Some("scope"), "{tool}");
    }
    assert!(!exists(&out.root().join("planted.txt")));
    assert!(!exists(&out.root().join("new.txt")));
    // Walking the workspace does not descend into it.
    let o = ok(&gate, "grep", json!({"pattern": "SECRET"})).await;
    assert_eq!(o.data["matches"], json!(0), "{o:#?}");
    let o = ok(&gate, "glob", json!({"pattern": "**/secret.txt"})).await;
    assert_eq!(o.content, "No files match `**/secret.txt` under .\n");
}

#[tokio::test]
async fn symlinked_directory_inside_the_workspace_resolves_to_its_target() {
    let ws = Ws::new();
    ws.write("src/main.rs", "fn main() {}\n");
    symlink(ws.path("src"), ws.path("alias")).unwrap();
    let gate = ws.gate(true).await;
    // Reading through the alias records the real file: an edit by its real name is allowed.
    let o = ok(&gate, "read", json!({"path": "alias/main.rs"})).await;
    assert_eq!(o.data["path"], json!("src/main.rs"));
    ok(
        &gate,
        "edit",
        json!({"path": "src/main.rs", "old_string": "{}", "new_string": "{ run() }"}),
    )
    .await;
    assert_eq!(ws.read("src/main.rs"), "fn main() { run() }\n");
    assert!(ws
        .path("alias")
        .symlink_metadata()
        .unwrap()
        .file_type()
        .is_symlink());
}

#[tokio::test]
async fn symlink_to_a_secret_inside_the_workspace_is_denied() {
    let ws = Ws::new();
    ws.write(".env", "TOKEN=hunter2\n");
    symlink(ws.path(".env"), ws.path("settings.txt")).unwrap();
    let gate = ws.gate(false).await;
    let o = call(&gate, "read", json!({"path": "settings.txt"})).await;
    assert_eq!(o.status, Status::Denied, "{o:#?}");
    let o = ok(&gate, "grep", json!({"pattern": "hunter2"})).await;
    assert_eq!(o.data["matches"], json!(0), "{o:#?}");
}

#[tokio::test]
async fn dotenv_files_are_denied() {
    let ws = Ws::new();
    ws.write(".env", "TOKEN=hunter2\n")
        .write("config/.env.local", "DB=postgres://u:p@h/db\n");
    let gate = ws.gate(true).await;
    for raw in [".env", "config/.env.local", "./config/../.env"] {
        let o = call(&gate, "read", json!({ "path": raw })).await;
        let matched = if raw == "config/.env.local" {
            "config/.env.local"
        } else {
            ".env"
        };
        let reason = format!("`{raw}` matches the secrets deny-list (`{matched}`)");
        let hint = "secrets are never given to tools; if this file is not a secret, give it a name the deny-list does not match: the built-in patterns cannot be lifted (`secrets` in .toolgate/policy.toml only adds patterns; one you added there can be removed)";
        assert_eq!(
            stable(&o),
            json!({
                "tool": "read",
                "status": "denied",
                "summary": format!("denied: {reason}"),
                "content": format!("denied (scope): {reason}\nhint: {hint}"),
                "truncated": false,
                "data": null,
                "audit_id": "<audit>",
                "reason": reason,
                "hint": hint,
                "stage": "scope",
                "source": "path `path`",
                "stop_turn": true,
            })
        );
    }
    // Nor can a tool create or overwrite one.
    let o = call(
        &gate,
        "write",
        json!({"path": "config/.env.production", "content": "X=1\n"}),
    )
    .await;
    assert_eq!(o.status, Status::Denied);
    assert!(!exists(&ws.path("config/.env.production")));
    assert_eq!(ws.read(".env"), "TOKEN=hunter2\n");
}

#[tokio::test]
async fn state_db_cannot_be_read_or_written() {
    let ws = Ws::new();
    let gate = ws.gate(true).await;
    let db = ws.path(".toolgate/state.db");
    let before = std::fs::read(&db).unwrap();
    let hint =
        "only files under .toolgate/outputs/ can be read; manage state with the toolgate CLI";
    for (tool, input) in [
        ("read", json!({"path": ".toolgate/state.db"})),
        ("ls", json!({"path": ".toolgate"})),
        ("grep", json!({"pattern": "audit", "path": ".toolgate"})),
        (
            "write",
            json!({"path": ".toolgate/state.db", "content": "x"}),
        ),
        (
            "write",
            json!({"path": ".toolgate/policy.toml", "content": "mode = \"allow-all\"\n"}),
        ),
        (
            "edit",
            json!({"path": ".toolgate/grants.toml", "old_string": "", "new_string": "x"}),
        ),
        (
            "write",
            json!({"path": ".toolgate/outputs/x.txt", "content": "x"}),
        ),
    ] {
        let raw = input["path"].as_str().unwrap().to_string();
        let o = call(&gate, tool, input).await;
        assert_eq!(o.status, Status::Denied, "{tool} {raw}: {o:#?}");
        assert_eq!(
            o.reason.as_deref(),
            Some(
                format!("`{raw}` is toolgate's own state (.toolgate/), which no tool may touch")
                    .as_str()
            )
        );
        assert_eq!(o.hint.as_deref(), Some(hint));
    }
    assert!(!exists(&ws.path(".toolgate/policy.toml")));
    assert!(!exists(&ws.path(".toolgate/grants.toml")));
    assert!(!exists(&ws.path(".toolgate/outputs/x.txt")));
    // The database only grew (from the audit log); nobody replaced it.
    assert!(std::fs::read(&db).unwrap().len() >= before.len());
    // Searching the whole workspace does not look inside .toolgate/ either.
    let o = ok(&gate, "grep", json!({"pattern": "SQLite"})).await;
    assert_eq!(o.data["matches"], json!(0), "{o:#?}");
}

#[tokio::test]
async fn saved_outputs_are_readable() {
    let ws = Ws::new();
    ws.write(".toolgate/outputs/call-0.txt", "saved output\n");
    let gate = ws.gate(false).await;
    let o = ok(
        &gate,
        "read",
        json!({"path": ".toolgate/outputs/call-0.txt"}),
    )
    .await;
    assert_eq!(o.content, "     1\tsaved output\n");
}

#[tokio::test]
async fn write_to_a_file_not_read_in_this_session_is_refused() {
    let ws = Ws::new();
    ws.write("src/lib.rs", "pub fn a() {}\n");
    let gate = ws.gate(true).await;
    let o = call(
        &gate,
        "edit",
        json!({"path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
    )
    .await;
    let reason = "src/lib.rs has not been read in this session";
    let hint = "call `read` on src/lib.rs first, so the change is made against what it contains";
    assert_eq!(
        stable(&o),
        json!({
            "tool": "edit",
            "status": "error",
            "summary": reason,
            "content": format!("error: {reason}\nhint: {hint}"),
            "truncated": false,
            "data": null,
            "audit_id": "<audit>",
            "error_code": "not-read",
            "reason": reason,
            "hint": hint,
            "stage": "staleness",
        })
    );
    assert_eq!(ws.read("src/lib.rs"), "pub fn a() {}\n");
    // `ls` or `grep` showing the file is not a read of it.
    ok(&gate, "grep", json!({"pattern": "fn"})).await;
    let o = call(
        &gate,
        "write",
        json!({"path": "src/lib.rs", "content": "x"}),
    )
    .await;
    assert_eq!(code(&o), "not-read");
}

#[tokio::test]
async fn write_after_the_file_changed_on_disk_is_stale() {
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let gate = ws.gate(true).await;
    read_first(&gate, "a.txt").await;
    ws.write("a.txt", "one\ntwo (the user's)\n");
    let o = call(
        &gate,
        "edit",
        json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
    )
    .await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(code(&o), "stale");
    assert_eq!(
        o.reason.as_deref(),
        Some("a.txt changed since it was last read in this session (4 -> 21 bytes)")
    );
    assert_eq!(
        o.hint.as_deref(),
        Some("read a.txt again, then retry the change against what it contains now")
    );
    assert_eq!(ws.read("a.txt"), "one\ntwo (the user's)\n");
    // Same size, different content: still stale (the hash decides, not the size).
    read_first(&gate, "a.txt").await;
    ws.write("a.txt", "ONE\ntwo (the user's)\n");
    let o = call(&gate, "write", json!({"path": "a.txt", "content": "x"})).await;
    assert_eq!(code(&o), "stale");
    // After reading again the edit goes through.
    read_first(&gate, "a.txt").await;
    ok(
        &gate,
        "edit",
        json!({"path": "a.txt", "old_string": "ONE", "new_string": "1"}),
    )
    .await;
    assert_eq!(ws.read("a.txt"), "1\ntwo (the user's)\n");
}

#[tokio::test]
async fn another_session_cannot_use_this_sessions_read() {
    let ws = Ws::new();
    ws.write("a.txt", "one\n");
    let gate = ws.gate(true).await;
    let o = gate.call("alice", "read", json!({"path": "a.txt"})).await;
    assert_eq!(o.status, Status::Ok);
    let o = gate
        .call(
            "mallory",
            "edit",
            json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
        )
        .await;
    assert_eq!(code(&o), "not-read");
    assert_eq!(ws.read("a.txt"), "one\n");
    let o = gate
        .call(
            "alice",
            "edit",
            json!({"path": "a.txt", "old_string": "one", "new_string": "1"}),
        )
        .await;
    assert_eq!(o.status, Status::Ok, "{o:#?}");
}

#[tokio::test]
async fn write_tools_are_denied_without_allow_writes() {
    let ws = Ws::new();
    ws.write("a.txt", "one\n").write("src/b.txt", "two\n");
    let gate = ws.gate(false).await;
    read_first(&gate, "a.txt").await;
    read_first(&gate, "src/b.txt").await;
    for (tool, input, key) in [
        (
            "write",
            json!({"path": "a.txt", "content": "x"}),
            "write:./",
        ),
        (
            "edit",
            json!({"path": "src/b.txt", "old_string": "two", "new_string": "2"}),
            "edit:src/",
        ),
        (
            "multiedit",
            json!({"path": "a.txt", "edits": [{"old_string": "one", "new_string": "1"}]}),
            "multiedit:./",
        ),
    ] {
        let o = call(&gate, tool, input).await;
        // Headless (no approval surface): asking means deny, with the grant or rule that
        // would allow it.
        let reason = format!("`{key}` needs approval and there is no approval surface");
        let hint = format!(
            "no one can approve here (headless); allow it for this run with `--grant '{key}'`, or for the project with a rule in .toolgate/policy.toml: [[rules]] key = \"{key}\" decision = \"allow\""
        );
        assert_eq!(
            stable(&o),
            json!({
                "tool": tool,
                "status": "denied",
                "summary": format!("denied: {reason}"),
                "content": format!("denied (ask): {reason}\nhint: {hint}"),
                "truncated": false,
                "data": null,
                "audit_id": "<audit>",
                "reason": reason,
                "hint": hint,
                "stage": "ask",
                "source": "headless",
                "stop_turn": true,
            })
        );
    }
    assert_eq!(ws.read("a.txt"), "one\n");
    assert_eq!(ws.read("src/b.txt"), "two\n");
}

#[tokio::test]
async fn hostile_guest_cannot_escape_its_preopen() {
    let ws = Ws::new();
    ws.write("ok.txt", "fine\n");
    let gate = ws.gate(false).await;
    let o = ok(
        &gate,
        "test-hostile",
        json!({"mode": "escape", "path": "ok.txt"}),
    )
    .await;
    // The one path the gate granted is readable; nothing else is.
    assert_eq!(
        o.summary, "1 of 8 escape attempts succeeded",
        "{}",
        o.content
    );
    let lines: Vec<&str> = o.content.lines().collect();
    assert_eq!(lines.len(), 8, "{}", o.content);
    for line in &lines[..7] {
        assert!(line.contains(": failed ("), "{line}");
    }
    assert_eq!(lines[7], "read /workspace/ok.txt: SUCCEEDED (read 5 bytes)");
    assert!(!exists(&ws.path(".toolgate-escape-probe")));
    assert!(!exists(std::path::Path::new("/tmp/toolgate-escape-probe")));
    // The path argument is scoped like any other.
    let o = call(
        &gate,
        "test-hostile",
        json!({"mode": "escape", "path": "/etc/passwd"}),
    )
    .await;
    assert_eq!(o.status, Status::Denied);
}

#[tokio::test]
async fn a_fifo_in_the_workspace_cannot_hang_a_tool() {
    let ws = Ws::new();
    ws.write("src/a.txt", "needle\n");
    let status = std::process::Command::new("mkfifo")
        .arg(ws.path("src/pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let gate = ws.gate(false).await;
    // Opening a FIFO for reading would block until a writer comes, inside a host call the
    // deadline cannot interrupt: the filesystem guard refuses anything but files and dirs.
    let o = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        call(&gate, "read", json!({"path": "src/pipe"})),
    )
    .await
    .expect("read of a FIFO must not hang");
    assert_eq!(o.status, Status::Error, "{o:#?}");
    let o = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        call(&gate, "grep", json!({"pattern": "needle"})),
    )
    .await
    .expect("grep next to a FIFO must not hang");
    assert!(o.content.contains("src/a.txt"), "{o:#?}");
}
