#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::fs;

#[test]
fn plain_words_replace_errno_numbers() {
    let missing = fs::metadata("/surely/not/here/at/all").unwrap_err();
    assert_eq!(plain_io_error(&missing), "not found");
    for (kind, words) in [
        (ErrorKind::PermissionDenied, "permission denied"),
        (ErrorKind::AlreadyExists, "already exists"),
        (ErrorKind::IsADirectory, "is a directory, not a file"),
        (
            ErrorKind::NotADirectory,
            "a part of the path is not a directory",
        ),
    ] {
        assert_eq!(plain_io_error(&Error::from(kind)), words);
    }
    // An unmapped error keeps its words and loses its number.
    let odd = Error::other("the device said no (os error 71)");
    assert_eq!(plain_io_error(&odd), "the device said no");
    let raw = Error::from_raw_os_error(71);
    assert!(!plain_io_error(&raw).contains("os error"), "{raw}");
}

#[test]
fn the_io_error_message_has_no_errno() {
    let missing = fs::metadata("/surely/not/here/at/all").unwrap_err();
    let e = crate::ToolError::io("src/foo.rs", &missing);
    let wit = e.into_wit();
    assert_eq!(wit.code, "not-found");
    assert_eq!(wit.message, "not found: src/foo.rs");
}

#[test]
fn close_names_are_suggested_and_far_ones_are_not() {
    assert!(closeness("foo.rs", "foo.rs.bak").is_some());
    assert!(closeness("foo.rs", "fo.rs").is_some());
    assert!(closeness("main.rs", "mian.rs").is_some());
    assert!(closeness("foo.rs", "other.txt").is_none());
    assert!(closeness("foo.rs", "foo.rs").is_none());
    assert!(closeness("a", "ab").is_none());
}

#[test]
fn did_you_mean_lists_the_parent_only_and_skips_denied_names() {
    let dir = std::env::temp_dir().join(format!("toolgate-ioerr-{}", std::process::id()));
    let src = dir.join("src");
    fs::create_dir_all(&src).unwrap();
    fs::write(src.join("foo.rs.bak"), "x").unwrap();
    fs::write(src.join("other.txt"), "x").unwrap();
    let cx = Context::for_tests(&dir, 1 << 20, &["**/*.secret"]);
    assert_eq!(
        did_you_mean(&cx, &src.join("foo.rs"), "src/foo.rs").as_deref(),
        Some("src/foo.rs.bak")
    );
    assert_eq!(did_you_mean(&cx, &src.join("zzz.md"), "src/zzz.md"), None);
    fs::write(src.join("key.rs.secret"), "x").unwrap();
    assert_eq!(did_you_mean(&cx, &src.join("key.rs"), "src/key.rs"), None);
    let _ = fs::remove_dir_all(&dir);
}
