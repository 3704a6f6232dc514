//! The observation: the one JSON object every call returns, also on failure.

use crate::sandbox::wit;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tool ran and succeeded.
    Ok,
    /// The input was bad, the tool failed, or a limit stopped it.
    Error,
    /// The gate refused the call.
    Denied,
    /// The call waits for an approval.
    NeedsApproval,
}

impl Status {
    /// The name used in JSON and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Denied => "denied",
            Status::NeedsApproval => "needs_approval",
        }
    }
}

/// How much was seen against how much was returned, for one unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Total {
    /// Seen in all.
    pub seen: u64,
    /// Returned in `content`.
    pub returned: u64,
}

/// The result of one call, as the model and the user see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The tool called.
    pub tool: String,
    /// How the call ended.
    pub status: Status,
    /// One line saying what happened.
    pub summary: String,
    /// The text the model reads.
    pub content: String,
    /// Whether `content` is a preview of something larger.
    pub truncated: bool,
    /// Seen vs returned per unit (`lines`, `bytes`, `matches`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub totals: BTreeMap<String, Total>,
    /// Workspace-relative file holding the whole output when the host cut it; `read` can page
    /// through it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_ref: Option<String>,
    /// Tool-specific structured data.
    #[serde(default)]
    pub data: Value,
    /// The id of this call's audit events.
    pub audit_id: String,
    /// A stable code for errors (`schema`, `not-found`, `timeout`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// Why the call was denied or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What would allow it, or how to fix it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Which ladder stage decided a denial (`schema`, `scope`, `mode`, `rules`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// What decided a denial: a rule's `file:line`, a hook, a grant, the mode, the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Set on denials: the agent should stop and hand the turn back to the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_turn: Option<bool>,
    /// Images for the model (MCP image content), taken out of `data` by the host: never
    /// serialized, so the audit and `structuredContent` do not carry them.
    #[serde(skip)]
    pub images: Vec<super::Image>,
}

impl Observation {
    /// An empty observation for `tool` with `status`.
    pub fn new(tool: &str, status: Status, audit_id: &str) -> Self {
        Observation {
            tool: tool.to_string(),
            status,
            summary: String::new(),
            content: String::new(),
            truncated: false,
            totals: BTreeMap::new(),
            full_output_ref: None,
            data: Value::Null,
            audit_id: audit_id.to_string(),
            error_code: None,
            reason: None,
            hint: None,
            stage: None,
            source: None,
            stop_turn: None,
            images: Vec::new(),
        }
    }

    /// An `error` observation: `code`, a message the model can act on, and a hint.
    pub fn error(
        tool: &str,
        audit_id: &str,
        code: &str,
        message: String,
        hint: Option<String>,
    ) -> Self {
        let mut o = Observation::new(tool, Status::Error, audit_id);
        o.summary = first_line(&message);
        o.content = match &hint {
            Some(h) => format!("error: {message}\nhint: {h}"),
            None => format!("error: {message}"),
        };
        o.error_code = Some(code.to_string());
        o.reason = Some(message);
        o.hint = hint;
        o
    }

    /// A `denied` observation from ladder stage `stage`.
    pub fn denied(tool: &str, audit_id: &str, stage: &str, reason: String, hint: String) -> Self {
        let mut o = Observation::new(tool, Status::Denied, audit_id);
        o.summary = format!("denied: {}", first_line(&reason));
        o.content = format!("denied ({stage}): {reason}\nhint: {hint}");
        o.reason = Some(reason);
        o.hint = Some(hint);
        o.stage = Some(stage.to_string());
        o.stop_turn = Some(true);
        o
    }
}

/// The key of a guest's `tool-error.data` under which it carries the output of a call that
/// failed after producing it (the guest SDK's `ToolError::with_output`; a command that exited
/// non-zero): `{summary, content, truncated, totals: [{unit, seen, returned}], data}`.
pub const ERROR_OUTPUT_KEY: &str = "$output";

/// The output a guest's error carries under [`ERROR_OUTPUT_KEY`], when its data is exactly
/// that envelope; the gate shows it as it shows a successful call's output.
pub(crate) fn carried_output(data: &Value) -> Option<wit::Output> {
    let Value::Object(map) = data else {
        return None;
    };
    if map.len() != 1 {
        return None;
    }
    let out = map.get(ERROR_OUTPUT_KEY)?.as_object()?;
    let text = |k: &str| out.get(k).and_then(Value::as_str).unwrap_or_default();
    let totals = out
        .get("totals")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .filter_map(|t| {
                    Some(wit::Total {
                        unit: t.get("unit")?.as_str()?.to_string(),
                        seen: t.get("seen")?.as_u64()?,
                        returned: t.get("returned")?.as_u64()?,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(wit::Output {
        summary: text("summary").to_string(),
        content: text("content").to_string(),
        truncated: out
            .get("truncated")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        totals,
        data: out.get("data").unwrap_or(&Value::Null).to_string(),
    })
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn an_error_carries_output_only_in_the_exact_envelope() {
        let envelope = serde_json::json!({ERROR_OUTPUT_KEY: {
            "summary": "`false` exited with status 1 after 2 ms",
            "content": "out\n",
            "truncated": true,
            "totals": [{"unit": "stdout_bytes", "seen": 9, "returned": 4}],
            "data": {"exit_code": 1},
        }});
        let out = carried_output(&envelope).unwrap();
        assert_eq!(out.summary, "`false` exited with status 1 after 2 ms");
        assert_eq!(out.content, "out\n");
        assert!(out.truncated);
        assert_eq!(
            (
                out.totals[0].unit.as_str(),
                out.totals[0].seen,
                out.totals[0].returned
            ),
            ("stdout_bytes", 9, 4)
        );
        assert_eq!(out.data, r#"{"exit_code":1}"#);
        // Anything else is a plain error's data.
        for plain in [
            serde_json::json!(null),
            serde_json::json!({"exit_code": 1}),
            serde_json::json!({ERROR_OUTPUT_KEY: {}, "other": 1}),
            serde_json::json!({ERROR_OUTPUT_KEY: "text"}),
        ] {
            assert!(carried_output(&plain).is_none(), "{plain}");
        }
    }
}
