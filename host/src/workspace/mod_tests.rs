//! Unit tests of `workspace/mod.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn ws() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}").unwrap();
    let ws = Workspace::new(dir.path(), &[]).unwrap();
    (dir, ws)
}

#[test]
fn table() {
    let (_d, ws) = ws();
    let cases: &[(&str, Access, bool)] = &[
        ("src/main.rs", Access::Read, true),
        ("./src/../src/main.rs", Access::Read, true),
        ("src/new/file.rs", Access::Write, true),
        ("../etc/passwd", Access::Read, false),
        ("/etc/passwd", Access::Read, false),
        (".env", Access::Read, false),
        ("config/.env.local", Access::Read, false),
        (".ssh/config", Access::Read, false),
        ("keys/server.pem", Access::Read, false),
        ("src/id_map.rs", Access::Read, true),
        (".toolgate/state.db", Access::Read, false),
        (".toolgate/outputs/x.txt", Access::Read, true),
        (".toolgate/outputs/x.txt", Access::Write, false),
        (".toolgate", Access::Read, false),
        (".", Access::Read, true),
        (".git/config", Access::Read, true),
        (".git/config", Access::Write, false),
        (".git/hooks/pre-commit", Access::Write, false),
        ("src/.git/config", Access::Write, false),
        ("vendor/lib/.git", Access::Write, false),
        (".GIT/config", Access::Write, false),
        (".gitignore", Access::Write, true),
        (".github/workflows/ci.yml", Access::Write, true),
        (".envrc", Access::Read, false),
        (".kube/config", Access::Read, false),
        ("infra/prod.tfvars", Access::Read, false),
        (".cargo/credentials.toml", Access::Read, false),
        (".cargo/config.toml", Access::Read, true),
        (".config/gh/hosts.yml", Access::Read, false),
        ("src/credentials.rs", Access::Read, true),
    ];
    for (raw, access, ok) in cases {
        assert_eq!(ws.scope(raw, *access).is_ok(), *ok, "{raw} {access:?}");
    }
}

#[test]
fn a_hard_link_to_a_secret_is_denied_as_the_secret() {
    let (dir, ws) = ws();
    std::fs::write(dir.path().join(".env"), "KEY=1").unwrap();
    std::fs::hard_link(dir.path().join(".env"), dir.path().join("src/notes.txt")).unwrap();
    std::fs::hard_link(
        dir.path().join("src/main.rs"),
        dir.path().join("src/copy.rs"),
    )
    .unwrap();
    let denial = ws.scope("src/notes.txt", Access::Read).unwrap_err();
    assert!(denial.reason.contains("hard link to `.env`"), "{denial:?}");
    assert!(ws.scope("src/notes.txt", Access::Write).is_err());
    assert!(ws.scope("src/copy.rs", Access::Read).is_ok());
    assert!(ws.scope("src/main.rs", Access::Read).is_ok());
}
