//! Unit tests of the mode stage: what `safe`, `ask` and `allow-all` decide for a tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::gate::decision::{Stage, Verdict};
use crate::gate::fake;
use crate::tools::registry::PathUse;
use crate::tools::{Ceiling, Risk};

#[test]
fn safe_denies_a_write_tool_at_the_mode_stage() {
    let (d, o) = check(Mode::Safe, &fake::write_tool(), "call-1").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Deny, Stage::Mode, "mode safe")
    );
    assert_eq!(o.stage.as_deref(), Some("mode"));
    assert!(o.hint.unwrap().contains("--mode ask"));
}

#[test]
fn safe_lets_a_read_only_tool_through_and_ask_decides_nothing() {
    let read = fake::tool(
        "read",
        Risk::ReadOnly,
        Ceiling::Project,
        &[("path", PathUse::Read)],
    );
    assert!(check(Mode::Safe, &read, "call-1").is_ok());
    assert!(check(Mode::Ask, &fake::write_tool(), "call-1").is_ok());
    assert_eq!(allow_all(Mode::Ask), None);
}

#[test]
fn allow_all_approves_at_the_mode_stage() {
    let d = allow_all(Mode::AllowAll).unwrap();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Allow, Stage::Mode, "mode allow-all")
    );
}
