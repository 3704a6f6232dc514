//! Unit tests of `policy/grants.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn add_find_revoke_and_reload_after_hand_edit() {
    let dir = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let keyring = Arc::new(Keyring::new(user.path()));
    let g = ProjectGrants::signed(
        dir.path().join("grants.toml"),
        dir.path(),
        keyring.clone(),
        false,
    );
    assert!(g
        .find(&CallKey::with_target("write", "src/"))
        .unwrap()
        .is_none());
    g.add("write:src/**", "test").unwrap();
    assert!(g
        .find(&CallKey::with_target("write", "src/a/"))
        .unwrap()
        .is_some());
    // A hand edit is picked up without a restart, but an added entry has no signature:
    // it is ignored (named) until adopted.
    let text = std::fs::read_to_string(g.path()).unwrap();
    std::fs::write(g.path(), format!("{text}\n[[grants]]\nkey = \"edit\"\n")).unwrap();
    assert!(g
        .find(&CallKey::with_target("edit", "x/"))
        .unwrap()
        .is_none());
    assert_eq!(g.ignored().len(), 1, "{:?}", g.ignored());
    assert_eq!(g.unsigned_keys().unwrap(), vec!["edit".to_string()]);
    assert_eq!(g.adopt_all().unwrap(), 1);
    assert!(g
        .find(&CallKey::with_target("edit", "x/"))
        .unwrap()
        .is_some());
    // The same file in another workspace verifies nothing.
    let other = ProjectGrants::signed(
        g.path().to_path_buf(),
        Path::new("/elsewhere"),
        keyring,
        false,
    );
    assert!(other.current().unwrap().is_empty());
    assert_eq!(g.revoke("write:src/**").unwrap(), 1);
    assert!(g
        .find(&CallKey::with_target("write", "src/a/"))
        .unwrap()
        .is_none());
}

#[test]
fn symlink_and_garbage_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere.toml");
    std::fs::write(&elsewhere, "[[grants]]\nkey = \"write\"\n").unwrap();
    let path = dir.path().join("grants.toml");
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let g = ProjectGrants::new(path.clone());
    assert!(g.find(&CallKey::tool("write")).is_err());
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, "[[grants]\n").unwrap();
    let err = g.current().unwrap_err();
    assert!(err.location.ends_with("grants.toml:1"), "{err:?}");
}

#[test]
fn adopt_shown_signs_only_the_keys_that_were_shown() {
    let dir = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let g = ProjectGrants::signed(
        dir.path().join("grants.toml"),
        dir.path(),
        Arc::new(Keyring::new(user.path())),
        false,
    );
    std::fs::write(g.path(), "[[grants]]\nkey = \"write:docs/**\"\n").unwrap();
    let shown = g.unsigned_keys().unwrap();
    // Appended after the review showed the file.
    let text = std::fs::read_to_string(g.path()).unwrap();
    std::fs::write(g.path(), format!("{text}[[grants]]\nkey = \"write:**\"\n")).unwrap();
    let (n, left) = g.adopt_shown(&shown).unwrap();
    assert_eq!((n, left), (1, vec!["write:**".to_string()]));
    assert!(g
        .find(&CallKey::with_target("write", "docs/a"))
        .unwrap()
        .is_some());
    assert!(g
        .find(&CallKey::with_target("write", "src/a"))
        .unwrap()
        .is_none());
}

#[test]
fn ceiling_refusal_names_session_capped_tools_and_the_network() {
    let capped = vec!["shell".to_string()];
    let refuse = |k: &str| ceiling_refusal(&KeyPattern::parse(k).unwrap(), &capped);
    for key in ["shell:touch", "shell", "*", "net:evil.example", "net"] {
        let why = refuse(key).unwrap_or_else(|| panic!("`{key}` may be granted"));
        assert!(why.contains("can only be allowed per session"), "{why}");
        assert!(why.contains("nothing was written"), "{why}");
    }
    assert!(refuse("shell:touch").unwrap().contains("`shell`"));
    for key in ["write:src/**", "read", "edit:a.txt"] {
        assert_eq!(refuse(key), None, "{key}");
    }
}
