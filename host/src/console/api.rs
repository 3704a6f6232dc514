//! The console's JSON API (`/api/...`): what the page reads and the few things it changes
//! (an approval's answer, a revoked grant, an undo), each scoped to its [`Caller`]: a client
//! token's answer, revocation or undo that names another session's request, grant or call is
//! answered exactly as one naming nothing, so it learns nothing of it.

// A refusal is the response itself, built once on the cold path: its size does not matter.
#![allow(clippy::result_large_err)]

use super::{call_json, error, events, json, Body, Caller};
use crate::gate::approval::{Answer, BoundRefusal};
use crate::gate::Gate;
use crate::history::{UndoError, UndoTarget};
use crate::state::AuditQuery;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The largest request body the API reads.
const MAX_BODY: usize = 64 * 1024;

/// Most calls listed at once.
const MAX_CALLS: usize = 1000;

/// How many of the newest calls are looked through for a client token's own.
const MAX_SCAN: usize = 20_000;

/// One API request.
pub(super) async fn handle(
    gate: &Arc<Gate>,
    req: Request<Incoming>,
    caller: Caller,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let method = req.method().clone();
    let route = path.strip_prefix(super::API_PREFIX).unwrap_or("");
    match (method, route) {
        (Method::GET, "overview") => json(StatusCode::OK, &overview(gate)),
        (Method::GET, "approvals") => json(StatusCode::OK, &super::queue(gate, &caller)),
        (Method::GET, "events") => events::stream(gate.clone(), caller),
        (Method::GET, "calls") => {
            let limit = param(&query, "limit")
                .and_then(|l| l.parse::<usize>().ok())
                .unwrap_or(200)
                .clamp(1, MAX_CALLS);
            blocking(gate, move |g| calls(g, limit, &caller)).await
        }
        (Method::GET, "grants") => blocking(gate, move |g| grants(g, &caller)).await,
        (Method::GET, "history") => {
            let path = param(&query, "path").filter(|p| !p.is_empty());
            blocking(gate, move |g| history(g, path.as_deref(), &caller)).await
        }
        (Method::POST, "approvals/answer" | "grants/revoke" | "undo") => {
            let body = match read_json(req).await {
                Ok(b) => b,
                Err(refusal) => return refusal,
            };
            match route {
                "approvals/answer" => answer(gate, body, &caller),
                "grants/revoke" => blocking(gate, move |g| revoke(g, body, &caller)).await,
                _ => blocking(gate, move |g| undo(g, body, &caller)).await,
            }
        }
        (_, "overview" | "approvals" | "events" | "calls" | "grants" | "history") => error(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{path} is read with GET"),
        ),
        (_, "approvals/answer" | "grants/revoke" | "undo") => error(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{path} takes a POST with a JSON body"),
        ),
        _ => error(
            StatusCode::NOT_FOUND,
            &format!("the console has no {path}; the page is at /"),
        ),
    }
}

/// Run `f` on a blocking thread (the state database is synchronous).
async fn blocking(
    gate: &Arc<Gate>,
    f: impl FnOnce(&Gate) -> Response<Body> + Send + 'static,
) -> Response<Body> {
    let gate = gate.clone();
    tokio::task::spawn_blocking(move || f(&gate))
        .await
        .unwrap_or_else(|_| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the request failed inside toolgate; see its log",
            )
        })
}

/// The body of a POST as JSON: it must say it is JSON (a form a foreign page could send
/// without asking is not), be at most [`MAX_BODY`], and parse.
async fn read_json(req: Request<Incoming>) -> Result<Value, Response<Body>> {
    let is_json = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as JSON with `Content-Type: application/json`",
        ));
    }
    let body = http_body_util::Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|_| {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the body could not be read, or is over 64 KiB",
            )
        })?
        .to_bytes();
    serde_json::from_slice(&body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            &format!("the body is not JSON: {e}"),
        )
    })
}

/// A body field by `T`'s shape, or a 400 that names what is wrong.
fn fields<T: for<'de> Deserialize<'de>>(body: Value, what: &str) -> Result<T, Response<Body>> {
    serde_json::from_value(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            &format!("the body must be {what}: {e}"),
        )
    })
}

