//! `toolgate serve`: the gate as an MCP server, over stdio or streamable HTTP.
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
//! - **Stdio calls skip rmcp's loop**: once initialized, the stdio transport runs each
//!   `tools/call` in one task of its own through rmcp's request handling (`stdio_calls`),
//!   which saves the loop's task switches (~40 µs a call); cancellation and ids behave as above.
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

mod calls;
pub mod elicit;
pub mod http;
pub mod mrtr;
mod private_file;
mod render;
mod stdio;
mod stdio_calls;
mod stdio_fd;
mod token;

pub use render::{annotations, mcp_tool, render, render_text};

use crate::gate::Gate;
use mrtr::StateKey;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a connection checks whether the visible tool set changed.
const LIST_WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// Serve MCP on stdin/stdout until the client closes the connection.
pub async fn serve_stdio(gate: Arc<Gate>) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    gate.run_scans_apart();
    let server = McpConnection::with_state_key(gate, StateKey::process()?);
    let (stdin, stdout) = stdio_fd::stdio();
    let transport = stdio::LineTransport::new(stdin, stdout).with_calls(server.clone());
    let running = server
        .serve(transport)
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
    /// The client, once it said it is initialized.
    peer: std::sync::OnceLock<Peer<RoleServer>>,
    /// The client, once it asked to initialize (its capabilities known).
    handshake: std::sync::OnceLock<Peer<RoleServer>>,
    /// The tools' MCP forms, shared by every connection of one server.
    forms: Arc<render::ToolForms>,
}

/// A connection that may have ended: see [`McpConnection::downgrade`].
#[derive(Clone)]
pub(crate) struct WeakConnection(std::sync::Weak<Inner>);

impl WeakConnection {
    /// The connection, if it is still alive.
    pub(crate) fn upgrade(&self) -> Option<McpConnection> {
        self.0.upgrade().map(|inner| McpConnection { inner })
    }
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
        Self::with_forms(gate, key, Arc::default())
    }

    /// [`Self::with_state_key`], sharing the tools' MCP forms made by the server's other
    /// connections (each stateless HTTP request is a connection of its own).
    pub(crate) fn with_forms(
        gate: Arc<Gate>,
        key: Arc<StateKey>,
        forms: Arc<render::ToolForms>,
    ) -> Self {
        Self::owned(gate, key, forms, None)
    }

    /// [`Self::with_forms`], for the client whose token has owner tag `owner` (over HTTP): the
    /// session's name carries the tag (`mcp-TAG-…`), so the console shows the session to that
    /// token and the person's only ([`crate::gate::approval::session_owner`]).
    pub(crate) fn owned(
        gate: Arc<Gate>,
        key: Arc<StateKey>,
        forms: Arc<render::ToolForms>,
        owner: Option<&str>,
    ) -> Self {
        let session = match owner {
            Some(tag) => crate::gate::unique_id(&format!("mcp-{tag}")),
            None => new_session_name(),
        };
        McpConnection {
            inner: Arc::new(Inner {
                gate,
                session,
                listed: Mutex::new(None),
                watcher: Mutex::new(None),
                state_key: key,
                used: AtomicBool::new(false),
                peer: std::sync::OnceLock::new(),
                handshake: std::sync::OnceLock::new(),
                forms,
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

    /// A handle on this connection that does not keep it (or its session) alive.
    pub(crate) fn downgrade(&self) -> WeakConnection {
        WeakConnection(Arc::downgrade(&self.inner))
    }

    /// The client, once it sent `notifications/initialized`.
    fn initialized_peer(&self) -> Option<Peer<RoleServer>> {
        self.inner.peer.get().cloned()
    }

    /// The client once it asked to initialize: an HTTP session's requests may come before
    /// rmcp has run `on_initialized` for the notification it already accepted.
    fn handshake_peer(&self) -> Option<Peer<RoleServer>> {
        self.inner.handshake.get().cloned()
    }

    /// The server answered: see [`Gate::idle`].
    pub(super) async fn idle(&self) {
        self.inner.gate.idle().await;
    }

    /// This connection's session name.
    pub fn session(&self) -> &str {
        &self.inner.session
    }

    /// Remember `names` as what the client knows; true when it differs from before.
    fn note_listed(&self, names: Vec<String>) -> bool {
        let mut listed = self.inner.listed.lock().unwrap_or_else(|p| p.into_inner());
        let changed = listed.as_ref().is_some_and(|old| *old != names);
        *listed = Some(names);
        changed
    }

    /// Whether the visible set differs from what the client last saw (remembering it if so).
    /// Asked before every call: the names are compared where they are, and copied only
    /// when they changed.
    fn list_changed(&self) -> bool {
        let tools = self.inner.gate.visible_tools();
        {
            let listed = self.inner.listed.lock().unwrap_or_else(|p| p.into_inner());
            let same = listed.as_ref().is_some_and(|old| {
                old.len() == tools.len() && old.iter().zip(&tools).all(|(o, t)| *o == t.name)
            });
            if same {
                return false;
            }
        }
        self.note_listed(tools.iter().map(|t| t.name.clone()).collect())
    }

    /// Send `tools/list_changed` if the visible set changed since the client last saw it.
    async fn check_list_changed(&self, peer: &Peer<RoleServer>) {
        if self.list_changed() {
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
        let _ = self.inner.handshake.set(context.peer.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.inner.used.store(true, Ordering::Relaxed);
        let _ = self.inner.peer.set(context.peer.clone());
        self.note_listed(self.inner.gate.visible_names());
        self.start_watcher(context.peer.clone());
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let gate = &self.inner.gate;
        let tools: Vec<Tool> = gate
            .visible_tools()
            .into_iter()
            .map(|t| self.inner.forms.get(gate, t))
            .collect();
        self.note_listed(tools.iter().map(|t| t.name.to_string()).collect());
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let gate = &self.inner.gate;
        let tool = gate.visible_tools().into_iter().find(|t| t.name == name)?;
        Some(self.inner.forms.get(gate, tool))
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
#[path = "mod_tests.rs"]
mod tests;
