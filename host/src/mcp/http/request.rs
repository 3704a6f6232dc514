//! One HTTP request: the Host/Origin and token checks, then the console or rmcp with the
//! session id translated; and the error responses.

use super::quiet::Quiet;
use super::sessions::{close_sessions, SessionLimits, Sessions};
use super::{
    conversation_session, Allowlist, Tokens, CONVERSATION_HEADER, INTERNAL_CONVERSATION_HEADER,
    MAX_CONVERSATION_CHARS, MCP_PATH, SESSION_HEADER,
};
use crate::mcp::McpConnection;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::SessionManager as _;
use rmcp::transport::StreamableHttpService;
use std::convert::Infallible;
use std::sync::Arc;

type Body = BoxBody<Bytes, Infallible>;

tokio::task_local! {
    /// Where rmcp's call of the connection factory, inside a request's task, leaves the
    /// connection it made (for a new session).
    pub(super) static MADE: Arc<std::sync::Mutex<Option<crate::mcp::WeakConnection>>>;
    /// The owner tag of the token of the request in whose task rmcp makes a connection: the
    /// new session is named for it.
    pub(super) static OWNER: Option<String>;
}

/// The largest request body read (rmcp's own limit).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// What every request of one server is handled with.
pub(super) struct Served {
    pub(super) gate: Arc<crate::gate::Gate>,
    pub(super) service: StreamableHttpService<McpConnection, LocalSessionManager>,
    pub(super) console: crate::console::Console,
    pub(super) allowlist: Allowlist,
    pub(super) tokens: Arc<Tokens>,
    pub(super) sessions: Arc<Sessions>,
    pub(super) manager: Arc<LocalSessionManager>,
    pub(super) limits: SessionLimits,
    pub(super) quiet: Quiet,
    /// Makes a connection: rmcp's factory calls it too, so a stateless call run beside rmcp
    /// gets the connection rmcp would have made for it.
    pub(super) connect: Arc<Connect>,
    /// The peer stateless calls run beside rmcp are handled with.
    pub(super) modern: super::stateless::ModernPeer,
}

/// What makes one MCP connection of a server.
pub(super) type Connect = dyn Fn() -> McpConnection + Send + Sync;

