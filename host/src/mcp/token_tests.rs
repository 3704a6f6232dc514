//! Unit tests of `mcp/token.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn tokens_are_told_apart() {
    let a = "a".repeat(64);
    let b = "b".repeat(64);
    let t = Tokens::parse(&format!("# mine\n{a}\n\n{b}\n")).unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(t.identify(&a), Some(0));
    assert_eq!(t.identify(&b), Some(1));
    assert_eq!(t.identify(&a[1..]), None);
    assert_eq!(t.identify(""), None);
    assert!(Tokens::parse("short\n").is_err());
    assert!(Tokens::parse("# nothing\n").is_err());
    assert!(Tokens::parse(&format!("{a} {b}\n")).is_err());
}

#[test]
fn a_token_file_is_made_private_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state/toolgate");
    let file = state.join(TOKEN_FILE_NAME);
    let (t, created) = Tokens::load_or_create(&file, true).unwrap();
    assert!(created);
    assert_eq!(t.len(), 1);
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
    assert_eq!(std::fs::metadata(&state).unwrap().mode() & 0o777, 0o700);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.trim().len(), 2 * TOKEN_BYTES);
    let (again, created) = Tokens::load_or_create(&file, true).unwrap();
    assert!(!created);
    assert_eq!(again.identify(text.trim()), Some(0));
    // No temporary files left behind.
    assert_eq!(std::fs::read_dir(&state).unwrap().count(), 1);
}

#[test]
fn loose_or_linked_token_files_are_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tok");
    std::fs::write(&file, format!("{}\n", "c".repeat(64))).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = format!("{:#}", Tokens::load_or_create(&file, false).unwrap_err());
    assert!(e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let e = format!("{:#}", Tokens::load_or_create(&link, false).unwrap_err());
    assert!(e.contains("symlink"), "{e}");
    // A symlinked state directory is not followed either.
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let state = dir.path().join("state");
    std::os::unix::fs::symlink(&real, &state).unwrap();
    let e = format!(
        "{:#}",
        Tokens::load_or_create(&state.join(TOKEN_FILE_NAME), true).unwrap_err()
    );
    assert!(e.contains("symlink"), "{e}");
    assert!(!real.join(TOKEN_FILE_NAME).exists());
}
