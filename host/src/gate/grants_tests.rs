//! Unit tests of the grant stages: the ceiling caps a project grant of the shell, allow rules and
//! project grants allow at the project allowlist, session grants at the session allowlist, and
//! a state database that cannot be read fails the call closed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::error::Error;
use crate::gate::decision::{Stage, Verdict};
use crate::gate::fake;
use crate::policy::Policy;

fn no_grant(_: &CallKey) -> std::result::Result<Option<Persisted>, Problem> {
    Ok(None)
}

fn grant(_: &CallKey) -> std::result::Result<Option<Persisted>, Problem> {
    Ok(Some((
        "grant `shell:cargo test`".into(),
        ".toolgate/grants.toml:2".into(),
    )))
}

#[test]
fn a_project_grant_of_the_shell_is_capped_at_session() {
    let key = CallKey::with_target("shell", "cargo test");
    let (d, o) = project_allow(&fake::shell_tool(), &key, None, grant, "call-1").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (
            Verdict::Error,
            Stage::ProjectAllowlist,
            ".toolgate/grants.toml:2"
        )
    );
    assert_eq!(o.error_code.as_deref(), Some("ceiling-violation"));
    assert_eq!(o.stage.as_deref(), Some("project-allowlist"));
    assert_eq!(o.source.as_deref(), Some(".toolgate/grants.toml:2"));
}

#[test]
fn a_project_grant_of_a_write_tool_allows_at_the_project_allowlist() {
    let key = CallKey::with_target("write", "src/");
    let d = project_allow(&fake::write_tool(), &key, None, grant, "call-1")
        .unwrap()
        .unwrap();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (
            Verdict::Allow,
            Stage::ProjectAllowlist,
            ".toolgate/grants.toml:2"
        )
    );
    assert!(
        project_allow(&fake::write_tool(), &key, None, no_grant, "call-1")
            .unwrap()
            .is_none()
    );
}

#[test]
fn an_allow_rule_is_a_project_allow_and_the_grants_file_is_not_read() {
    let p = Policy::parse(
        "policy.toml",
        "[[rules]]\nkey = \"write:src/**\"\ndecision = \"allow\"\n",
    )
    .unwrap();
    let key = CallKey::with_target("write", "src/");
    let rule = p.strictest(&key).cloned();
    let d = project_allow(
        &fake::write_tool(),
        &key,
        rule.as_ref(),
        |_| panic!("the grants file was read"),
        "call-1",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (d.stage, d.rule.as_deref()),
        (Stage::ProjectAllowlist, Some("write:src/**"))
    );
}

#[test]
fn a_broken_grants_file_is_an_error_at_the_project_allowlist() {
    let key = CallKey::with_target("write", "src/");
    let broken = |_: &CallKey| {
        Err(Problem {
            location: ".toolgate/grants.toml:1".into(),
            message: "not TOML".into(),
            severity: "error",
        })
    };
    let (d, o) = project_allow(&fake::write_tool(), &key, None, broken, "call-1").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage),
        (Verdict::Error, Stage::ProjectAllowlist)
    );
    assert_eq!(o.error_code.as_deref(), Some("grants-file"));
}

#[test]
fn a_cli_grant_allows_before_the_state_database_is_read() {
    let key = CallKey::with_target("write", "src/");
    let cli = vec![KeyPattern::parse("write:src/**").unwrap()];
    let d = session_allow("write", &cli, None, || panic!("read"), &key, "call-1")
        .unwrap()
        .unwrap();
    assert_eq!(
        (d.stage, d.source.as_str()),
        (Stage::SessionAllowlist, "--grant 'write:src/**'")
    );
}

#[test]
fn a_session_grant_allows_and_none_decides_nothing() {
    let key = CallKey::with_target("write", "src/");
    let d = session_allow(
        "write",
        &[],
        None,
        || Ok(vec!["write:src/".into()]),
        &key,
        "c",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (d.stage, d.source.as_str()),
        (Stage::SessionAllowlist, "session grant `write:src/`")
    );
    assert!(session_allow("write", &[], None, || Ok(vec![]), &key, "c")
        .unwrap()
        .is_none());
}

#[test]
fn unreadable_session_grants_fail_the_call_closed() {
    let key = CallKey::with_target("write", "src/");
    let broken = || {
        Err(Error::State {
            path: ".toolgate/state.db".into(),
            message: "database disk image is malformed".into(),
        })
    };
    let (d, o) = session_allow("write", &[], None, broken, &key, "call-1").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Error, Stage::SessionAllowlist, "state database")
    );
    assert_eq!(o.error_code.as_deref(), Some("state"));
    assert!(o.reason.unwrap().contains("state.db"));
    assert!(o.hint.unwrap().contains("move it aside"));
}