/// One request: the checks, then the console's page or API, or rmcp with the session id
/// translated.
pub(super) async fn handle(req: Request<Incoming>, served: &Served) -> Response<Body> {
    let _active = served.quiet.enter();
    let Served {
        gate,
        service,
        console,
        allowlist,
        tokens,
        sessions,
        manager,
        limits,
        quiet,
        ..
    } = served;
    let (manager, limits) = (&**manager, *limits);
    let mut service = service.clone();
    if let Some(refusal) = refuse(&req, allowlist) {
        return refusal;
    }
    if let Some(page) = crate::console::page(&req) {
        return page;
    }
    let token = match authorize(&req, tokens) {
        Ok(t) => t,
        Err(message) => return unauthorized(message),
    };
    let tag = tokens.tag(token).unwrap_or_default().to_string();
    if crate::console::is_api(req.uri().path()) {
        let caller = if tokens.is_person(token) {
            crate::console::Caller::person(&tag)
        } else {
            crate::console::Caller::client(&tag)
        };
        return console.api(req, caller).await;
    }
    if req.uri().path() != MCP_PATH {
        return text_response(
            StatusCode::NOT_FOUND,
            "Not found: the MCP endpoint is /mcp, the console is at /\n",
        );
    }
    let posting = req.method() == hyper::Method::POST;
    if posting && !is_json(&req) {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            -32600,
            "Unsupported Media Type: send the JSON-RPC message with `Content-Type: application/json`",
        );
    }
    let (parts, body) = req.into_parts();
    let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                "Invalid Request: the body is over 4 MiB, the most a message may be",
            )
        }
        Err(_) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                -32700,
                "Parse error: the request body could not be read",
            )
        }
    };
    let mut initialize = false;
    let mut calling = false;
    let mut parsed = None;
    if posting {
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Err(e) => {
                return rpc_error(StatusCode::BAD_REQUEST, -32700, &format!("Parse error: {e}"))
            }
            Ok(serde_json::Value::Array(_)) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    -32600,
                    "Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching); send one message a request",
                )
            }
            Ok(v) => {
                let method = v.get("method").and_then(|m| m.as_str());
                initialize = method == Some("initialize");
                calling = method == Some("tools/call");
                parsed = Some(v);
            }
        }
    }
    let mut req = Request::from_parts(parts, Full::new(body));
    // Only the server says which conversation a request is in.
    req.headers_mut().remove(INTERNAL_CONVERSATION_HEADER);
    let mut in_flight = None;
    let mut reservation = None;
    let mut session_conn = None;
    let mut modern_call = None;
    let outer = match req.headers().get(SESSION_HEADER) {
        None => {
            if initialize {
                sessions.prune(manager).await;
                close_sessions(manager, sessions.take_expired(limits.idle)).await;
                reservation = sessions.reserve(limits.max);
                if reservation.is_none() {
                    tracing::warn!(
                        max = limits.max,
                        "too many MCP sessions; refused an initialize"
                    );
                    return rpc_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        -32000,
                        &format!("Service unavailable: too many sessions ({}) are open on this toolgate server; end one (HTTP DELETE) or wait for an idle one to expire", limits.max),
                    );
                }
            }
            // A stateless (2026-07-28) request: its conversation is the token's, named by
            // the client within it; the handler uses it only for such requests.
            let named = match req.headers().get(CONVERSATION_HEADER).map(|v| v.to_str()) {
                None => "",
                Some(Ok(n)) if n.len() <= MAX_CONVERSATION_CHARS => n,
                Some(_) => {
                    return rpc_error(
                        StatusCode::BAD_REQUEST,
                        -32600,
                        &format!("Invalid Request: the `Toolgate-Conversation` header must be at most {MAX_CONVERSATION_CHARS} visible ASCII characters"),
                    )
                }
            };
            let Some(digest) = tokens.digest(token) else {
                return text_response(StatusCode::INTERNAL_SERVER_ERROR, "bad token\n");
            };
            let session = conversation_session(digest, named);
            if let Ok(v) = hyper::header::HeaderValue::from_str(&session) {
                req.headers_mut().insert(INTERNAL_CONVERSATION_HEADER, v);
            }
            if let (true, Some(message)) = (posting && calling, &parsed) {
                let conn = (served.connect)();
                if super::stateless::takes(req.headers(), message, &conn) {
                    modern_call = parsed.take().map(|m| (conn, m));
                }
            }
            None
        }
        Some(v) => {
            let used = match v.to_str() {
                Ok(outer) => sessions
                    .use_session(outer, token, limits.idle)
                    .map(|(inner, guard, conn)| (outer.to_string(), inner, guard, conn)),
                Err(_) => Err(None),
            };
            let (outer, inner, guard, conn) = match used {
                Ok(u) => u,
                Err(expired) => {
                    if let Some(inner) = expired {
                        close_sessions(manager, vec![inner]).await;
                    }
                    // Unknown, ended, expired, or another token's: the same answer for all.
                    return rpc_error(
                        StatusCode::NOT_FOUND,
                        -32001,
                        "Session not found: start a new session with an initialize request",
                    );
                }
            };
            in_flight = Some(guard);
            if let (Some(message), true) = (&parsed, posting) {
                // A cancellation of a call running beside rmcp: rmcp does not know the call.
                if sessions.calls.cancel(&outer, message) {
                    let mut accepted = Response::new(Full::new(Bytes::new()).boxed());
                    *accepted.status_mut() = StatusCode::ACCEPTED;
                    return accepted;
                }
            }
            let conn = conn.and_then(|c| c.upgrade());
            if let (Some(message), Some(conn), true) = (parsed.take(), conn, posting) {
                if super::fast::takes(req.headers(), &message, &conn)
                    && manager
                        .has_session(&inner.clone().into())
                        .await
                        .unwrap_or(false)
                {
                    session_conn = Some((conn, message));
                }
            }
            match hyper::header::HeaderValue::from_str(&inner) {
                Ok(v) => {
                    req.headers_mut().insert(SESSION_HEADER, v);
                }
                Err(_) => return text_response(StatusCode::INTERNAL_SERVER_ERROR, "bad session\n"),
            }
            Some(outer)
        }
    };
    if let (Some((conn, message)), Some(outer)) = (session_conn, &outer) {
        let alone = quiet.is_quiet();
        if let Some(answer) = super::fast::serve(conn, message, &sessions.calls, outer, alone).await
        {
            drop(in_flight);
            quiet.answered_call(gate);
            return answer;
        }
    }
    if let Some((conn, message)) = modern_call {
        let (parts, body) = req.into_parts();
        let alone = quiet.is_quiet();
        let peer = &served.modern;
        match super::stateless::serve(conn, peer, message, parts, alone).await {
            Ok(answer) => {
                quiet.answered_call(gate);
                return answer;
            }
            // Not a call after all: rmcp answers it.
            Err(parts) => req = Request::from_parts(parts, body),
        }
    }
    let deleting = req.method() == hyper::Method::DELETE;
    use tower_service::Service as _;
    // The connection rmcp makes for a new session, to find it by the session later.
    let made = Arc::new(std::sync::Mutex::new(None));
    let call = OWNER.scope(Some(tag), service.call(req));
    let Ok(mut response) = MADE.scope(made.clone(), call).await;
    if calling {
        // Done unless its answer is streamed, and then the gate is busy and does nothing.
        quiet.answered_call(gate);
    }
    let created = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let Some(inner) = created {
        if outer.is_none() {
            sessions.prune(manager).await;
        }
        let conn = made.lock().unwrap_or_else(|p| p.into_inner()).take();
        let shown = sessions
            .outer_for(&inner, token)
            .inspect(|outer| {
                if let Some(conn) = conn {
                    sessions.attach(outer, conn);
                }
            })
            .ok()
            .and_then(|o| hyper::header::HeaderValue::from_str(&o).ok());
        match shown {
            Some(v) => {
                response.headers_mut().insert(SESSION_HEADER, v);
            }
            None => {
                return text_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "cannot make a session id: the OS random source failed\n",
                )
            }
        }
    }
    drop(reservation);
    if let (true, Some(outer)) = (deleting && response.status().is_success(), outer) {
        drop(in_flight.take());
        sessions.remove(&outer);
        // Ended: 204 No Content (rmcp says 202, which SDK clients report as a failure).
        let mut ended = Response::new(Full::new(Bytes::new()).boxed());
        *ended.status_mut() = StatusCode::NO_CONTENT;
        return ended;
    }
    match in_flight {
        // The session stays in use until the (maybe streamed) answer is done.
        Some(guard) => response.map(|body| {
            body.map_frame(move |frame| {
                let _in_flight = &guard;
                frame
            })
            .boxed()
        }),
        None => response,
    }
}

