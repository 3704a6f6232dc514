//! `toolgate serve`: the gate as an MCP server (SPEC §8), over stdio or streamable HTTP.
//!
//! - **One connection = one session.** Each connection gets a fresh session name
//!   (`mcp-<random>`): its read records, session grants and approval queue belong to it, and
//!   are forgotten when the connection ends. Project grants are shared (they are the project's).
//! - **`tools/list`** is [`Gate::listed_tools`]: each tool's schema and description, with
//!   annotations from its risk (`readOnlyHint` for read-only tools, `destructiveHint` for write
//!   and exec, `openWorldHint` for network). In `safe` mode only read-only tools are listed.
//! - **`notifications/tools/list_changed`** is sent when the visible set changes: checked on
//!   every request and every half second while the connection is open (nothing in MCP changes
//!   the mode; a library user calling [`Gate::set_mode`] on the shared gate is seen by every
//!   connection).
//! - **`tools/call`** runs [`Gate::call_with`]; the observation is the `structuredContent`, and
//!   a text rendering (a header line with status and summary, then the content; reason and hint
//!   on failures) is the `content`. `isError` is true for `error` and `denied`.
//! - **Approvals** go through `elicitation/create` when the client declared the elicitation
//!   capability ([`elicit::ElicitApprover`]); otherwise the gate is headless for that
//!   connection and denies with a hint.
//! - **Cancellation** ends the call, not the id: `notifications/cancelled` sets the call's
//!   cancel flag, which the sandbox checks at every epoch tick (10 ms), so a running guest is
//!   interrupted. A call waiting for an approval has it withdrawn at once: the broker drops the
//!   request (a later answer from any surface is a no-op), the client is sent
//!   `notifications/cancelled` for the elicitation, and the call ends `cancelled` without
//!   running (audited as `cancelled`). On stdio every request is known inside by an id of its
//!   own, so a request reusing a cancelled call's id is answered for itself and never gets (or
//!   revives) the cancelled call's answer.
//! - **Progress**: when the request carries a `progressToken`, a progress notification is sent
//!   every second while the call runs (elapsed seconds; tools report no finer progress yet).
//!
//! - **Bad input on stdio is answered**: a line that is not JSON gets `-32700` (id null), a
//!   batch or a JSON value that is no message gets `-32600` (with its id when it has one), a
//!   line over [`stdio::MAX_LINE`] gets `-32600` with the id read from its first KiB (else
//!   null); the connection goes on. A notification that cannot be read is dropped (JSON-RPC
//!   never answers notifications).
//!
//! **Revisions.** 2026-07-28 is served beside the older ones: a client that opens with
//! `server/discover` gets the supported versions (2026-07-28 down to 2024-11-05); a client that
//! sends `initialize` gets the version it asked for if served, else 2025-11-25. On 2026-07-28
//! there is no handshake and no session: every request carries its version and capabilities
//! in `_meta`, and over HTTP any request may reach any server process (see [`http`]).
//! Differences on 2026-07-28:
//! - approvals are `input_required` results with a signed `requestState` ([`mrtr`]) instead
//!   of `elicitation/create` (that revision forbids server-to-client requests);
//! - a call's toolgate session is its **conversation**: over HTTP derived from the bearer
//!   token and the optional `Toolgate-Conversation` header ([`http::conversation_session`]),
//!   over stdio the connection's own. Read records and session grants are kept under it in the
//!   state database, which every process of the workspace shares, so a read made through one
//!   process lets a write through another;
//! - `tools/list_changed` is not sent (no open connection to send it on).

pub mod elicit;
pub mod http;
pub mod mrtr;
mod private_file;
mod render;
mod token;

pub use render::{annotations, mcp_tool, render, render_text};

