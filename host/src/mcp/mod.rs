//! `toolgate serve`: the gate as an MCP server (SPEC §8), over stdio or streamable HTTP.
//!
//! - **One connection = one session.** Each connection gets a fresh session name
//!   (`mcp-<random>`): its read records, session grants and approval queue belong to it, and
//!   are forgotten when the connection ends. Project grants are shared (they are the project's).
//! - **`tools/list`** is [`Gate::visible_tools`]: each tool's schema and description, with
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
//! - **Cancellation**: `notifications/cancelled` sets the call's cancel flag, which the sandbox
//!   checks at every epoch tick (10 ms), so a running guest is interrupted; a call waiting for an
//!   approval is dropped (its request then expires unanswered).
//! - **Progress**: when the request carries a `progressToken`, a progress notification is sent
//!   every second while the call runs (elapsed seconds; tools report no finer progress yet).
//!
//! Protocol versions up to 2025-11-25 are served (the ones with an `initialize` handshake and
//! sessions); the stateless 2026-07-28 revision forbids server-to-client requests, which the
//! approval flow needs, so a client offering only that revision is refused at negotiation.

pub mod elicit;
pub mod http;

use crate::gate::approval::Approver;
use crate::gate::Gate;
use crate::tools::{Observation, Risk, Status, ToolInfo};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    let server = McpConnection::new(gate);
    let running = server
        .serve(rmcp::transport::stdio())
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
}

impl Drop for Inner {
    fn drop(&mut self) {
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
    /// A new connection (and session) on `gate`.
    pub fn new(gate: Arc<Gate>) -> Self {
        McpConnection {
            inner: Arc::new(Inner {
                gate,
                session: new_session_name(),
                listed: Mutex::new(None),
                watcher: Mutex::new(None),
            }),
        }
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

    async fn run_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let gate = &self.inner.gate;
        let input = Value::Object(request.arguments.unwrap_or_default());
        let peer = context.peer.clone();
        let elicits = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some());
        let approver: Option<Arc<dyn Approver>> = if elicits {
            Some(Arc::new(elicit::ElicitApprover::new(peer.clone())))
        } else {
            None
        };
        let cancel = Arc::new(AtomicBool::new(false));
        let call = crate::sandbox::cancellable(
            cancel.clone(),
            gate.call_with(&self.inner.session, &request.name, input, approver),
        );
        tokio::pin!(call);

        let progress_token = context.meta.get_progress_token();
        let started = Instant::now();
        let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        let mut cancelled_at: Option<Instant> = None;
        let observation = loop {
            tokio::select! {
                observation = &mut call => break Some(observation),
                _ = context.ct.cancelled(), if cancelled_at.is_none() => {
                    cancel.store(true, Ordering::SeqCst);
                    cancelled_at = Some(Instant::now());
                }
                _ = tick.tick() => {
                    if cancelled_at.is_some_and(|at| at.elapsed() >= CANCEL_GRACE) {
                        break None;
                    }
                    if let (Some(token), None) = (&progress_token, cancelled_at) {
                        let secs = started.elapsed().as_secs_f64().floor();
                        let note = ProgressNotificationParam::new(token.clone(), secs)
                            .with_message(format!("{} running for {secs} s", request.name));
                        if let Err(e) = peer.notify_progress(note).await {
                            tracing::debug!(error = %e, "sending progress failed");
                        }
                    }
                }
            }
        };
        match observation {
            Some(o) => render(&o),
            None => {
                let o = Observation::error(
                    &request.name,
                    "",
                    "cancelled",
                    "the client cancelled the call".into(),
                    None,
                );
                render(&o)
            }
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
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
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
            .visible_tools()
            .into_iter()
            .map(mcp_tool)
            .collect();
        self.note_listed(tools.iter().map(|t| t.name.to_string()).collect());
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.inner
            .gate
            .visible_tools()
            .into_iter()
            .find(|t| t.name == name)
            .map(mcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.check_list_changed(&context.peer).await;
        Ok(self.run_call(request, context).await.into())
    }
}

/// A registry tool as MCP lists it.
pub fn mcp_tool(info: &ToolInfo) -> Tool {
    let schema: JsonObject = match &info.input_schema {
        Value::Object(map) => map.clone(),
        _ => JsonObject::new(),
    };
    let mut tool = Tool::new(info.name.clone(), info.description.clone(), schema);
    tool.annotations = Some(annotations(info.risk));
    tool
}

/// Annotations derived from a tool's risk.
pub fn annotations(risk: Risk) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(risk == Risk::ReadOnly)
        .destructive(matches!(risk, Risk::Write | Risk::Exec))
        .open_world(risk == Risk::Network)
}

/// The observation as an MCP result: the observation itself as `structuredContent`, and the
/// text the model reads as `content`.
pub fn render(o: &Observation) -> CallToolResult {
    let structured = serde_json::to_value(o).unwrap_or(Value::Null);
    let mut result = if matches!(o.status, Status::Error | Status::Denied) {
        CallToolResult::error(vec![ContentBlock::text(render_text(o))])
    } else {
        CallToolResult::success(vec![ContentBlock::text(render_text(o))])
    };
    result.structured_content = Some(structured);
    result
}

/// The text rendering: `[tool status] summary`, then the content, then (when the content does
/// not already say them) the reason and hint, and where the whole output is when it was cut.
pub fn render_text(o: &Observation) -> String {
    let mut status = o.status.as_str().to_string();
    if let Some(code) = &o.error_code {
        status.push_str(&format!(": {code}"));
    }
    if let Some(stage) = &o.stage {
        status.push_str(&format!(" at {stage}"));
    }
    let mut text = format!("[{} {status}] {}", o.tool, o.summary);
    if !o.content.is_empty() {
        text.push('\n');
        text.push_str(&o.content);
    }
    if let Some(reason) = &o.reason {
        if !o.content.contains(reason.as_str()) {
            text.push_str(&format!("\nreason: {reason}"));
        }
    }
    if let Some(hint) = &o.hint {
        if !o.content.contains(hint.as_str()) {
            text.push_str(&format!("\nhint: {hint}"));
        }
    }
    if let Some(full) = &o.full_output_ref {
        text.push_str(&format!(
            "\n(the whole output is in {full}; read it with offset/limit)"
        ));
    }
    text
}

fn new_session_name() -> String {
    crate::gate::unique_id("mcp")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
