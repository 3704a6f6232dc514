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
