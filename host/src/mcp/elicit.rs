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
    escape_name, plain_text, Answer, AnswerFuture, ApprovalRequest, Approver, Scope,
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
            let schema = match schema(&request.choices, &request.scopes) {
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
                    .and_then(Answer::parse)
                    .filter(|a| a.offered(&request))
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

/// The offered answers in the order shown, each with its wire value: `session:N` for each
/// scope narrower than the key, just before `session`.
fn offered_values(choices: &[Answer], scopes: &[Scope]) -> Vec<Answer> {
    let narrower = scopes.len().saturating_sub(1);
    let mut values = Vec::new();
    for a in choices {
        if *a == Answer::Session {
            values.extend(
                (0..narrower).filter_map(|i| u8::try_from(i).ok().map(Answer::SessionScope)),
            );
        }
        values.push(*a);
    }
    values
}

fn choice_text(a: Answer, key: &str, scopes: &[Scope]) -> String {
    let allows = |i: usize| {
        scopes
            .get(i)
            .map(|s| format!(" ({})", plain_text(&s.allows)))
            .unwrap_or_default()
    };
    if let Answer::SessionScope(i) = a {
        let i = usize::from(i);
        let scope = scopes
            .get(i)
            .map(|s| escape_name(&s.key))
            .unwrap_or_default();
        return format!(
            "{} = run it, and allow `{scope}` until this connection ends{}",
            a.name(),
            allows(i)
        );
    }
    let key = escape_name(key);
    match a {
        Answer::Once => "once = run this one call".to_string(),
        Answer::Session | Answer::SessionScope(_) => {
            format!(
                "session = run it, and allow `{key}` until this connection ends{}",
                if scopes.is_empty() {
                    String::new()
                } else {
                    allows(scopes.len() - 1)
                }
            )
        }
        Answer::Project => {
            format!("project = run it, and save `{key}` to .toolgate/grants.toml for this project")
        }
        Answer::Deny => "deny = do not run it".to_string(),
    }
}

/// The plain-text message the user reads.
pub fn message(request: &ApprovalRequest) -> String {
    let choices: Vec<String> = offered_values(&request.choices, &request.scopes)
        .into_iter()
        .map(|a| format!("  {}", choice_text(a, &request.key, &request.scopes)))
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

/// The form: one required `decision` field whose values are the offered choices, with
/// `session:N` for each narrower scope (then each value has a title saying what it allows).
pub fn schema(
    choices: &[Answer],
    scopes: &[Scope],
) -> Result<ElicitationSchema, serde_json::Error> {
    let offered = offered_values(choices, scopes);
    let values: Vec<String> = offered.iter().map(|a| a.name()).collect();
    let mut field = json!({
        "type": "string",
        "title": "Decision",
        "description": format!("one of: {}", values.join(", ")),
        "enum": values,
    });
    if scopes.len() > 1 {
        let key = scopes.last().map(|s| s.key.as_str()).unwrap_or_default();
        let titles: Vec<String> = offered
            .iter()
            .map(|a| plain_text(&choice_text(*a, key, scopes)))
            .collect();
        field["enumNames"] = json!(titles);
    }
    serde_json::from_value(json!({
        "type": "object",
        "properties": { DECISION_FIELD: field },
        "required": [DECISION_FIELD],
    }))
}

#[cfg(test)]
#[path = "elicit_tests.rs"]
mod tests;