/// Whether the request says its body is JSON.
fn is_json(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

/// Which token the request carries, or why it is refused.
fn authorize(req: &Request<Incoming>, tokens: &Tokens) -> Result<usize, &'static str> {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let presented = header.and_then(|h| {
        let (scheme, rest) = h.trim().split_once(' ')?;
        scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
    });
    let message = match presented.map(|t| tokens.identify(t)) {
        Some(Some(token)) => return Ok(token),
        Some(None) => "Unauthorized: the bearer token is wrong; send `Authorization: Bearer <token>` with a token from the file `toolgate serve --http` printed at start (by default $XDG_STATE_HOME/toolgate/http-token)",
        None => "Unauthorized: send the header `Authorization: Bearer <token>`, with the token from the file `toolgate serve --http` printed at start (by default $XDG_STATE_HOME/toolgate/http-token)",
    };
    tracing::warn!(
        bad_token = presented.is_some(),
        "refused a request without a valid bearer token"
    );
    Err(message)
}

/// The 401 that refuses a request without a valid token.
fn unauthorized(message: &str) -> Response<Body> {
    let mut response = rpc_error(StatusCode::UNAUTHORIZED, -32001, message);
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer realm=\"toolgate\""),
    );
    response
}

/// The response that refuses `req` for its `Host` or `Origin`, if it must be refused.
fn refuse(req: &Request<Incoming>, allowlist: &Allowlist) -> Option<Response<Body>> {
    let header = |name| {
        req.headers()
            .get(name)
            .map(|v| v.to_str().unwrap_or("\u{fffd}"))
    };
    if !allowlist.allows(header(hyper::header::HOST), header(hyper::header::ORIGIN)) {
        tracing::warn!(
            host = ?header(hyper::header::HOST),
            origin = ?header(hyper::header::ORIGIN),
            "refused a request with a foreign Host or Origin header (DNS rebinding?)"
        );
        return Some(text_response(
            StatusCode::FORBIDDEN,
            "Forbidden: the Host or Origin header is not allowed\n",
        ));
    }
    None
}

/// A JSON-RPC error object (id null) as the body of an HTTP error, so MCP clients show its
/// message.
fn rpc_error(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message},
    });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

pub(super) fn busy_response() -> Response<Body> {
    let mut response = rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        "Service unavailable: too many open connections to this toolgate server; retry shortly",
    );
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    response
}

fn text_response(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
