//! The observation's JSON Schema: what every tool declares as its MCP `outputSchema`, since
//! every call's `structuredContent` is an [`Observation`](super::Observation) (also on
//! failure). `data` is each tool's own and is left open.

use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};

/// The schema (JSON Schema 2020-12) of an observation, as a JSON object, shared: every tool
/// listed points at this one copy (a deep copy per tool made `tools/list` and the per-call
/// schema lookup of 2026-07-28 requests measurably slower).
pub fn observation_schema() -> &'static Arc<Map<String, Value>> {
    static SCHEMA: OnceLock<Arc<Map<String, Value>>> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        Arc::new(match build() {
            Value::Object(map) => map,
            _ => Map::new(),
        })
    })
}

fn build() -> Value {
    let text = |what: &str| json!({ "type": "string", "description": what });
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "toolgate observation",
        "description": "The result of one call, also on failure: how it ended, what the model reads, and what was cut.",
        "type": "object",
        "required": ["tool", "status", "summary", "content", "truncated", "data", "audit_id"],
        "additionalProperties": false,
        "properties": {
            "tool": text("The tool called."),
            "status": {
                "type": "string",
                "enum": ["ok", "error", "denied", "needs_approval"],
                "description": "ok: it ran and succeeded; error: bad input, a failure or a limit; denied: the gate refused it; needs_approval: it waits for the user."
            },
            "summary": text("One line saying what happened."),
            "content": text("The text to read (a preview when truncated is true)."),
            "truncated": { "type": "boolean", "description": "Whether content is a preview of something larger." },
            "totals": {
                "type": "object",
                "description": "Seen against returned, per unit (lines, bytes, matches, ...).",
                "additionalProperties": {
                    "type": "object",
                    "required": ["seen", "returned"],
                    "additionalProperties": false,
                    "properties": {
                        "seen": { "type": "integer", "minimum": 0 },
                        "returned": { "type": "integer", "minimum": 0 }
                    }
                }
            },
            "full_output_ref": text("A workspace file holding the whole output when it was cut; read it to page through."),
            "data": { "description": "The tool's own structured result." },
            "audit_id": text("The call's id in the audit (toolgate undo takes it)."),
            "error_code": text("A stable code for errors (schema, not-found, timeout, ...)."),
            "reason": text("Why the call was denied or failed."),
            "hint": text("What would allow it, or how to fix it."),
            "stage": text("Which step of the permission ladder decided a denial."),
            "source": text("What decided a denial: a rule's file:line, a hook, a grant, the mode, the user."),
            "stop_turn": { "type": "boolean", "description": "Set on denials: stop and hand the turn back to the user." }
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tools::{Observation, Status, Total};

    fn validator() -> jsonschema::Validator {
        jsonschema::validator_for(&Value::Object((**observation_schema()).clone())).unwrap()
    }

    #[test]
    fn every_kind_of_observation_conforms() {
        let v = validator();
        for status in [
            Status::Ok,
            Status::Error,
            Status::Denied,
            Status::NeedsApproval,
        ] {
            let mut o = Observation::new("grep", status, "call-1");
            o.totals.insert(
                "matches".into(),
                Total {
                    seen: 3,
                    returned: 2,
                },
            );
            o.hint = Some("h".into());
            o.stop_turn = Some(true);
            o.data = json!({"anything": [1, 2]});
            let value = serde_json::to_value(&o).unwrap();
            assert!(v.is_valid(&value), "{value}");
        }
    }

    #[test]
    fn the_schema_catches_what_is_not_an_observation() {
        let v = validator();
        let o = serde_json::to_value(Observation::new("read", Status::Ok, "c")).unwrap();
        let mut extra = o.clone();
        extra["surprise"] = json!(1);
        let mut wrong = o.clone();
        wrong["status"] = json!("fine");
        let mut missing = o;
        missing.as_object_mut().unwrap().remove("audit_id");
        for bad in [extra, wrong, missing] {
            assert!(!v.is_valid(&bad), "{bad}");
        }
    }
}