use crate::cancel::CancelToken;
use crate::gate::approval::{ApprovalRequest, Approver};
use crate::gate::Gate;
use crate::tools::Observation;
use mrtr::{MrtrApprover, StateKey};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How often a connection checks whether the visible tool set changed.
const LIST_WATCH_INTERVAL: Duration = Duration::from_millis(500);
/// How often progress is reported while a call runs.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// How long a cancelled call may take to notice (the guest is interrupted at the next epoch
/// tick) before it is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Serve MCP on stdin/stdout until the client closes the connection.
pub async fn serve_stdio(gate: Arc<Gate>) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let server = McpConnection::with_state_key(gate, StateKey::process()?);
    let (stdin, stdout) = rmcp::transport::stdio();
    let running = server
        .serve(stdio::LineTransport::new(stdin, stdout))
        .await
        .map_err(|e| anyhow::anyhow!("MCP handshake failed: {e}"))?;
    running.waiting().await?;
    Ok(())
}

/// One MCP connection: a session of the shared gate.
#[derive(Clone)]
pub struct McpConnection {
    inner: Arc<Inner>,
}

struct Inner {
    gate: Arc<Gate>,
    session: String,
    /// The tool names last listed to (or watched for) this client.
    listed: Mutex<Option<Vec<String>>>,
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Signs and opens 2026-07-28 approval states.
    state_key: Arc<StateKey>,
    /// Whether the connection's own session was used (a stateless HTTP request's connection
    /// never uses it, and has nothing to forget).
    used: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.used.load(Ordering::Relaxed) {
            return;
        }
        if let Some(w) = self
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            w.abort();
        }
        // The session ends with its connection: its background jobs, read records and grants go
        // with it.
        self.gate.exec_host().jobs.kill_session(&self.session);
        if let Err(e) = self.gate.state().forget_session(&self.session) {
            tracing::warn!(error = %e, session = %self.session, "forgetting the session failed");
        }
    }
}

impl McpConnection {
    /// A new connection (and session) on `gate`, with the process's request-state key (a
    /// random one if the key file cannot be read: states then open only in this process).
    pub fn new(gate: Arc<Gate>) -> Self {
        let key = StateKey::process().unwrap_or_else(|e| {
            tracing::error!(error = %format!("{e:#}"), "the request-state key file cannot be used; approvals of this connection are signed with a key of its own");
            Arc::new(StateKey::ephemeral())
        });
        Self::with_state_key(gate, key)
    }

    /// A new connection (and session) on `gate`, signing approval states with `key`.
    pub fn with_state_key(gate: Arc<Gate>, key: Arc<StateKey>) -> Self {
        McpConnection {
            inner: Arc::new(Inner {
                gate,
                session: new_session_name(),
                listed: Mutex::new(None),
                watcher: Mutex::new(None),
                state_key: key,
                used: AtomicBool::new(false),
            }),
        }
    }

    /// The connection's own session, marked used.
    fn own_session(&self) -> String {
        self.inner.used.store(true, Ordering::Relaxed);
        self.inner.session.clone()
    }

    /// The toolgate session of a 2026-07-28 request: its conversation's (set by the HTTP
    /// layer), else (stdio) this connection's.
    fn conversation(&self, context: &RequestContext<RoleServer>) -> String {
        context
            .extensions
            .get::<hyper::http::request::Parts>()
            .and_then(|p| p.headers.get(http::INTERNAL_CONVERSATION_HEADER))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .unwrap_or_else(|| self.own_session())
    }

    /// This connection's session name.
    pub fn session(&self) -> &str {
        &self.inner.session
    }

