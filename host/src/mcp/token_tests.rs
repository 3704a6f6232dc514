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

#[test]
fn person_lines_mark_the_persons_token_and_old_files_read_the_same() {
    let (a, b, p) = ("a".repeat(64), "b".repeat(64), "p".repeat(64));
    // Today's file: every token a client's; the console gets a token of its own.
    let t = Tokens::parse(&format!("{a}\n{b}\n")).unwrap();
    assert_eq!((t.len(), t.in_file()), (2, 2));
    assert!(!t.is_person(0) && !t.is_person(1));
    let t = t.with_console_token().unwrap();
    assert_eq!((t.len(), t.in_file()), (3, 2));
    let console = t.console().to_string();
    assert!(console != a && console != b && console.len() == 64);
    assert_eq!(t.identify(&console), Some(2));
    assert!(t.is_person(2));
    // A `person` line: that token is the person's and the console's; no token is made.
    let t = Tokens::parse(&format!("client {a}\n# me\nperson   {p}\n{b}\n"))
        .unwrap()
        .with_console_token()
        .unwrap();
    assert_eq!(t.len(), 3);
    assert_eq!(t.console(), p);
    assert_eq!(t.identify(&a), Some(0));
    assert_eq!(t.identify(&p), Some(1));
    assert!(!t.is_person(0) && t.is_person(1) && !t.is_person(2));
    // Each token has its own tag; the tag is not the token's digest.
    assert_ne!(t.tag(0), t.tag(2));
    assert_eq!(t.tag(0).unwrap().len(), OWNER_TAG_CHARS);
    assert!(!hex::encode(t.digest(0).unwrap()).contains(t.tag(0).unwrap()));
    // An unknown label is refused without echoing the line.
    let e = format!("{:#}", Tokens::parse(&format!("admin {a}\n")).unwrap_err());
    assert!(e.contains("person TOKEN") && !e.contains(&a), "{e}");
    assert!(Tokens::parse("person short\n").is_err());
}
