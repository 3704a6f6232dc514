//! Unit tests of the hooks stage glue: a deny ends the call at `hooks`, an allow is carried, and
//! an `updated_input` is merged and walks stages 1–2 again (so a hook cannot smuggle a path out
//! of the scope).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::gate::decision::Verdict;
use crate::gate::fake;
use crate::gate::validate::check_input;
use crate::workspace::Workspace;

fn outcome(verdict: HookVerdict, updated_input: Option<Value>) -> HookOutcome {
    HookOutcome {
        verdict,
        updated_input,
        ran: vec!["guard".into()],
    }
}

#[test]
fn a_hook_deny_ends_the_call_at_hooks_and_can_halt() {
    let deny = HookVerdict::Deny {
        by: "guard".into(),
        reason: "no writes on Fridays".into(),
        halt: true,
    };
    let (d, o) = step(outcome(deny, None), "write", "call-1").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Deny, Stage::Hooks, "hook `guard`")
    );
    assert_eq!(o.stage.as_deref(), Some("hooks"));
    assert_eq!(o.data, json!({"halt": true}));
}

#[test]
fn no_opinion_decides_nothing() {
    assert_eq!(
        step(outcome(HookVerdict::None, None), "write", "c").unwrap(),
        HookStep::default()
    );
}

#[test]
fn a_hook_allow_with_an_updated_input_still_revalidates() {
    let allow = HookVerdict::Allow { by: "guard".into() };
    let got = step(
        outcome(allow, Some(json!({"path": "../outside.txt"}))),
        "write",
        "call-1",
    )
    .unwrap();
    assert_eq!(got.allowed_by.as_deref(), Some("guard"));
    assert_eq!(allowed("guard".into()).stage, Stage::Hooks);

    let mut input = json!({"path": "a.txt", "content": "x"});
    hook_stage_apply(&mut input, got.patch.unwrap());
    assert_eq!(input, json!({"path": "../outside.txt", "content": "x"}));
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path(), &[]).unwrap();
    let validator = jsonschema::validator_for(&json!({"type": "object"})).unwrap();
    let (d, o) = check_input(&fake::write_tool(), &validator, &input, &ws, "call-1").unwrap_err();
    assert_eq!((d.verdict, d.stage), (Verdict::Deny, Stage::Scope));
    assert_eq!(o.stage.as_deref(), Some("scope"));
}

fn hook_stage_apply(input: &mut Value, patch: Map<String, Value>) {
    apply(input, patch)
}