    fn visible_names(&self) -> Vec<String> {
        self.inner
            .gate
            .visible_tools()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// Remember `names` as what the client knows; true when it differs from before.
    fn note_listed(&self, names: Vec<String>) -> bool {
        let mut listed = self.inner.listed.lock().unwrap_or_else(|p| p.into_inner());
        let changed = listed.as_ref().is_some_and(|old| *old != names);
        *listed = Some(names);
        changed
    }

    /// Send `tools/list_changed` if the visible set changed since the client last saw it.
    async fn check_list_changed(&self, peer: &Peer<RoleServer>) {
        if self.note_listed(self.visible_names()) {
            if let Err(e) = peer.notify_tool_list_changed().await {
                tracing::debug!(error = %e, "sending tools/list_changed failed");
            }
        }
    }

    fn start_watcher(&self, peer: Peer<RoleServer>) {
        // A weak handle, so the watcher does not keep a closed connection's session alive.
        let weak = Arc::downgrade(&self.inner);
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(LIST_WATCH_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let conn = McpConnection { inner };
                if peer.is_transport_closed() {
                    return;
                }
                conn.check_list_changed(&peer).await;
            }
        });
        let mut watcher = self.inner.watcher.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = watcher.replace(task) {
            old.abort();
        }
    }

    /// A 2025-11-25 (or older) call: approvals through `elicitation/create`.
    async fn run_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let peer = context.peer.clone();
        let elicits = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some());
        // One approver per call: its approvals belong to this call, whatever id the client
        // gave the request.
        let elicit = elicits.then(|| {
            let ct = context.ct.clone();
            Arc::new(
                elicit::ElicitApprover::new(peer.clone()).with_cancelled(move || ct.is_cancelled()),
            )
        });
        let approver = elicit.clone().map(|a| a as Arc<dyn Approver>);
        let session = self.own_session();
        let (observation, _) = self
            .drive(
                &session,
                &request.name,
                input,
                approver,
                elicit,
                None,
                &context,
            )
            .await;
        render(&observation)
    }

    /// A 2026-07-28 call: approvals through `input_required` rounds, in the request's
    /// conversation.
    async fn run_modern_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let session = self.conversation(&context);
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let key = &self.inner.state_key;
        let granted = match &request.request_state {
            None => None,
            Some(sealed) => {
                let state = key
                    .open(sealed, &request.name, &input, &session)
                    .map_err(|e| {
                        tracing::warn!(tool = %request.name, reason = ?e, "refused a requestState");
                        McpError::invalid_params(e.to_string(), None)
                    })?;
                let answer = request
                    .input_responses
                    .as_ref()
                    .and_then(mrtr::answer_from)
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            format!("the retry carries requestState but no inputResponses.{}: answer the approval request and send its result under that key", mrtr::APPROVAL_INPUT),
                            None,
                        )
                    })?;
                if !key.mark_used(&state) {
                    return Err(McpError::invalid_params(
                        mrtr::StateRejected::Used.to_string(),
                        None,
                    ));
                }
                // Single use across every process serving this workspace, not only this one.
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                match self
                    .inner
                    .gate
                    .state()
                    .use_state_once(&state.nonce, state.expires, now)
                {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(McpError::invalid_params(
                            mrtr::StateRejected::Used.to_string(),
                            None,
                        ))
                    }
                    Err(e) => {
                        return Err(McpError::internal_error(
                            format!(
                            "could not record that this approval was used, so it is not run: {e}"
                        ),
                            None,
                        ))
                    }
                }
                Some((state, answer))
            }
        };
        let elicits = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let (approver, asked) = if elicits || granted.is_some() {
            let (a, rx) = MrtrApprover::new(granted);
            (Some(a as Arc<dyn Approver>), Some(rx))
        } else {
            (None, None)
        };
        let (observation, question) = self
            .drive(
                &session,
                &request.name,
                input.clone(),
                approver,
                None,
                asked,
                &context,
            )
            .await;
        let Some(question) = question else {
            return Ok(render(&observation).into());
        };
        let state = mrtr::ApprovalState::new(&question, &request.name, &input, &session);
        let result = mrtr::input_required(&question, key.seal(&state)).map_err(|e| {
            McpError::internal_error(format!("building the approval request failed: {e}"), None)
        })?;
        Ok(CallToolResponse::InputRequired(result))
    }

    /// Run one call of the gate with cancellation and progress. With `asked`, a question
    /// handed out by the approver withdraws the call and is returned (the call did not run).
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        &self,
        session: &str,
        name: &str,
        input: Value,
        approver: Option<Arc<dyn Approver>>,
        elicit: Option<Arc<elicit::ElicitApprover>>,
        asked: Option<oneshot::Receiver<ApprovalRequest>>,
        context: &RequestContext<RoleServer>,
    ) -> (Observation, Option<ApprovalRequest>) {
        let gate = &self.inner.gate;
        let peer = context.peer.clone();
        let cancel = CancelToken::new();
        let call = gate.call_cancellable(session, name, input, approver, cancel.clone());
        tokio::pin!(call);
        let mut listening = asked.is_some();
        let mut asked = asked;
        let mut question: Option<ApprovalRequest> = None;

        let progress_token = context.meta.get_progress_token();
        let started = Instant::now();
        // The first tick a second from now. (`interval` ticks at once, but awaiting that tick
        // still waits for the timer wheel's next millisecond: ~1 ms on every call, measured.)
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + PROGRESS_INTERVAL,
            PROGRESS_INTERVAL,
        );
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut cancelled_at: Option<Instant> = None;
        let observation = loop {
            tokio::select! {
                // The cancellation first: an approval answered after it was sent approves
                // nothing, even when both are ready at once.
                biased;
                _ = context.ct.cancelled(), if cancelled_at.is_none() => {
                    cancel.cancel();
                    cancelled_at = Some(Instant::now());
                    // Withdraw its pending approval at once: the elicitation is cancelled at
                    // the client, and any answer from any surface finds nothing to approve.
                    if let Some(elicit) = &elicit {
                        for id in elicit.void() {
                            gate.broker().withdraw(&id);
                        }
                    }
                }
                q = async {
                    match asked.as_mut() {
                        Some(rx) => rx.await.ok(),
                        None => std::future::pending().await,
                    }
                }, if listening => {
                    listening = false;
                    asked = None;
                    // The question goes to the client: the call is withdrawn (nothing runs)
                    // and ends at the broker's next look at its cancel flag.
                    if let Some(q) = q {
                        cancel.cancel();
                        cancelled_at.get_or_insert_with(Instant::now);
                        gate.broker().withdraw(&q.id);
                        question = Some(q);
                    }
                }
                observation = &mut call => break Some(observation),
                _ = tick.tick() => {
                    if cancelled_at.is_some_and(|at| at.elapsed() >= CANCEL_GRACE) {
                        break None;
                    }
                    if let (Some(token), None) = (&progress_token, cancelled_at) {
                        let secs = started.elapsed().as_secs_f64().floor();
                        let note = ProgressNotificationParam::new(token.clone(), secs)
                            .with_message(format!("{name} running for {secs} s"));
                        if let Err(e) = peer.notify_progress(note).await {
                            tracing::debug!(error = %e, "sending progress failed");
                        }
                    }
                }
            }
        };
        let observation = observation.unwrap_or_else(|| {
            Observation::error(
                name,
                "",
                "cancelled",
                "the client cancelled the call".into(),
                None,
            )
        });
        (observation, question)
    }
}

