//! The restore primitives on their own: what an undo does at a name it did not check a moment
//! before (a directory swapped for a link between the plan and the write, a link or FIFO at
//! the name).

#![allow(clippy::unwrap_used)]

use super::restore::{Current, Place};
use super::*;

fn tree() -> (tempfile::TempDir, std::path::PathBuf, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    (ws, root, outside)
}

#[test]
fn a_linked_directory_on_the_way_is_refused_even_when_created_on_demand() {
    let (_ws, root, outside) = tree();
    std::fs::write(outside.path().join("f.txt"), "theirs").unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("sub")).unwrap();
    for create in [false, true] {
        let e = match Place::open(&root, "sub/f.txt", create) {
            Err(e) => e,
            Ok(_) => panic!("opened a directory through a link (create = {create})"),
        };
        assert!(!crate::fsutil::plain_error(&e).contains("os error"), "{e}");
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f.txt")).unwrap(),
        "theirs"
    );
}

#[test]
fn a_directory_swapped_after_opening_keeps_the_write_in_the_opened_one() {
    let (_ws, root, outside) = tree();
    std::fs::create_dir(root.join("d")).unwrap();
    let place = Place::open(&root, "d/f.txt", false).unwrap();
    // Swapped after the open: the descriptor still names the directory that was checked.
    std::fs::rename(root.join("d"), root.join("d.moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("d")).unwrap();
    place.write(b"restored", 0o644).unwrap();
    assert_eq!(
        std::fs::read(root.join("d.moved/f.txt")).unwrap(),
        b"restored"
    );
    assert!(!outside.path().join("f.txt").exists());
}

#[test]
fn a_link_at_the_name_is_reported_and_replaced_never_written_through() {
    let (_ws, root, outside) = tree();
    let target = outside.path().join("target");
    std::fs::write(&target, "theirs").unwrap();
    std::os::unix::fs::symlink(&target, root.join("f.txt")).unwrap();
    let place = Place::open(&root, "f.txt", false).unwrap();
    assert!(matches!(
        place.current(1024).unwrap(),
        Current::Other("a symbolic link")
    ));
    place.write(b"mine", 0o600).unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs");
    let meta = std::fs::symlink_metadata(root.join("f.txt")).unwrap();
    assert!(meta.file_type().is_file());
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_fifo_at_the_name_is_not_opened() {
    let (_ws, root, _outside) = tree();
    let made = std::process::Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let place = Place::open(&root, "pipe", false).unwrap();
    assert!(matches!(
        place.current(1024).unwrap(),
        Current::Other("a FIFO")
    ));
}

#[test]
fn current_hashes_the_whole_file_but_keeps_only_what_fits() {
    let (_ws, root, _outside) = tree();
    std::fs::write(root.join("f"), b"0123456789").unwrap();
    let place = Place::open(&root, "f", false).unwrap();
    match place.current(4).unwrap() {
        Current::File {
            sha256, content, ..
        } => {
            assert_eq!(sha256, restore::sha256_hex(b"0123456789"));
            assert!(content.is_none());
        }
        other => panic!("{other:?}"),
    }
    let place = Place::open(&root, "missing", false).unwrap();
    assert!(matches!(place.current(4).unwrap(), Current::Absent));
    place.remove().unwrap();
}

#[test]
fn diff_stat_counts_lines_and_knows_when_it_cannot() {
    let v = |origin: &str, content: Option<&[u8]>| FileVersion {
        id: 0,
        path: "/w/f".into(),
        at_ms: 0,
        origin: origin.into(),
        sha256: content.map(restore::sha256_hex).unwrap_or_default(),
        size: 0,
        content: content.map(<[u8]>::to_vec),
        call_id: None,
    };
    let old = v("original", Some(b"a\nb\nc\n"));
    let new = v("tool", Some(b"a\nB\nc\nd\n"));
    assert_eq!(diff_stat(&old, &new), (Some(2), Some(1)));
    assert_eq!(diff_stat(&v("absent", None), &new), (Some(4), Some(0)));
    assert_eq!(diff_stat(&v("original", None), &new), (None, None));
    // Content that no longer matches its recorded hash is not diffed (nor restored).
    let altered = FileVersion {
        content: Some(b"evil\n".to_vec()),
        ..old.clone()
    };
    assert!(!altered.content_matches());
    assert!(altered.content_note().unwrap().contains("altered"));
    assert_eq!(diff_stat(&altered, &new), (None, None));
}
