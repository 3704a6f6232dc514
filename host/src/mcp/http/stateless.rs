//! A 2026-07-28 `tools/call` (stateless: no session) run in the request's own task instead
//! of through rmcp's stateless service.
//!
//! For every stateless request rmcp starts a service loop of its own with a one-message
//! transport, runs the handler in a task of that loop and hands its answer back over a
//! channel: on two cores that moved a call between the runtime's workers several times
//! (measured: `call read` − `server/discover` 315-325 µs, most of it outside the gate call;
//! `docs/benchmarks.md`). Here the call goes through rmcp's own request handling
//! (`Service::handle_request`, so its per-request `_meta` and version checks are rmcp's) in
//! the request's task, and its answer is the JSON body with the HTTP status rmcp would give it.
//!
//! Only requests that rmcp's checks before the handler would surely let through come this
//! way; anything else (even what rmcp would accept) goes to rmcp as before, which answers or
//! refuses it:
//! - `Accept` names both `application/json` and `text/event-stream`;
//! - exactly one `MCP-Protocol-Version` header, `2026-07-28`, and the same version in the
//!   request's `_meta`, with every `_meta` field 2026-07-28 requires present and well formed;
//!   no `progressToken` (progress goes on a stream);
//! - the SEP-2243 headers in their plain form only: exactly one `Mcp-Method: tools/call` and
//!   exactly one `Mcp-Name` equal to the tool's name (a name of plain characters), no
//!   `Mcp-Param-*` header, and a tool whose input schema asks for none (`x-mcp-header`).
//!
//! A client that goes away before the answer cancels the call, as rmcp's would.

use super::fast::accepts_json_and_sse;
use crate::mcp::McpConnection;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::http::request::Parts;
use hyper::{HeaderMap, Response, StatusCode};
use rmcp::model::{
    ClientCapabilities, ClientRequest, ErrorCode, GetExtensions as _, GetMeta as _, Implementation,
    InitializeRequestParams, JsonRpcMessage, ProtocolVersion, ServerJsonRpcMessage,
};
use rmcp::service::{Peer, RequestContext, RoleServer, RunningService};
use rmcp::ServerHandler as _;
use serde_json::Value;
use std::convert::Infallible;

type Body = BoxBody<Bytes, Infallible>;

/// The revision served here.
const MODERN: &str = "2026-07-28";

/// The peer every call here is handled with: a stateless client of 2026-07-28 with nothing
/// declared, as rmcp makes for each stateless request (its requests' own `_meta` says what
/// the client is). Nothing is ever sent through it: what it would send goes nowhere.
pub(super) struct ModernPeer {
    peer: Peer<RoleServer>,
    _running: RunningService<RoleServer, McpConnection>,
}

impl ModernPeer {
    /// A peer served by `conn` over a transport whose other end is read and thrown away.
    pub(super) fn new(conn: McpConnection) -> Self {
        let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut theirs, &mut tokio::io::sink()).await;
        });
        let info =
            InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
                .with_protocol_version(ProtocolVersion::V_2026_07_28);
        let running = rmcp::service::serve_directly(conn, ours, Some(info));
        ModernPeer {
            peer: running.peer().clone(),
            _running: running,
        }
    }
}

/// The sole value of header `name`, if there is exactly one and it is text.
fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok()
}

/// Whether the stateless POST `message` with `headers` is a call this path serves, the tool
/// being looked up through `conn` (see the module's list).
pub(super) fn takes(headers: &HeaderMap, message: &Value, conn: &McpConnection) -> bool {
    if message.get("method").and_then(Value::as_str) != Some("tools/call")
        || message.get("id").is_none()
        || !accepts_json_and_sse(headers)
        || sole(headers, "mcp-protocol-version") != Some(MODERN)
        || sole(headers, "mcp-method") != Some("tools/call")
    {
        return false;
    }
    let Some(name) = message.pointer("/params/name").and_then(Value::as_str) else {
        return false;
    };
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b));
    if !plain || sole(headers, "mcp-name") != Some(name) {
        return false;
    }
    if headers.keys().any(|k| k.as_str().starts_with("mcp-param-")) {
        return false;
    }
    let Some(meta) = message.pointer("/params/_meta").and_then(Value::as_object) else {
        return false;
    };
    if meta.contains_key("progressToken")
        || meta
            .get("io.modelcontextprotocol/protocolVersion")
            .and_then(Value::as_str)
            != Some(MODERN)
    {
        return false;
    }
    // A tool whose schema promotes arguments to headers is rmcp's to check.
    match conn.get_tool(name) {
        Some(tool) => !tool
            .input_schema
            .iter()
            .any(|(k, v)| k == "x-mcp-header" || names_headers(v)),
        None => true,
    }
}

/// Whether a schema says anything about `x-mcp-header` anywhere in it.
fn names_headers(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| k == "x-mcp-header" || names_headers(v)),
        Value::Array(items) => items.iter().any(names_headers),
        _ => false,
    }
}

/// Run the call in `message` (with the request's `parts`) and answer it as rmcp would; the
/// parts back (nothing run) if it does not read as a call whose `_meta` is complete, so rmcp
/// answers it. `in_place`: in the request's own task (a quiet server), else a task of its own.
pub(super) async fn serve(
    conn: McpConnection,
    peer: &ModernPeer,
    message: Value,
    parts: Parts,
    in_place: bool,
) -> Result<Response<Body>, Parts> {
    let Some(r) = super::fast::request(message) else {
        return Err(parts);
    };
    if !matches!(r.request, ClientRequest::CallToolRequest(_))
        || !r
            .request
            .get_meta()
            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
            .is_empty()
    {
        return Err(parts);
    }
    let mut request = r.request;
    request.extensions_mut().insert(parts);
    let mut context = RequestContext::new(r.id.clone(), peer.peer.clone());
    context.meta = std::mem::take(request.get_meta_mut());
    context.extensions = std::mem::take(request.extensions_mut());
    // Cancelled if the request is dropped before its call ended (the client went away).
    let gone = context.ct.clone().drop_guard();
    let result = super::fast::run(conn, request, context, in_place).await;
    gone.disarm();
    let answer: ServerJsonRpcMessage = match result {
        Ok(result) => JsonRpcMessage::response(result, r.id),
        Err(error) => JsonRpcMessage::error(error, Some(r.id)),
    };
    let status = match &answer {
        JsonRpcMessage::Error(e) => match e.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    };
    Ok(super::fast::json_response(&answer, status))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "stateless_tests.rs"]
mod tests;
