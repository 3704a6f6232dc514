//! `tools/call` on a 2025-11-25 (or older) HTTP session, run in the request's own task
//! beside rmcp's session worker instead of through it.
//!
//! Through rmcp a session's request goes from the connection's task to the session worker,
//! to the service loop, to a task of its own, and its answer back the same way as an SSE
//! stream (a priming event, then the answer): on a two-core machine those hand-offs move the
//! call between tokio's workers several times (7.5 futex calls and 5 `epoll_wait` a call
//! against 1.8 and 2.5 a `ping`, docs/benchmarks.md). Here the call runs through rmcp's own
//! request handling (`Service::handle_request`, so its checks and results are rmcp's) and
//! its answer is the response's JSON body (`application/json`, which 2025-11-25 allows for
//! any POST).
//!
//! Only calls that need nothing from the session's stream come this way; everything else
//! goes to rmcp as before:
//! - `Accept` names both `application/json` and `text/event-stream` (rmcp's rule for a POST);
//! - the client did not declare elicitation (approvals are elicitation requests, which
//!   belong on the call's stream), and the call asks for no progress (`progressToken`);
//! - the `MCP-Protocol-Version` header is absent or a 2025 (or 2024-11-05) revision, and the
//!   call carries no per-request protocol metadata (rmcp's header and `_meta` checks then have
//!   nothing to refuse);
//! - the session's `initialize` has been handled (its client's capabilities are known) and
//!   rmcp still has the session.
//!
//! What rmcp's session did for a call is done here: `notifications/cancelled` naming the
//! call (on the same session) cancels it, and so does the client closing the connection
//! before the answer.
//!
//! While the server is quiet (one request at a time, `quiet`), the call runs in the request's
//! task itself: a task of its own is handed to the other runtime worker, which is woken for
//! it (measured on one connection: ~0.8 fewer context switches and ~100 µs less server CPU a
//! call). A request dropped before its call ended (the client went away) hands what is left
//! of the call to a task of its own, cancelled, so the call still ends as a cancelled call
//! does (its audit, its cleanup). Under load the call is a task of its own: run in place, the
//! load script's calls (100 in flight) were ~15% fewer a second, with p99 30-35 ms instead of
//! 23-24 ms.

use crate::mcp::McpConnection;
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::{HeaderMap, Response, StatusCode};
use rmcp::model::{ClientRequest, GetExtensions as _, GetMeta as _, JsonRpcRequest};
use rmcp::model::{JsonRpcMessage, RequestId, ServerJsonRpcMessage, ServerResult};
use rmcp::service::{RequestContext, RoleServer, Service as _};
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};
use tokio_util::sync::CancellationToken;

type Body = BoxBody<Bytes, Infallible>;

/// The `MCP-Protocol-Version` header values a call here may carry (or none).
const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The calls running here: (session id the client sees, request id) -> the latest call with
/// that id (its number) and its cancellation.
#[derive(Default)]
pub(super) struct Running {
    calls: Mutex<HashMap<(String, RequestId), (u64, CancellationToken)>>,
    next: AtomicU64,
}

impl Running {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, RequestId), (u64, CancellationToken)>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// If `message` is `notifications/cancelled` for a call of session `outer` running here,
    /// cancel it: whether it was.
    pub(super) fn cancel(&self, outer: &str, message: &Value) -> bool {
        if message.get("method").and_then(Value::as_str) != Some("notifications/cancelled") {
            return false;
        }
        let Some(id) = message
            .pointer("/params/requestId")
            .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok())
        else {
            return false;
        };
        match self.lock().remove(&(outer.to_string(), id)) {
            Some((_, ct)) => {
                ct.cancel();
                true
            }
            None => false,
        }
    }
}

/// A call's place in [`Running`], given up when the request's future ends or is dropped; a
/// request dropped before its call finished (the client went away) cancels the call, as
/// rmcp's stream does.
struct Entry<'a> {
    running: &'a Running,
    key: (String, RequestId),
    number: u64,
    ct: CancellationToken,
    finished: bool,
}

impl<'a> Entry<'a> {
    fn new(running: &'a Running, outer: &str, id: RequestId, ct: CancellationToken) -> Self {
        let number = running.next.fetch_add(1, Ordering::Relaxed);
        let key = (outer.to_string(), id);
        running.lock().insert(key.clone(), (number, ct.clone()));
        Entry {
            running,
            key,
            number,
            ct,
            finished: false,
        }
    }
}

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.ct.cancel();
        }
        let mut calls = self.running.lock();
        // A later call reusing the id took the place over: it stays.
        if calls.get(&self.key).is_some_and(|(n, _)| *n == self.number) {
            calls.remove(&self.key);
        }
    }
}

