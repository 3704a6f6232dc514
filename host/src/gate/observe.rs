//! Every observation the gate makes itself, built in one place: refusals of the ladder (deny,
//! error, cancelled), the errors of running a call (limits, crashes, I/O) and the audit events
//! that record them.

use super::decision::{Code, Decision, Refusal, Stage, Verdict};
use crate::error::Error;
use crate::tools::Observation;
use serde_json::{json, Value};

/// A refusal by a stage: `denied`, with the stage named in the observation.
pub(crate) fn deny(
    tool: &str,
    call_id: &str,
    stage: Stage,
    source: String,
    reason: String,
    hint: String,
) -> Refusal {
    let mut o = Observation::denied(tool, call_id, stage.as_str(), reason, hint);
    o.source = Some(source.clone());
    (Decision::new(Verdict::Deny, stage, source), o)
}

/// A call that cannot be decided or run as given, audited at `stage`; the observation names no
/// stage.
pub(crate) fn error(
    tool: &str,
    call_id: &str,
    stage: Stage,
    code: Code,
    message: String,
    hint: Option<String>,
) -> Refusal {
    let o = Observation::error(tool, call_id, code.as_str(), message, hint);
    (Decision::new(Verdict::Error, stage, "input".into()), o)
}

/// [`error`], with the stage named in the observation too.
pub(crate) fn error_at(
    tool: &str,
    call_id: &str,
    stage: Stage,
    code: Code,
    message: String,
    hint: Option<String>,
) -> Refusal {
    let (d, mut o) = error(tool, call_id, stage, code, message, hint);
    o.stage = Some(stage.as_str().into());
    (d, o)
}

/// A persisted allow or an answer that reaches past the tool's ceiling: an error at `stage`
/// based on `source` (shown in the observation when `show_source`).
pub(crate) fn ceiling_violation(
    tool: &str,
    call_id: &str,
    stage: Stage,
    source: String,
    show_source: bool,
    message: String,
    hint: String,
) -> Refusal {
    let (mut d, mut o) = error_at(
        tool,
        call_id,
        stage,
        Code::CeilingViolation,
        message,
        Some(hint),
    );
    if show_source {
        o.source = Some(source.clone());
    }
    d.source = source;
    (d, o)
}

/// A state database that cannot be read while a stage needs it: the call fails closed (a grant
/// that cannot be read is not taken for no grant).
pub(crate) fn state_unreadable(tool: &str, call_id: &str, stage: Stage, e: &Error) -> Refusal {
    let (mut d, o) = error_at(
        tool,
        call_id,
        stage,
        Code::State,
        format!("the grants of this session cannot be read: {e}"),
        Some("the state database (.toolgate/state.db) is unreadable: check its permissions and free space; if it is damaged, move it aside (a new one is made, without the old audit, read records and grants)".into()),
    );
    d.source = "state database".into();
    (d, o)
}

/// A call cancelled before it started (while it waited for approval, or as it was decided):
/// nothing ran, and the audit says `cancelled`, not `allow`.
pub(crate) fn cancelled(tool: &str, call_id: &str, stage: Stage, message: &str) -> Refusal {
    let mut o = Observation::error(
        tool,
        call_id,
        Code::Cancelled.as_str(),
        message.to_string(),
        Some("call again if it is still wanted".into()),
    );
    o.stage = Some(stage.as_str().into());
    (Decision::new(Verdict::Cancelled, stage, "client".into()), o)
}

/// An error while running an allowed call (after the decision was audited).
pub(crate) fn run_error(
    tool: &str,
    call_id: &str,
    code: Code,
    message: String,
    hint: Option<String>,
) -> Observation {
    Observation::error(tool, call_id, code.as_str(), message, hint)
}

/// What the sandbox's error means for the call: cancelled, a limit, or a crash.
pub(crate) fn limit_or_crash(name: &str, call_id: &str, e: Error) -> Observation {
    match e {
        Error::Cancelled { message } => run_error(name, call_id, Code::Cancelled, message, None),
        Error::Limit { limit, message } => {
            let mut o = run_error(
                name,
                call_id,
                Code::Limit,
                message,
                Some(match limit.policy_key() {
                    Some(key) => format!("the `{limit}` limit stopped the tool; narrow the request, or raise `limits.{key}` in .toolgate/policy.toml if it is legitimate"),
                    None => format!("the tool hit its `{limit}` limit (no policy key raises it); narrow the request, or report it to the tool's author"),
                }),
            );
            o.data = json!({ "limit": limit.as_str() });
            o
        }
        other => run_error(name, call_id, Code::Crashed, other.to_string(), None),
    }
}

/// A guest's `data` string as JSON (a plain string when it is not JSON).
pub(crate) fn parse_data(data: &str) -> Value {
    if data.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_string()))
}

/// The audit's `decision` event of an allowed call.
pub(crate) fn allowed_event(d: &Decision, key: Option<&str>) -> Value {
    let mut v =
        json!({ "decision": d.verdict.as_str(), "stage": d.stage.as_str(), "source": d.source });
    if let Some(k) = key {
        v["permission"] = json!(k);
    }
    v
}

/// The audit's `decision` event of a refused call; `permission` is the call's key once the
/// ladder computed it (a call refused before that, at the schema or scope, has none). Not named
/// `key`: the audit's redaction reads a field named so as a secret.
pub(crate) fn decision_event(d: &Decision, o: &Observation, key: Option<&str>) -> Value {
    let mut v = json!({
        "decision": d.verdict.as_str(),
        "stage": d.stage.as_str(),
        "source": d.source,
        "reason": o.reason,
    });
    if let Some(k) = key {
        v["permission"] = json!(k);
    }
    v
}

/// The audit's `completed` event.
pub(crate) fn completed_event(o: &Observation, elapsed: std::time::Duration) -> Value {
    json!({
        "status": o.status.as_str(),
        "summary": o.summary,
        "error_code": o.error_code,
        "duration_us": u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        "truncated": o.truncated,
    })
}
