//! Stage 4 of the ladder: banned shell commands and the confinement requirement (denied in
//! every mode, before any rule or grant), then the policy's rules, strictest wins.

use super::decision::{Refusal, Stage};
use super::observe;
use crate::exec::{Class, Keyed};
use crate::key::{CallKey, RuleDecision};
use crate::policy::{Policy, Rule};

/// A banned shell command is denied, whatever the mode or grants.
pub(crate) fn banned(
    tool: &str,
    shell: Option<&Keyed>,
    command: &str,
    call_id: &str,
) -> Result<(), Refusal> {
    if let Some(Class::Banned(why)) = shell.map(|k| &k.class) {
        return Err(observe::deny(
            tool,
            call_id,
            Stage::Rules,
            "banned-list".into(),
            format!("`{command}` is banned: {why}"),
            "banned commands are denied in every mode and cannot be granted; do it another way (e.g. the fetch tool for downloads)".into(),
        ));
    }
    Ok(())
}

/// With `require_confinement`, a shell command on a host that cannot confine it is denied.
/// `missing` is what confinement lacks here (empty: complete).
pub(crate) fn confinement(
    tool: &str,
    required: bool,
    missing: &[&str],
    call_id: &str,
) -> Result<(), Refusal> {
    if required && !missing.is_empty() {
        return Err(observe::deny(
            tool,
            call_id,
            Stage::Rules,
            "[shell] require_confinement".into(),
            format!(
                "the policy requires confined shell commands and this host cannot confine them ({} unavailable)",
                missing.join(", ")
            ),
            crate::exec::confine::report::hint(missing),
        ));
    }
    Ok(())
}

/// The strictest rule for `key`: a deny ends the call; an allow or ask is returned for the later
/// stages (an ask forces the prompt, an allow is a project allow, checked against the ceiling).
pub(crate) fn strictest(
    policy: &Policy,
    tool: &str,
    key: &CallKey,
    call_id: &str,
) -> Result<Option<Rule>, Refusal> {
    let rule = policy.strictest(key).cloned();
    if let Some(r) = rule.as_ref().filter(|r| r.decision == RuleDecision::Deny) {
        let reason = match &r.reason {
            Some(why) => format!("`{key}` is denied by rule `{}`: {why}", r.pattern.as_str()),
            None => format!("`{key}` is denied by rule `{}`", r.pattern.as_str()),
        };
        let (d, o) = observe::deny(
            tool,
            call_id,
            Stage::Rules,
            r.source.clone(),
            reason,
            format!(
                "the deny rule at {} decides this; change that rule to allow it",
                r.source
            ),
        );
        return Err((d.with_rule(r.pattern.as_str()), o));
    }
    Ok(rule)
}

/// Whether the rule forces the prompt.
pub(crate) fn forces_ask(rule: Option<&Rule>) -> bool {
    rule.is_some_and(|r| r.decision == RuleDecision::Ask)
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