/// Whether the POST `message` with `headers` on a session whose connection is `conn` is a
/// call this path serves (see the module's list).
pub(super) fn takes(headers: &HeaderMap, message: &Value, conn: &McpConnection) -> bool {
    if message.get("method").and_then(Value::as_str) != Some("tools/call")
        || message.get("id").is_none()
        || !accepts_json_and_sse(headers)
    {
        return false;
    }
    let versions_ok = headers
        .get_all("mcp-protocol-version")
        .iter()
        .all(|v| v.to_str().is_ok_and(|v| LEGACY_VERSIONS.contains(&v)));
    if !versions_ok {
        return false;
    }
    if let Some(meta) = message.pointer("/params/_meta") {
        let Some(meta) = meta.as_object() else {
            return false;
        };
        if meta
            .keys()
            .any(|k| k == "progressToken" || k.starts_with("io.modelcontextprotocol/"))
        {
            return false;
        }
    }
    conn.handshake_peer().is_some_and(|peer| {
        peer.peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_none())
    })
}

/// Run the call in `message` for session `outer` (cancellable through `running`) and answer
/// it as JSON; `None` (nothing run) if `message` does not read as a call, so rmcp answers it.
/// `in_place`: in the request's own task (a quiet server), else in a task of its own.
pub(super) async fn serve(
    conn: McpConnection,
    message: Value,
    running: &Running,
    outer: &str,
    in_place: bool,
) -> Option<Response<Body>> {
    let peer = conn.handshake_peer()?;
    let r = request(message)?;
    if !matches!(r.request, ClientRequest::CallToolRequest(_)) {
        return None;
    }
    let mut request = r.request;
    let mut context = RequestContext::new(r.id.clone(), peer);
    context.meta = std::mem::take(request.get_meta_mut());
    context.extensions = std::mem::take(request.extensions_mut());
    let mut entry = Entry::new(running, outer, r.id.clone(), context.ct.clone());
    let result = run(conn, request, context, in_place).await;
    entry.finished = true;
    drop(entry);
    let answer: ServerJsonRpcMessage = match result {
        Ok(result) => JsonRpcMessage::response(result, r.id),
        Err(error) => JsonRpcMessage::error(error, Some(r.id)),
    };
    Some(json_response(&answer, StatusCode::OK))
}

/// `message` as rmcp reads a JSON-RPC request, or `None` if rmcp would not read it as one.
///
/// rmcp reads any message by trying each kind in turn (a request, a response, a
/// notification, an error), each through serde's buffering of the whole message, twice over
/// for the kind's check of its fields. A message is a request to rmcp exactly when it has
/// `method` and `id` but neither `result` nor `error`, and is then read as
/// [`JsonRpcRequest`] is read: that is what is done here, without the trials and buffers
/// (measured: ~1.5 µs off a call's ~8 µs from its message to its call).
pub(super) fn request(message: Value) -> Option<JsonRpcRequest<ClientRequest>> {
    let fields = message.as_object()?;
    let shaped = fields.contains_key("method")
        && fields.contains_key("id")
        && !fields.contains_key("result")
        && !fields.contains_key("error");
    if !shaped {
        return None;
    }
    serde_json::from_value(message).ok()
}

/// `request` handled by `conn` in the caller's task (`in_place`: a quiet server) or in a task
/// of its own.
pub(super) async fn run(
    conn: McpConnection,
    request: ClientRequest,
    context: RequestContext<RoleServer>,
    in_place: bool,
) -> Result<ServerResult, rmcp::ErrorData> {
    let call = async move { conn.handle_request(request, context).await };
    if in_place {
        return Detach::new(call).await;
    }
    tokio::spawn(call).await.unwrap_or_else(|e| {
        tracing::error!(error = %e, "a tools/call task failed");
        Err(rmcp::ErrorData::internal_error(
            "the call's task failed; see the server's log",
            None,
        ))
    })
}

/// `answer` as an `application/json` response with `status`.
pub(super) fn json_response(answer: &ServerJsonRpcMessage, status: StatusCode) -> Response<Body> {
    let body = match serde_json::to_vec(answer) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "serializing a call's answer failed");
            let mut failed = Response::new(
                Full::new(Bytes::from_static(
                    b"the call's answer could not be serialized; see the server's log\n",
                ))
                .boxed(),
            );
            *failed.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            return failed;
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// Whether `headers` accept both JSON and an event stream (rmcp answers any other POST 406).
pub(super) fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(hyper::header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let essence = item.split(';').next().unwrap_or("").trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// A call run in place; dropped before it ended, what is left of it runs to its end in a task
/// of its own (cancelled as the request gives it up, see [`Entry`]).
struct Detach<T: Send + 'static> {
    call: Option<Pin<Box<dyn Future<Output = T> + Send>>>,
}

impl<T: Send + 'static> Detach<T> {
    fn new(call: impl Future<Output = T> + Send + 'static) -> Self {
        Detach {
            call: Some(Box::pin(call)),
        }
    }
}

impl<T: Send + 'static> Future for Detach<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        // Awaited once: after its end it is never polled again.
        let Some(call) = self.call.as_mut() else {
            return Poll::Pending;
        };
        let out = call.as_mut().poll(cx);
        if out.is_ready() {
            self.call = None;
        }
        out
    }
}

impl<T: Send + 'static> Drop for Detach<T> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            tokio::spawn(async move {
                let _ = call.await;
            });
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "fast_tests.rs"]
mod tests;
