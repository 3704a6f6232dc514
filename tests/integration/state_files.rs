//! A workspace toolgate cannot read is refused, never bricked and never written through
//! (issue #14 part 2). A repository may commit `.toolgate` as a symlink (git stores symlinks),
//! ship `state.db` or its `-wal` as a link to a file elsewhere, or leave a directory where a
//! state file belongs. Each is an error that names the path and says how to repair it, nothing
//! outside the workspace changes, and the repair commands (`policy check`, `grants list`) still
//! run.

use crate::common::*;
use std::os::unix::fs::symlink;
use std::process::Output;

fn run(ws: &Ws, args: &[&str]) -> Output {
    toolgate_command(ws).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What a directory holds, names and bytes, to compare before and after.
fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    out.sort();
    out
}

fn assert_plain(message: &str) {
    assert!(
        !message.contains("os error"),
        "an errno number reached the user: {message}"
    );
}

#[test]
fn a_committed_state_dir_symlink_is_refused_and_nothing_is_written_through_it() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("keep"), "user data").unwrap();
    let before = snapshot(outside.path());
    symlink(outside.path(), ws.path(".toolgate")).unwrap();

    for args in [
        &["call", "read", r#"{"path": "a.txt"}"#][..],
        &["call", "ls", "{}"][..],
        &["grants", "add", "write:src/**"][..],
    ] {
        let o = run(&ws, args);
        let err = stderr(&o);
        assert!(
            !o.status.success(),
            "{args:?} succeeded through the link: {err}"
        );
        assert!(
            err.contains(".toolgate") && err.contains("symbolic link"),
            "{args:?}: {err}"
        );
        assert_plain(&err);
    }
    assert_eq!(
        snapshot(outside.path()),
        before,
        "a file outside the workspace changed"
    );

    // The diagnosis still runs and names the problem.
    let o = run(&ws, &["policy", "check"]);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(
        text.contains(".toolgate") && text.contains("symbolic link"),
        "{text}"
    );
    assert_eq!(snapshot(outside.path()), before);
}

#[test]
fn a_dangling_state_dir_symlink_does_not_create_its_target() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("made-by-toolgate");
    symlink(&target, ws.path(".toolgate")).unwrap();
    let o = run(&ws, &["call", "ls", "{}"]);
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(
        !target.exists(),
        "toolgate created the link's target outside the workspace"
    );
}

#[test]
fn a_state_dir_that_is_a_file_is_named_in_plain_words() {
    let ws = Ws::new();
    std::fs::write(ws.path(".toolgate"), "not a directory").unwrap();
    let o = run(&ws, &["call", "ls", "{}"]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains(".toolgate") && err.contains("not a directory"),
        "{err}"
    );
    assert!(
        err.contains("rm "),
        "the error should say how to repair it: {err}"
    );
    assert_plain(&err);
    assert_eq!(
        std::fs::read(ws.path(".toolgate")).unwrap(),
        b"not a directory"
    );
}

#[test]
fn a_state_database_linked_elsewhere_is_never_opened() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    // A real SQLite database outside the workspace (another project's, say).
    let outside = tempfile::tempdir().unwrap();
    let other = outside.path().join("other.db");
    {
        let c = rusqlite::Connection::open(&other).unwrap();
        c.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
            .unwrap();
    }
    let before = std::fs::read(&other).unwrap();
    std::fs::create_dir(ws.path(".toolgate")).unwrap();

    for (name, how) in [
        ("state.db", "symlink"),
        ("state.db", "hard link"),
        ("state.db-wal", "symlink"),
    ] {
        let planted = ws.path(&format!(".toolgate/{name}"));
        let _ = std::fs::remove_file(ws.path(".toolgate/state.db"));
        if how == "symlink" {
            symlink(&other, &planted).unwrap();
        } else {
            std::fs::hard_link(&other, &planted).unwrap();
        }
        let o = run(&ws, &["call", "read", r#"{"path": "a.txt"}"#]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{name} as a {how} was used: {err}");
        assert!(err.contains(name), "{name} as a {how}: {err}");
        assert_plain(&err);
        assert_eq!(
            std::fs::read(&other).unwrap(),
            before,
            "{name} as a {how} was written through"
        );
        std::fs::remove_file(&planted).unwrap();
    }
}

#[test]
fn wrong_type_state_files_are_named_and_the_repair_commands_still_run() {
    let ws = Ws::new();
    ws.write("a.txt", "hello\n");
    ws.mkdir(".toolgate/policy.toml");
    let o = run(&ws, &["call", "read", r#"{"path": "a.txt"}"#]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("policy.toml") && err.contains("a directory"),
        "{err}"
    );
    assert!(err.contains("delete it"), "{err}");
    let o = run(&ws, &["policy", "check"]);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(
        text.contains("policy.toml") && text.contains("a directory"),
        "{text}"
    );
    let o = run(&ws, &["grants", "list"]);
    assert!(o.status.success(), "grants list: {}", stderr(&o));
    std::fs::remove_dir(ws.path(".toolgate/policy.toml")).unwrap();

    ws.mkdir(".toolgate/grants.toml");
    let o = run(&ws, &["grants", "list"]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("grants.toml") && err.contains("a directory") && err.contains("rm -r"),
        "{err}"
    );
    assert_plain(&err);
    std::fs::remove_dir(ws.path(".toolgate/grants.toml")).unwrap();

    // Repaired by deleting: everything works again.
    let o = run(&ws, &["call", "read", r#"{"path": "a.txt"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `git status` in `ws`, untracked files listed one by one.
fn git_status(ws: &Ws) -> Option<String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(ws.root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", ws.user_root())
            .output()
            .ok()
    };
    let init = git(&["init", "-q"])?;
    if !init.status.success() {
        return None;
    }
    let out = git(&["status", "--porcelain", "--untracked-files=all"])?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_state_directory_stays_out_of_git_status() {
    let ws = Ws::new();
    ws.plant("src/a.txt", "a\n");
    let o = run(&ws, &["call", "read", r#"{"path":"src/a.txt"}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(ws.read(".toolgate/.gitignore").lines().any(|l| l == "*"));
    let Some(status) = git_status(&ws) else {
        eprintln!("skipped the git status check: git is not installed");
        return;
    };
    assert!(status.contains("src/a.txt"), "{status}");
    assert!(!status.contains(".toolgate"), "{status}");
}

#[test]
fn a_committed_state_directory_keeps_its_files_visible_but_not_the_database() {
    let ws = Ws::new();
    ws.plant(".toolgate/policy.toml", "mode = \"ask\"\n");
    let o = run(&ws, &["call", "grep", r#"{"pattern":"x"}"#]);
    assert!(o.status.code().is_some(), "{}", stderr(&o));
    let ignore = ws.read(".toolgate/.gitignore");
    assert!(ignore.lines().any(|l| l == "state.db"), "{ignore}");
    assert!(!ignore.lines().any(|l| l == "*"), "{ignore}");
    let Some(status) = git_status(&ws) else {
        eprintln!("skipped the git status check: git is not installed");
        return;
    };
    assert!(status.contains(".toolgate/policy.toml"), "{status}");
    assert!(!status.contains("state.db"), "{status}");
}

#[test]
fn a_planted_gitignore_link_is_not_written_through() {
    let ws = Ws::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("theirs");
    std::fs::write(&target, "theirs\n").unwrap();
    ws.mkdir(".toolgate");
    symlink(&target, ws.path(".toolgate/.gitignore")).unwrap();
    let o = run(&ws, &["call", "grep", r#"{"pattern":"x"}"#]);
    assert!(o.status.code().is_some(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs\n");
}