impl ServerHandler for McpConnection {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let mut implementation = Implementation::new("toolgate", env!("CARGO_PKG_VERSION"));
        implementation.title = Some("toolgate".into());
        ServerConfig::new(capabilities)
            .with_server_info(implementation)
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_instructions(format!(
                "Tools of the workspace {}, each call checked by toolgate's permission gate and run in a WebAssembly sandbox. A denied call's result says why and what would allow it; do not retry it unchanged.",
                self.inner.gate.workspace().root().display()
            ))
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.inner.used.store(true, Ordering::Relaxed);
        self.note_listed(self.visible_names());
        self.start_watcher(context.peer.clone());
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools: Vec<Tool> = self
            .inner
            .gate
            .listed_tools()
            .iter()
            .map(mcp_tool)
            .collect();
        self.note_listed(tools.iter().map(|t| t.name.to_string()).collect());
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let gate = &self.inner.gate;
        let tool = gate.visible_tools().into_iter().find(|t| t.name == name)?;
        Some(mcp_tool(&gate.described(tool)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if is_modern(&context) {
            return self.run_modern_call(request, context).await;
        }
        if request.request_state.is_some() || request.input_responses.is_some() {
            return Err(McpError::invalid_params(
                "requestState and inputResponses are for protocol 2026-07-28; this session negotiated an older version, whose approvals come as elicitation requests",
                None,
            ));
        }
        self.check_list_changed(&context.peer).await;
        Ok(self.run_call(request, context).await.into())
    }
}

/// Whether the request speaks 2026-07-28 (or later).
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

fn new_session_name() -> String {
    crate::gate::unique_id("mcp")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tools::Risk;

    #[test]
    fn annotations_follow_risk() {
        let r = annotations(Risk::ReadOnly);
        assert_eq!(
            (r.read_only_hint, r.destructive_hint, r.open_world_hint),
            (Some(true), Some(false), Some(false))
        );
        let w = annotations(Risk::Write);
        assert_eq!(
            (w.read_only_hint, w.destructive_hint),
            (Some(false), Some(true))
        );
        assert_eq!(annotations(Risk::Exec).destructive_hint, Some(true));
        assert_eq!(annotations(Risk::Network).open_world_hint, Some(true));
    }

    #[test]
    fn denial_text_has_header_reason_and_hint() {
        let o = Observation::denied(
            "write",
            "call-1",
            "ask",
            "`write:./` needs approval".into(),
            "use --grant".into(),
        );
        let r = render(&o);
        assert_eq!(r.is_error, Some(true));
        let text = render_text(&o);
        assert!(text.starts_with("[write denied at ask] denied: "), "{text}");
        assert!(text.contains("`write:./` needs approval"));
        assert!(text.contains("use --grant"));
        assert_eq!(r.structured_content.unwrap()["status"], "denied");
    }

    #[test]
    fn session_names_differ() {
        assert_ne!(new_session_name(), new_session_name());
        assert!(new_session_name().starts_with("mcp-"));
    }
}

/// The stdio transport: one JSON-RPC message a line, and every line that is not one answered
/// (rmcp's own drops unparsable and oversized lines silently, so their ids never get an
/// answer). Answers to bad lines go through the same writer as rmcp's messages, one whole line
/// at a time, so the two never interleave.
mod stdio {
    use rmcp::model::{ClientNotification, JsonRpcMessage, NumberOrString, RequestId};
    use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
    use rmcp::transport::Transport;
    use serde_json::{json, Value};
    use std::collections::HashMap;
    use std::sync::Arc;
    use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
    use tokio::sync::Mutex;
    use tokio::task::JoinHandle;

