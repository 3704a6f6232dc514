//! Unit tests of stages 1–2 and the key: schema errors name the field, paths outside the scope
//! are denied at `scope`, and keys are computed from what will run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::gate::decision::Verdict;
use crate::gate::fake;
use serde_json::json;

fn setup() -> (tempfile::TempDir, Workspace, jsonschema::Validator) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path(), &[]).unwrap();
    let schema = json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    });
    (dir, ws, jsonschema::validator_for(&schema).unwrap())
}

#[test]
fn a_schema_error_names_the_field_at_the_schema_stage() {
    let (_dir, ws, validator) = setup();
    let input = json!({"path": "a.txt", "content": 5});
    let (d, o) = check_input(&fake::write_tool(), &validator, &input, &ws, "c").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Error, Stage::Schema, "input")
    );
    assert_eq!(o.error_code.as_deref(), Some("schema"));
    assert_eq!(o.stage.as_deref(), Some("schema"));
    assert!(o.reason.unwrap().starts_with("input.content:"));
}

#[test]
fn a_path_outside_the_workspace_is_denied_at_scope() {
    let (_dir, ws, validator) = setup();
    let input = json!({"path": "/etc/passwd", "content": "x"});
    let (d, _) = check_input(&fake::write_tool(), &validator, &input, &ws, "c").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Deny, Stage::Scope, "path `path`")
    );
}

#[test]
fn a_path_inside_is_rewritten_and_keys_on_its_directory() {
    let (_dir, ws, validator) = setup();
    let input = json!({"path": "src/a.rs", "content": "x"});
    let info = fake::write_tool();
    let (input, paths) = check_input(&info, &validator, &input, &ws, "c").unwrap();
    assert_eq!(paths.len(), 1);
    assert_eq!(input["path"], json!(paths[0].2.guest));
    assert_eq!(key_for(&info, &paths).to_string(), "write:src/");
}

#[test]
fn a_fetch_url_that_cannot_be_read_has_no_target() {
    assert!(fetch_target(&json!({"url": "ftp://example.com/"})).is_err());
    assert_eq!(
        fetch_target(&json!({"url": "https://Docs.rs/x"})).unwrap(),
        ("https".into(), "docs.rs".into(), 443)
    );
}

#[test]
fn stages_and_codes_keep_their_audit_words() {
    use crate::gate::decision::Code;
    assert_eq!(Stage::ProjectAllowlist.as_str(), "project-allowlist");
    assert_eq!(Stage::NoPermission.as_str(), "no-permission");
    assert_eq!(Verdict::Cancelled.as_str(), "cancelled");
    assert_eq!(Code::NotADirectory.as_str(), "not-a-directory");
    assert_eq!(Code::Open("fifo").as_str(), "fifo");
}

/// A link whose target does not exist passes the workspace's scope as its own name; followed,
/// it leads outside (or to a secret), and that is a denial at scope, before any tool runs.
#[test]
fn a_link_to_a_missing_target_is_judged_by_where_it_leads() {
    use std::os::unix::fs::symlink;
    let (dir, ws, validator) = setup();
    let out = tempfile::tempdir().unwrap();
    let out_root = out.path().canonicalize().unwrap();
    let root = dir.path();
    symlink(out_root.join("new.txt"), root.join("notes.txt")).unwrap();
    symlink(out_root.join("missing"), root.join("vendor")).unwrap();
    symlink("hop", root.join("first")).unwrap();
    symlink(out_root.join("far"), root.join("hop")).unwrap();
    symlink(".env", root.join("settings.txt")).unwrap();
    symlink(".toolgate/state.db", root.join("db")).unwrap();
    symlink("loop", root.join("loop")).unwrap();
    symlink("src/new.rs", root.join("alias.rs")).unwrap();
    let info = fake::write_tool();
    let deny = |path: &str| {
        let input = json!({"path": path, "content": "x"});
        let (d, o) = check_input(&info, &validator, &input, &ws, "c").unwrap_err();
        assert_eq!(
            (d.verdict, d.stage, d.source.as_str()),
            (Verdict::Deny, Stage::Scope, "path `path`"),
            "{path}"
        );
        o.reason.unwrap()
    };
    let r = deny("notes.txt");
    assert_eq!(
        r,
        format!(
            "`notes.txt` goes through the symbolic link `notes.txt` -> `{0}/new.txt` and leads to {0}/new.txt, which is outside the workspace {1}",
            out_root.display(),
            ws.root().display()
        )
    );
    let r = deny("vendor/planted.txt");
    assert!(
        r.contains("`vendor` -> `") && r.contains("missing/planted.txt"),
        "{r}"
    );
    let r = deny("first");
    assert!(r.contains("`first` -> `hop`, `hop` -> `"), "{r}");
    let r = deny(&root.join("notes.txt").to_string_lossy());
    assert!(r.contains("outside the workspace"), "{r}");
    let r = deny("settings.txt");
    assert!(
        r.starts_with(
            "`settings.txt` goes through the symbolic link `settings.txt` -> `.env` to `.env`: "
        ) && r.contains("secrets deny-list"),
        "{r}"
    );
    assert!(deny("db").contains("toolgate's own state"));
    // A loop, and a link to a missing path inside, are not escapes: the tool's no-follow
    // opening answers them.
    for path in ["loop", "alias.rs"] {
        let input = json!({"path": path, "content": "x"});
        assert!(
            check_input(&info, &validator, &input, &ws, "c").is_ok(),
            "{path}"
        );
    }
    assert!(std::fs::read_dir(&out_root).unwrap().next().is_none());
}

#[test]
fn links_resolve_like_the_kernel_resolves_them() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    symlink("a/b", root.join("l")).unwrap();
    // `..` after a link climbs from the link's target, not from the link.
    let (to, links) = links::resolve(&root.join("l/../c")).unwrap();
    assert_eq!(to, root.join("a/c"));
    assert_eq!(links, vec![(root.join("l"), "a/b".into())]);
    let (to, links) = links::resolve(&root.join("a/./b/x")).unwrap();
    assert_eq!((to, links.len()), (root.join("a/b/x"), 0));
    symlink("m", root.join("n")).unwrap();
    symlink("n", root.join("m")).unwrap();
    assert_eq!(links::resolve(&root.join("m")), None);
}
