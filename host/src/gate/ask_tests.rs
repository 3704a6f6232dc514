//! Unit tests of the ask stage: the answers offered, headless refusals, and what each answer
//! decides (a `project` answer never reaches past the ceiling).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::gate::decision::Verdict;
use crate::gate::fake;

#[test]
fn a_session_capped_tool_or_an_ask_rule_is_never_offered_project() {
    assert_eq!(
        choices(&fake::shell_tool(), false),
        vec![Answer::Once, Answer::Session, Answer::Deny]
    );
    assert_eq!(
        choices(&fake::write_tool(), true),
        vec![Answer::Once, Answer::Session, Answer::Deny]
    );
    assert_eq!(
        choices(&fake::write_tool(), false),
        vec![Answer::Once, Answer::Session, Answer::Project, Answer::Deny]
    );
}

#[test]
fn headless_denies_at_ask_with_how_to_grant_it() {
    let (d, o) = headless(&fake::shell_tool(), "shell:ls", false, "call-1");
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Deny, Stage::Ask, "headless")
    );
    assert!(o.hint.unwrap().contains("--grant 'shell:ls'"));
    let (_, o) = headless(&fake::write_tool(), "write:src/", true, "call-1");
    assert!(o.hint.unwrap().contains("an `ask` rule covers"));
}

#[test]
fn a_project_answer_for_a_session_capped_tool_is_a_ceiling_violation() {
    let shell = fake::shell_tool();
    let offered = choices(&shell, false);
    let (d, o) = answered(Some(Answer::Project), &offered, &shell, "shell:ls", "c").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Error, Stage::Ask, "user")
    );
    assert_eq!(o.error_code.as_deref(), Some("ceiling-violation"));
    assert_eq!(o.stage.as_deref(), Some("ask"));
}

#[test]
fn each_answer_decides_at_ask() {
    let write = fake::write_tool();
    let offered = choices(&write, false);
    for (answer, source) in [
        (Answer::Once, "user: once"),
        (Answer::Session, "user: session"),
        (Answer::Project, "user: project"),
    ] {
        let d = answered(Some(answer), &offered, &write, "write:src/", "c").unwrap();
        assert_eq!(
            (d.verdict, d.stage, d.source.as_str()),
            (Verdict::Allow, Stage::Ask, source)
        );
    }
    let (d, _) = answered(Some(Answer::Deny), &offered, &write, "write:src/", "c").unwrap_err();
    assert_eq!((d.verdict, d.source.as_str()), (Verdict::Deny, "user"));
    let (d, _) = answered(None, &offered, &write, "write:src/", "c").unwrap_err();
    assert_eq!((d.verdict, d.source.as_str()), (Verdict::Deny, "expired"));
}