    /// The longest line read (one message); rmcp's cap, which matches its HTTP client's.
    pub const MAX_LINE: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

    /// How much of an oversized line is kept to find its id in.
    const ID_PREFIX: usize = 8 * 1024;

    const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

    pub struct LineTransport<R, W> {
        read: BufReader<R>,
        /// The line read so far (kept across cancelled `receive` calls).
        line: Vec<u8>,
        /// Skipping the rest of an oversized line (already answered).
        discarding: bool,
        write: Arc<Mutex<W>>,
        /// Answers to bad lines still being written.
        answering: Vec<JoinHandle<()>>,
        ids: Ids,
    }

    /// The client's request ids, each replaced inside by one of our own (`toolgate-<n>`, never
    /// reused): rmcp keys in-flight requests by id, so without this a request that reuses a
    /// cancelled call's id would be answered with that call's late answer (or lose its own).
    /// A cancellation names the latest request with that id; answers get the client's id back.
    #[derive(Default)]
    pub(super) struct Ids {
        next: u64,
        /// Our id -> the client's, for requests not yet answered.
        client: HashMap<Arc<str>, RequestId>,
        /// The client's id -> ours, for the latest request in flight with that id.
        ours: HashMap<RequestId, Arc<str>>,
    }

    impl Ids {
        /// A message from the client as rmcp gets it; `None`: drop it (a cancellation of no
        /// request in flight).
        pub(super) fn inbound(
            &mut self,
            mut m: RxJsonRpcMessage<RoleServer>,
        ) -> Option<RxJsonRpcMessage<RoleServer>> {
            match &mut m {
                JsonRpcMessage::Request(r) => {
                    self.next += 1;
                    let ours: Arc<str> = format!("toolgate-{}", self.next).into();
                    let theirs = std::mem::replace(&mut r.id, NumberOrString::String(ours.clone()));
                    self.client.insert(ours.clone(), theirs.clone());
                    self.ours.insert(theirs, ours);
                }
                JsonRpcMessage::Notification(n) => {
                    if let ClientNotification::CancelledNotification(c) = &mut n.notification {
                        let theirs = c.params.request_id.take()?;
                        // The cancelled call is unreachable by its id from now on: its answer
                        // is dropped, and a new request with the id is a new call.
                        let ours = self.ours.remove(&theirs)?;
                        self.client.remove(&ours);
                        c.params.request_id = Some(NumberOrString::String(ours));
                    }
                }
                JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
            }
            Some(m)
        }