fn overview(gate: &Gate) -> Value {
    let policy = gate.policy();
    let ignored: Vec<String> = gate
        .policy_ignored()
        .iter()
        .map(|i| i.to_string())
        .collect();
    json!({
        "workspace": gate.workspace().root().to_string_lossy(),
        "mode": gate.mode().as_str(),
        "version": env!("CARGO_PKG_VERSION"),
        "layers": policy.layers.iter().map(|l| json!({
            "kind": l.kind.as_str(),
            "origin": l.origin,
            "trusted": l.trusted,
            "applied": l.applied,
        })).collect::<Vec<_>>(),
        "ignored": ignored,
    })
}

fn calls(gate: &Gate, limit: usize, caller: &Caller) -> Response<Body> {
    let db = gate.state();
    // A client's own calls are found among the newest [`MAX_SCAN`].
    let scan = if caller.is_person() { limit } else { MAX_SCAN };
    let listed = db.audit_max_id().and_then(|up_to| {
        let query = AuditQuery {
            limit: Some(scan),
            ..AuditQuery::default()
        };
        db.audit_calls(&query, up_to)
    });
    match listed {
        Ok(mut calls) => {
            calls.retain(|c| caller.sees(&c.session));
            let skip = calls.len().saturating_sub(limit);
            let calls: Vec<Value> = calls[skip..].iter().rev().map(call_json).collect();
            json(StatusCode::OK, &json!({ "calls": calls }))
        }
        Err(e) => failed("the audit", &e),
    }
}

fn grants(gate: &Gate, caller: &Caller) -> Response<Body> {
    let project = match gate.project_grants().list() {
        Ok(list) => list,
        Err(problem) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{problem}; fix .toolgate/grants.toml"),
            )
        }
    };
    let session = match gate.state().all_session_grants() {
        Ok(list) => list,
        Err(e) => return failed("the session grants", &e),
    };
    let ignored: Vec<String> = gate
        .project_grants()
        .ignored()
        .iter()
        .map(|i| i.to_string())
        .collect();
    let project: Vec<Value> = project
        .into_iter()
        .map(|(key, source)| json!({ "key": key, "source": source }))
        .collect();
    let session: Vec<Value> = session
        .into_iter()
        .filter(|(session, _)| caller.sees(session))
        .map(|(session, key)| json!({ "session": session, "key": key }))
        .collect();
    json(
        StatusCode::OK,
        &json!({ "project": project, "session": session, "ignored": ignored }),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Revoke {
    scope: String,
    key: String,
    session: Option<String>,
}

fn revoke(gate: &Gate, body: Value, caller: &Caller) -> Response<Body> {
    let r: Revoke = match fields(
        body,
        r#"{"scope": "project"|"session", "key": KEY, "session": S}"#,
    ) {
        Ok(r) => r,
        Err(refusal) => return refusal,
    };
    let revoked = match (r.scope.as_str(), r.session) {
        // The project's grants are the person's to change (a client sees them, as they
        // decide its calls too).
        ("project", None) if !caller.is_person() => Err(error(
            StatusCode::FORBIDDEN,
            "only the person's token may revoke a project grant (a client's token revokes its own sessions' grants)",
        )),
        // Another client's session: as if it held no such grant.
        ("session", Some(session)) if !caller.sees(&session) => Ok(0),
        ("project", None) => gate.project_grants().revoke(&r.key).map_err(|p| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("{p}; fix .toolgate/grants.toml"),
            )
        }),
        ("session", Some(session)) => gate
            .state()
            .revoke_session_grant(&session, &r.key)
            .map_err(|e| failed("the session grants", &e)),
        _ => Err(error(
            StatusCode::BAD_REQUEST,
            "revoke with {\"scope\": \"project\", \"key\": KEY} or {\"scope\": \"session\", \"session\": S, \"key\": KEY}",
        )),
    };
    match revoked {
        Ok(n) => {
            tracing::info!(scope = %r.scope, key = %r.key, revoked = n, "grant revoked from the console");
            json(StatusCode::OK, &json!({ "revoked": n }))
        }
        Err(refusal) => refusal,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    id: String,
    input_sha256: String,
    answer: String,
}

