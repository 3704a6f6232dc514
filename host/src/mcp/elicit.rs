//! Approvals through the MCP client: an [`Approver`] that asks with `elicitation/create`.
//!
//! The message is plain text (control characters and escapes removed) and says exactly what
//! will run: the tool, its risk, the key a `session` or `project` answer grants, and the
//! gate's description of the call (paths and the exact input). The form has one field,
//! `decision`, whose enum is exactly the request's `choices` (`project` only when the tool's
//! ceiling allows it). Accept with a choice maps to that answer; decline, cancel, a missing or
//! unknown choice, or a failed request map to `deny`.

use crate::gate::approval::{plain_text, Answer, AnswerFuture, ApprovalRequest, Approver};
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{Peer, RoleServer};
use serde_json::json;
use std::time::Duration;

/// The form field carrying the answer.
pub const DECISION_FIELD: &str = "decision";

/// Asks the connected client's user through `elicitation/create`.
pub struct ElicitApprover {
    peer: Peer<RoleServer>,
}

impl ElicitApprover {
    /// An approver for the client behind `peer` (which must have declared elicitation).
    pub fn new(peer: Peer<RoleServer>) -> Self {
        ElicitApprover { peer }
    }
}

impl Approver for ElicitApprover {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        let peer = self.peer.clone();
        Box::pin(async move {
            let schema = match schema(&request.choices) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "building the elicitation schema failed");
                    return Some(Answer::Deny);
                }
            };
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: message(&request),
                requested_schema: schema,
            };
            let timeout = Duration::from_secs(request.expires_in_secs.max(1));
            match peer
                .create_elicitation_with_timeout(params, Some(timeout))
                .await
            {
                Ok(result) => Some(match result.action {
                    ElicitationAction::Accept => result
                        .content
                        .as_ref()
                        .and_then(|c| c.get(DECISION_FIELD))
                        .and_then(|v| v.as_str())
                        .and_then(parse_answer)
                        .filter(|a| request.choices.contains(a))
                        .unwrap_or(Answer::Deny),
                    _ => Answer::Deny,
                }),
                Err(e) => {
                    // Fail closed, and at once: waiting for the broker's expiry would hang the
                    // call for minutes after the client already said it cannot answer.
                    tracing::warn!(error = %e, "elicitation failed; denying");
                    Some(Answer::Deny)
                }
            }
        })
    }
}

fn parse_answer(s: &str) -> Option<Answer> {
    match s {
        "once" => Some(Answer::Once),
        "session" => Some(Answer::Session),
        "project" => Some(Answer::Project),
        "deny" => Some(Answer::Deny),
        _ => None,
    }
}

fn choice_text(a: Answer, key: &str) -> String {
    match a {
        Answer::Once => "once = run this one call".to_string(),
        Answer::Session => {
            format!("session = run it, and allow `{key}` until this connection ends")
        }
        Answer::Project => {
            format!("project = run it, and save `{key}` to .toolgate/grants.toml for this project")
        }
        Answer::Deny => "deny = do not run it".to_string(),
    }
}

/// The plain-text message the user reads.
pub fn message(request: &ApprovalRequest) -> String {
    let choices: Vec<String> = request
        .choices
        .iter()
        .map(|a| format!("  {}", choice_text(*a, &request.key)))
        .collect();
    plain_text(&format!(
        "toolgate: allow this call?\n\ntool: {} ({} risk)\nkey: {}\n\n{}\n\nchoices:\n{}\n\n(input sha256 {}; the request expires in {} s and then counts as deny)",
        request.tool,
        request.risk.as_str(),
        request.key,
        request.description,
        choices.join("\n"),
        request.input_sha256,
        request.expires_in_secs,
    ))
}

/// The form: one required `decision` field whose values are the offered choices.
pub fn schema(choices: &[Answer]) -> Result<ElicitationSchema, serde_json::Error> {
    let values: Vec<&str> = choices.iter().map(|a| a.as_str()).collect();
    serde_json::from_value(json!({
        "type": "object",
        "properties": {
            DECISION_FIELD: {
                "type": "string",
                "title": "Decision",
                "description": format!("one of: {}", values.join(", ")),
                "enum": values,
            }
        },
        "required": [DECISION_FIELD],
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tools::Risk;

    fn request(choices: Vec<Answer>) -> ApprovalRequest {
        ApprovalRequest {
            id: "r".into(),
            session: "mcp-x".into(),
            tool: "write\u{1b}[31m".into(),
            key: "write:src/".into(),
            description: "write (write tool)\n  creates src/a.txt (path)".into(),
            risk: Risk::Write,
            input_sha256: "abc".into(),
            choices,
            expires_in_secs: 300,
        }
    }

    #[test]
    fn message_is_plain_and_names_everything() {
        let m = message(&request(vec![Answer::Once, Answer::Deny]));
        assert!(!m.chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
        assert!(m.contains("tool: write (write risk)"));
        assert!(m.contains("key: write:src/"));
        assert!(m.contains("creates src/a.txt"));
        assert!(m.contains("once = run this one call"));
        assert!(!m.contains("project ="));
    }

    #[test]
    fn schema_offers_exactly_the_choices() {
        let s = schema(&[Answer::Once, Answer::Session, Answer::Deny]).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v["properties"][DECISION_FIELD]["enum"],
            json!(["once", "session", "deny"])
        );
        assert_eq!(v["required"], json!([DECISION_FIELD]));
    }
}
