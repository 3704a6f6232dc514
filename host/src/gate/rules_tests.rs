//! Unit tests of the rules stage: strictest rule wins, a deny ends the call, an ask forces the
//! prompt, and the confinement requirement.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::gate::decision::{Stage, Verdict};

fn policy(rules: &str) -> Policy {
    Policy::parse("policy.toml", rules).unwrap()
}

#[test]
fn a_deny_rule_beats_an_allow_rule_for_the_same_key() {
    let p = policy(
        "[[rules]]\nkey = \"write:src/**\"\ndecision = \"allow\"\n\n[[rules]]\nkey = \"write:src/\"\ndecision = \"deny\"\nreason = \"generated\"\n",
    );
    let key = CallKey::with_target("write", "src/");
    let (d, o) = strictest(&p, "write", &key, "call-1").unwrap_err();
    assert_eq!((d.verdict, d.stage), (Verdict::Deny, Stage::Rules));
    assert_eq!(d.rule.as_deref(), Some("write:src/"));
    assert_eq!(o.stage.as_deref(), Some("rules"));
    assert!(o.reason.unwrap().contains("generated"));
}

#[test]
fn an_ask_rule_forces_the_prompt_and_no_rule_decides_nothing() {
    let p = policy("[[rules]]\nkey = \"write\"\ndecision = \"ask\"\n");
    let rule = strictest(&p, "write", &CallKey::tool("write"), "call-1").unwrap();
    assert!(forces_ask(rule.as_ref()));
    let none = strictest(&p, "grep", &CallKey::tool("grep"), "call-1").unwrap();
    assert!(none.is_none());
    assert!(!forces_ask(None));
}

#[test]
fn required_confinement_that_is_missing_denies_at_the_rules_stage() {
    let (d, o) = confinement("shell", true, &["landlock"], "call-1").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Deny, Stage::Rules, "[shell] require_confinement")
    );
    assert!(o.reason.unwrap().contains("landlock unavailable"));
    assert!(confinement("shell", false, &["landlock"], "call-1").is_ok());
    assert!(confinement("shell", true, &[], "call-1").is_ok());
}
