//! Approvals through the MCP client: an [`Approver`] that asks with `elicitation/create`.
//!
//! The message is plain text (control characters and escapes removed; names such as paths and
//! the key shown escaped and quoted when they hold any, see [`escape_name`]) and says exactly
//! what will run: the tool, its risk, the key a `session` or `project` answer grants, and the
//! gate's description of the call (paths and the exact input). The form has one field,
//! `decision`, whose enum is exactly the request's `choices` (`project` only when the tool's
//! ceiling allows it). Accept with a choice maps to that answer; decline, cancel, a missing or
//! unknown choice, or a failed request map to `deny`.

use crate::gate::approval::{
    escape_name, plain_text, Answer, AnswerFuture, ApprovalRequest, Approver,
};
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleServer};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The form field carrying the answer.
pub const DECISION_FIELD: &str = "decision";

/// Asks the connected client's user through `elicitation/create`, for one call.
///
/// The approvals belong to that call: when it is cancelled ([`ElicitApprover::void`], or the
/// broker's [`Approver::withdrawn`]), every elicitation still open is cancelled with
/// `notifications/cancelled` for the server's own request id, and a response that still comes
/// is ignored.
pub struct ElicitApprover {
    peer: Peer<RoleServer>,
    /// True once the call is cancelled.
    void: watch::Sender<bool>,
    /// The approval ids asked through this approver, for the broker to withdraw.
    asked: Mutex<Vec<String>>,
    /// Whether the client has cancelled the call (read when an answer comes, so an answer
    /// that follows the cancellation approves nothing even before [`ElicitApprover::void`]).
    cancelled: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
}

impl ElicitApprover {
    /// An approver for one call of the client behind `peer` (which must have declared
    /// elicitation).
    pub fn new(peer: Peer<RoleServer>) -> Self {
        ElicitApprover {
            peer,
            void: watch::Sender::new(false),
            asked: Mutex::new(Vec::new()),
            cancelled: None,
        }
    }

    /// Also treat the call as cancelled once `cancelled` says so (the request's cancellation
    /// token, set as soon as the client's `notifications/cancelled` is read).
    pub fn with_cancelled(mut self, cancelled: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.cancelled = Some(Arc::new(cancelled));
        self
    }

    /// The call was cancelled: void its elicitations (the client is told) and return the
    /// approval ids asked so far, for the broker to withdraw.
    pub fn void(&self) -> Vec<String> {
        self.void.send_replace(true);
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// How an elicitation ended.
enum Ended {
    Response(Result<ClientResult, rmcp::service::ServiceError>),
    Void,
    TimedOut,
}

impl Approver for ElicitApprover {
    fn ask(&self, request: ApprovalRequest) -> AnswerFuture {
        let peer = self.peer.clone();
        let mut void = self.void.subscribe();
        let cancelled = self.cancelled.clone();
        let is_void = move |void: &watch::Receiver<bool>| {
            *void.borrow() || cancelled.as_ref().is_some_and(|f| f())
        };
        self.asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.id.clone());
        Box::pin(async move {
            if is_void(&void) {
                return None;
            }
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
            let sent = peer
                .send_cancellable_request(
                    ServerRequest::ElicitRequest(ElicitRequest::new(params)),
                    PeerRequestOptions::with_timeout(timeout),
                )
                .await;
            let mut handle = match sent {
                Ok(h) => h,
                Err(e) => {
                    // Fail closed, and at once: waiting for the broker's expiry would hang the
                    // call for minutes after the client already said it cannot answer.
                    tracing::warn!(error = %e, "elicitation failed; denying");
                    return Some(Answer::Deny);
                }
            };
            let ended = tokio::select! {
                biased;
                _ = void.wait_for(|v| *v) => Ended::Void,
                r = tokio::time::timeout(timeout, &mut handle.rx) => match r {
                    Ok(Ok(response)) => Ended::Response(response),
                    Ok(Err(_)) => Ended::Response(Err(rmcp::service::ServiceError::TransportClosed)),
                    Err(_) => Ended::TimedOut,
                },
            };
            let result = match ended {
                Ended::Void => {
                    // Tell the client the question is void; its late answer finds no one waiting.
                    let id = handle.id.clone();
                    if let Err(e) = handle
                        .cancel(Some(
                            "the call was cancelled; this approval request is withdrawn".into(),
                        ))
                        .await
                    {
                        tracing::debug!(error = %e, %id, "cancelling the elicitation failed");
                    }
                    return None;
                }
                Ended::TimedOut => {
                    let _ = handle
                        .cancel(Some("the approval request expired".into()))
                        .await;
                    return Some(Answer::Deny);
                }
                // A response that raced the cancellation approves nothing.
                Ended::Response(_) if is_void(&void) => return None,
                Ended::Response(Ok(ClientResult::ElicitResult(result))) => result,
                Ended::Response(Ok(_)) => {
                    tracing::warn!(
                        "the client answered the elicitation with something else; denying"
                    );
                    return Some(Answer::Deny);
                }
                Ended::Response(Err(e)) => {
                    tracing::warn!(error = %e, "elicitation failed; denying");
                    return Some(Answer::Deny);
                }
            };
            Some(match result.action {
                ElicitationAction::Accept => result
                    .content
                    .as_ref()
                    .and_then(|c| c.get(DECISION_FIELD))
                    .and_then(|v| v.as_str())
                    .and_then(parse_answer)
                    .filter(|a| request.choices.contains(a))
                    .unwrap_or(Answer::Deny),
                _ => Answer::Deny,
            })
        })
    }

    fn withdrawn(&self, _request: &ApprovalRequest) {
        // One approver is one call's: a withdrawn request means the call was cancelled.
        self.void.send_replace(true);
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
    let key = escape_name(key);
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
    // Names are escaped (one line each, controls shown as `\n`, `\x1b`, ...); the gate's
    // description escapes the paths in it and may span lines.
    plain_text(&format!(
        "toolgate: allow this call?\n\ntool: {} ({} risk)\nkey: {}\n\n{}\n\nchoices:\n{}\n\n(input sha256 {}; the request expires in {} s and then counts as deny)",
        escape_name(&request.tool),
        request.risk.as_str(),
        escape_name(&request.key),
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
        assert!(m.contains("tool: \"write\\x1b[31m\" (write risk)"), "{m}");
        assert!(m.contains("key: write:src/"));
        assert!(m.contains("creates src/a.txt"));
        assert!(m.contains("once = run this one call"));
        assert!(!m.contains("project ="));
    }

    #[test]
    fn a_key_with_a_newline_or_escape_stays_on_its_line() {
        let mut r = request(vec![Answer::Once, Answer::Session, Answer::Deny]);
        r.tool = "write".into();
        r.key = "write:a\nkey: write:src/\u{1b}[8m/".into();
        let m = message(&r);
        assert!(
            m.contains("key: \"write:a\\nkey: write:src/\\x1b[8m/\"\n"),
            "{m}"
        );
        assert!(
            m.contains("allow `\"write:a\\nkey: write:src/\\x1b[8m/\"` until"),
            "{m}"
        );
        assert_eq!(
            m.lines().filter(|l| l.starts_with("key:")).count(),
            1,
            "{m}"
        );
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