        /// A message to the client; `None`: drop it (an answer to no request in flight).
        pub(super) fn outbound(
            &mut self,
            mut m: TxJsonRpcMessage<RoleServer>,
        ) -> Option<TxJsonRpcMessage<RoleServer>> {
            let id = match &mut m {
                JsonRpcMessage::Response(r) => &mut r.id,
                JsonRpcMessage::Error(e) => match &mut e.id {
                    Some(id) => id,
                    None => return Some(m),
                },
                JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => return Some(m),
            };
            let NumberOrString::String(ours) = &*id else {
                tracing::debug!(%id, "dropping an answer to an id no client request has");
                return None;
            };
            let Some(theirs) = self.client.remove(ours) else {
                tracing::debug!(%id, "dropping an answer to a request no longer in flight");
                return None;
            };
            if self.ours.get(&theirs) == Some(ours) {
                self.ours.remove(&theirs);
            }
            *id = theirs;
            Some(m)
        }
    }

    impl<R, W> LineTransport<R, W>
    where
        R: AsyncRead + Send + Unpin,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        pub fn new(read: R, write: W) -> Self {
            LineTransport {
                read: BufReader::new(read),
                line: Vec::new(),
                discarding: false,
                write: Arc::new(Mutex::new(write)),
                answering: Vec::new(),
                ids: Ids::default(),
            }
        }

