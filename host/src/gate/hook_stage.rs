//! Stage 5 of the ladder: the PreToolUse hooks, run once per call (the runner is
//! [`super::hooks`]). A deny ends the call; an allow is carried to the grant stages; an
//! `updated_input` is merged into the input, which then walks the ladder again from stage 1.

use super::decision::{Decision, Refusal, Stage, Verdict};
use super::hooks::{HookOutcome, HookVerdict};
use crate::tools::Observation;
use serde_json::{json, Map, Value};

/// What the hooks decided, when none denied.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct HookStep {
    /// The hook that allowed the call, if one did.
    pub(crate) allowed_by: Option<String>,
    /// The merged `updated_input`, if a hook gave one: the call is validated again with it.
    pub(crate) patch: Option<Map<String, Value>>,
}

/// The hooks' outcome as a step of the ladder.
pub(crate) fn step(outcome: HookOutcome, tool: &str, call_id: &str) -> Result<HookStep, Refusal> {
    let allowed_by = match outcome.verdict {
        HookVerdict::Deny { by, reason, halt } => {
            let mut o = Observation::denied(
                tool,
                call_id,
                Stage::Hooks.as_str(),
                reason,
                format!("the PreToolUse hook `{by}` denied this call; see its configuration in the policy"),
            );
            o.source = Some(format!("hook `{by}`"));
            if halt {
                o.data = json!({ "halt": true });
            }
            let d = Decision::new(Verdict::Deny, Stage::Hooks, format!("hook `{by}`"));
            return Err((d, o));
        }
        HookVerdict::Allow { by } => Some(by),
        HookVerdict::None => None,
    };
    let patch = match outcome.updated_input {
        Some(Value::Object(patch)) => Some(patch),
        _ => None,
    };
    Ok(HookStep { allowed_by, patch })
}

/// Merge a hook's `updated_input` into the input (shallow: each key replaces the input's).
pub(crate) fn apply(input: &mut Value, patch: Map<String, Value>) {
    if let Value::Object(map) = input {
        for (k, v) in patch {
            map.insert(k, v);
        }
    }
}

/// A hook's allow, as the grant stages record it.
pub(crate) fn allowed(by: String) -> Decision {
    Decision::allow(Stage::Hooks, format!("hook `{by}`"))
}

#[cfg(test)]
#[path = "hook_stage_tests.rs"]
mod tests;