fn answer(gate: &Gate, body: Value, caller: &Caller) -> Response<Body> {
    let a: AnswerBody = match fields(
        body,
        r#"{"id": ID, "input_sha256": HASH, "answer": "once"|"session"|"session:N"|"project"|"deny"}"#,
    ) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let Some(answer) = Answer::parse(&a.answer) else {
        return error(
            StatusCode::BAD_REQUEST,
            &format!(
                "`{}` is not an answer: send once, session, session:N (N a scope of the request), project or deny",
                crate::text::escape_name(&a.answer)
            ),
        );
    };
    let may = |r: &crate::gate::approval::ApprovalRequest| caller.sees(&r.session);
    match gate
        .broker()
        .answer_bound_if(&a.id, &a.input_sha256, answer, may)
    {
        Ok(()) => {
            tracing::info!(id = %a.id, answer = %answer.name(), "approval answered from the console");
            json(StatusCode::OK, &json!({ "answered": true }))
        }
        Err(e @ BoundRefusal::Gone(_)) => error(StatusCode::CONFLICT, &e.to_string()),
        Err(e) => error(StatusCode::BAD_REQUEST, &e.to_string()),
    }
}

fn history(gate: &Gate, path: Option<&str>, caller: &Caller) -> Response<Body> {
    match crate::history::list(gate.state(), gate.workspace(), path, None) {
        Ok(mut files) => {
            // A client sees the versions its own calls recorded, and the files they touched.
            if !caller.is_person() {
                for f in &mut files {
                    f.versions
                        .retain(|v| v.session.as_deref().is_some_and(|s| caller.sees(s)));
                }
                files.retain(|f| !f.versions.is_empty());
            }
            json(StatusCode::OK, &json!({ "files": files }))
        }
        Err(crate::error::Error::Workspace { message, .. }) => {
            error(StatusCode::BAD_REQUEST, &message)
        }
        Err(e) => failed("the history", &e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UndoBody {
    call_id: String,
    #[serde(default)]
    force: bool,
}

fn undo(gate: &Gate, body: Value, caller: &Caller) -> Response<Body> {
    let u: UndoBody = match fields(body, r#"{"call_id": ID, "force": false}"#) {
        Ok(u) => u,
        Err(refusal) => return refusal,
    };
    if !caller.is_person() {
        // A client undoes only its own calls: another's is answered as an unknown id.
        let owned = match gate.state().audit_call(&u.call_id) {
            Ok(call) => call.is_some_and(|c| caller.sees(&c.session)),
            Err(e) => return failed("the audit", &e),
        };
        if !owned {
            return json(
                StatusCode::NOT_FOUND,
                &json!({
                    "error": format!(
                        "no call `{}` of this token's sessions changed a file\nhint: GET /api/history lists the calls this token can undo",
                        crate::text::escape_name(&u.call_id)
                    ),
                    "changed": [],
                }),
            );
        }
        // Forcing would overwrite what others (the person, another client) wrote since.
        if u.force {
            return error(
                StatusCode::FORBIDDEN,
                "only the person's token may force an undo over files changed since the call",
            );
        }
    }
    let target = UndoTarget::Call(u.call_id);
    let session = caller.session();
    match crate::history::undo(gate.state(), gate.workspace(), &target, u.force, &session) {
        Ok(report) => json(StatusCode::OK, &json!(report)),
        Err(e) => {
            let status = match &e {
                UndoError::Nothing { .. } => StatusCode::NOT_FOUND,
                UndoError::Changed(_) => StatusCode::CONFLICT,
                UndoError::Unrestorable(_) => StatusCode::UNPROCESSABLE_ENTITY,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let changed: Vec<&str> = match &e {
                UndoError::Changed(files) => files.iter().map(|(p, _)| p.as_str()).collect(),
                _ => Vec::new(),
            };
            json(
                status,
                &json!({ "error": e.to_string(), "changed": changed }),
            )
        }
    }
}

/// A 500 for a failed state database read, logged.
fn failed(what: &str, e: &crate::error::Error) -> Response<Body> {
    tracing::warn!(error = %e, "the console could not read {what}");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        &format!("cannot read {what}: {e}"),
    )
}

/// The value of `name` in a query string (`a=1&b=x%20y`), percent-decoded.
pub(super) fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(k)? == name).then(|| decode(v)).flatten()
    })
}

/// Percent-decode a query component (`+` is a space); `None` when it is not UTF-8.
fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}