        /// Write an error answer for a bad line, in its own task so a cancelled `receive`
        /// cannot leave half a line written.
        fn answer(&mut self, id: Value, code: i64, message: String) {
            tracing::debug!(code, %message, "answering a bad line on stdio");
            let body = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": code, "message": message},
            });
            let mut bytes = body.to_string().into_bytes();
            bytes.push(b'\n');
            let write = self.write.clone();
            self.answering.retain(|h| !h.is_finished());
            self.answering.push(tokio::spawn(async move {
                let _ = write_line(&write, &bytes).await;
            }));
        }

        /// Read until a whole line is in `self.line` (true) or the input ends (false). An
        /// oversized line is answered here and skipped.
        async fn read_line(&mut self) -> std::io::Result<bool> {
            loop {
                let available = self.read.fill_buf().await?;
                if available.is_empty() {
                    return Ok(false);
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let take = newline.map_or(available.len(), |i| i + 1);
                if self.discarding {
                    self.read.consume(take);
                    if newline.is_some() {
                        self.discarding = false;
                    }
                    continue;
                }
                if self.line.len() + take > MAX_LINE + 1 {
                    let mut start = std::mem::take(&mut self.line);
                    start.truncate(ID_PREFIX);
                    let more = ID_PREFIX.saturating_sub(start.len()).min(take);
                    start.extend_from_slice(&available[..more]);
                    self.read.consume(take);
                    self.discarding = newline.is_none();
                    let id = leading_id(&start);
                    self.answer(
                        id,
                        -32600,
                        format!(
                            "Invalid Request: the message is over {} MiB, the most one line may hold; it was not read",
                            MAX_LINE >> 20
                        ),
                    );
                    continue;
                }
                self.line.extend_from_slice(&available[..take]);
                self.read.consume(take);
                if newline.is_some() {
                    return Ok(true);
                }
            }
        }
    }

    async fn write_line<W: AsyncWrite + Unpin>(
        write: &Mutex<W>,
        bytes: &[u8],
    ) -> std::io::Result<()> {
        let mut w = write.lock().await;
        w.write_all(bytes).await?;
        w.flush().await
    }

    /// What a whole line is.
    enum Line {
        Message(Box<RxJsonRpcMessage<RoleServer>>),
        Skip,
        Bad(Value, i64, String),
    }

    fn parse(line: &[u8]) -> Line {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Line::Skip;
        }
        let value: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => return Line::Bad(Value::Null, -32700, format!("Parse error: {e}")),
        };
        if value.is_array() {
            return Line::Bad(
                Value::Null,
                -32600,
                "Invalid Request: batches are not supported (MCP 2025-06-18 removed JSON-RPC batching); send one message a line".into(),
            );
        }
        let id = value
            .get("id")
            .filter(|id| id.is_string() || id.is_number())
            .cloned();
        let is_notification = value.get("method").is_some() && value.get("id").is_none();
        match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
            Ok(m) => Line::Message(Box::new(m)),
            // JSON-RPC never answers a notification; rmcp drops unknown ones too.
            Err(e) if is_notification => {
                tracing::debug!(error = %e, "dropping a notification that cannot be read");
                Line::Skip
            }
            Err(e) => Line::Bad(
                id.unwrap_or(Value::Null),
                -32600,
                format!("Invalid Request: {e}"),
            ),
        }
    }

    impl<R, W> Transport<RoleServer> for LineTransport<R, W>
    where
        R: AsyncRead + Send + Unpin,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        type Error = std::io::Error;

        fn send(
            &mut self,
            item: TxJsonRpcMessage<RoleServer>,
        ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
            let write = self.write.clone();
            let item = self.ids.outbound(item);
            async move {
                let Some(item) = item else { return Ok(()) };
                let mut bytes = serde_json::to_vec(&item)?;
                bytes.push(b'\n');
                write_line(&write, &bytes).await
            }
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
            loop {
                match self.read_line().await {
                    Ok(true) => {}
                    Ok(false) => {
                        // Let the answers to the last bad lines reach the client first.
                        for h in std::mem::take(&mut self.answering) {
                            let _ = h.await;
                        }
                        return None;
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "reading stdin failed");
                        return None;
                    }
                }
                let parsed = parse(&self.line);
                self.line.clear();
                match parsed {
                    Line::Message(m) => {
                        if let Some(m) = self.ids.inbound(*m) {
                            return Some(m);
                        }
                    }
                    Line::Skip => {}
                    Line::Bad(id, code, message) => self.answer(id, code, message),
                }
            }
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            self.write.lock().await.flush().await
        }
    }

    fn skip_ws(b: &[u8], mut i: usize) -> usize {
        while b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    }

    /// The index just past the string starting at `b[i]` (a `"`), if it ends in `b`.
    fn string_end(b: &[u8], i: usize) -> Option<usize> {
        let mut j = i + 1;
        while j < b.len() {
            match b[j] {
                b'\\' => j += 2,
                b'"' => return Some(j + 1),
                _ => j += 1,
            }
        }
        None
    }

    /// The index just past the JSON value starting at `b[i]`, if it ends in `b`.
    fn value_end(b: &[u8], i: usize) -> Option<usize> {
        match *b.get(i)? {
            b'"' => string_end(b, i),
            b'{' | b'[' => {
                let mut depth = 0usize;
                let mut j = i;
                while j < b.len() {
                    match b[j] {
                        b'"' => {
                            j = string_end(b, j)?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                return Some(j + 1);
                            }
                        }
                        _ => {}
                    }
                    j += 1;
                }
                None
            }
            _ => {
                let j = (i..b.len())
                    .find(|&j| matches!(b[j], b',' | b'}' | b']') || b[j].is_ascii_whitespace())?;
                Some(j)
            }
        }
    }

    /// The top-level `"id"` of the message that starts with `start`, if it is a string or a
    /// number and lies whole in `start`; a nested `"id"` (in `params`) is not taken for it.
    pub(super) fn leading_id(start: &[u8]) -> Value {
        let b = start.strip_prefix(UTF8_BOM).unwrap_or(start);
        let mut i = skip_ws(b, 0);
        if b.get(i) != Some(&b'{') {
            return Value::Null;
        }
        i += 1;
        loop {
            i = skip_ws(b, i);
            if b.get(i) != Some(&b'"') {
                return Value::Null;
            }
            let Some(key_end) = string_end(b, i) else {
                return Value::Null;
            };
            let key = &b[i..key_end];
            i = skip_ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return Value::Null;
            }
            i = skip_ws(b, i + 1);
            let Some(end) = value_end(b, i) else {
                return Value::Null;
            };
            if key == b"\"id\"" {
                return match serde_json::from_slice::<Value>(&b[i..end]) {
                    Ok(v) if v.is_string() || v.is_number() => v,
                    _ => Value::Null,
                };
            }
            i = skip_ws(b, end);
            if b.get(i) != Some(&b',') {
                return Value::Null;
            }
            i += 1;
        }
    }

    #[cfg(test)]
    #[allow(clippy::unwrap_used)]
    mod tests {
        use super::*;

        #[test]
        fn the_top_level_id_is_found_in_a_line_start() {
            let id = |s: &str| leading_id(s.as_bytes());
            assert_eq!(
                id(r#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"#),
                json!(7)
            );
            assert_eq!(id(r#"{ "id" : "a\"b", "method""#), json!("a\"b"));
            assert_eq!(
                id(r#"{"params":{"id":3,"s":"}\"{"},"id":-4,"p":"aaa"#),
                json!(-4)
            );
            assert_eq!(
                id(r#"{"method":"x","params":{"id":3,"path":"aaaa"#),
                Value::Null
            );
            assert_eq!(id(r#"{"jsonrpc":"2.0","id":12"#), Value::Null, "maybe 123");
            assert_eq!(id(r#"{"id":null,"#), Value::Null);
            assert_eq!(id(r#"[{"id":1}"#), Value::Null);
        }

        fn rx(v: Value) -> RxJsonRpcMessage<RoleServer> {
            serde_json::from_value(v).unwrap()
        }

        fn answer(id: &Value) -> TxJsonRpcMessage<RoleServer> {
            serde_json::from_value(json!({"jsonrpc":"2.0","id":id,"result":{}})).unwrap()
        }

        fn id_of<T: serde::Serialize>(m: &T) -> Value {
            let v = serde_json::to_value(m).unwrap();
            if v.get("method") == Some(&json!("notifications/cancelled")) {
                return v["params"]["requestId"].clone();
            }
            v["id"].clone()
        }

        #[test]
        fn a_reused_id_is_a_new_request_and_the_cancelled_one_stays_cancelled() {
            let mut ids = Ids::default();
            let call = ids
                .inbound(rx(json!({"jsonrpc":"2.0","id":5,"method":"ping"})))
                .unwrap();
            let first = id_of(&call);
            assert_ne!(first, json!(5));
            let cancel = ids
                .inbound(rx(
                    json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                    "params":{"requestId":5}}),
                ))
                .unwrap();
            assert_eq!(id_of(&cancel), first, "the cancellation names our id");
            let again = ids
                .inbound(rx(json!({"jsonrpc":"2.0","id":5,"method":"ping"})))
                .unwrap();
            let second = id_of(&again);
            assert_ne!(second, first);
            // The cancelled call's late answer goes nowhere; the new request's gets id 5.
            assert!(ids.outbound(answer(&first)).is_none());
            assert_eq!(id_of(&ids.outbound(answer(&second)).unwrap()), json!(5));
            assert!(ids.outbound(answer(&second)).is_none(), "answered once");
            // A cancellation of nothing in flight (or of one of our own ids) is dropped.
            assert!(ids
                .inbound(rx(
                    json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                    "params":{"requestId":5}})
                ))
                .is_none());
            assert!(ids
                .inbound(rx(
                    json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                    "params":{"requestId":second}})
                ))
                .is_none());
            // String ids come back as strings.
            let s = ids
                .inbound(rx(json!({"jsonrpc":"2.0","id":"a","method":"ping"})))
                .unwrap();
            assert_eq!(
                id_of(&ids.outbound(answer(&id_of(&s))).unwrap()),
                json!("a")
            );
            assert!(ids.client.is_empty() && ids.ours.is_empty());
        }

        #[test]
        fn bad_lines_are_told_apart() {
            assert!(matches!(
                parse(b"{\"a\":\n"),
                Line::Bad(Value::Null, -32700, _)
            ));
            assert!(matches!(parse(b"[]\n"), Line::Bad(Value::Null, -32600, _)));
            assert!(matches!(
                parse(b"{\"id\":2}\n"),
                Line::Bad(Value::Number(_), -32600, _)
            ));
            assert!(matches!(
                parse(b"{\"jsonrpc\":\"2.0\",\"method\":\"x/y\"}\n"),
                Line::Skip | Line::Message(_)
            ));
            assert!(matches!(parse(b" \r\n"), Line::Skip));
        }
    }
}
