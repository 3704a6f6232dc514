//! Unit tests of `workspace/layout.rs`.
#![allow(clippy::unwrap_used)]

use super::*;
#[test]
fn state_dir_is_made_and_a_planted_link_or_file_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let dir = ws.path().join(".toolgate/plugins");
    ensure_state_dir(&dir).unwrap();
    assert!(dir.is_dir());

    let ws2 = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws2.path().join(".toolgate")).unwrap();
    let e = ensure_state_dir(&ws2.path().join(".toolgate")).unwrap_err();
    assert!(
        e.to_string().contains("a symbolic link, not a directory"),
        "{e}"
    );
    let e = ensure_state_dir(&ws2.path().join(".toolgate/outputs")).unwrap_err();
    assert!(
        e.to_string().contains(".toolgate is a symbolic link"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

    // A dangling link: mkdir must not create its target.
    let ws3 = tempfile::tempdir().unwrap();
    let target = outside.path().join("made");
    std::os::unix::fs::symlink(&target, ws3.path().join(".toolgate")).unwrap();
    assert!(ensure_state_dir(&ws3.path().join(".toolgate")).is_err());
    assert!(!target.exists());

    let ws4 = tempfile::tempdir().unwrap();
    std::fs::write(ws4.path().join(".toolgate"), "x").unwrap();
    let e = ensure_state_dir(&ws4.path().join(".toolgate")).unwrap_err();
    assert!(
        e.to_string().contains("a regular file, not a directory"),
        "{e}"
    );
}

#[test]
fn state_files_must_be_plain_files_of_their_own() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("state.db");
    check_state_file(&p).unwrap();
    std::fs::write(&p, "").unwrap();
    check_state_file(&p).unwrap();
    std::fs::hard_link(&p, d.path().join("other")).unwrap();
    assert!(check_state_file(&p)
        .unwrap_err()
        .to_string()
        .contains("2 names"));
    let l = d.path().join("state.db-wal");
    std::os::unix::fs::symlink("/etc/passwd", &l).unwrap();
    assert!(check_state_file(&l)
        .unwrap_err()
        .to_string()
        .contains("a symbolic link"));
}

#[test]
fn state_files_are_regular_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("t");
    std::fs::write(&target, "x").unwrap();
    let link = dir.path().join("l");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(read_state_file(&link).unwrap_err().contains("symlink"));
    assert!(read_state_file(dir.path())
        .unwrap_err()
        .contains("a directory"));
    let fifo = dir.path().join("p");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    assert!(read_state_file(&fifo).unwrap_err().contains("named pipe"));
    assert_eq!(read_state_file(&dir.path().join("none")).unwrap(), None);
}
