//! The gate: one call, top to bottom. Validate the input and check every path's scope
//! (`validate.rs`), walk the permission ladder — the mode (`mode.rs`), the rules (`rules.rs`), the
//! hooks (`hook_stage.rs`), read-before-write (`staleness.rs`), no-permission tools, the project
//! and session allowlists with the ceiling (`grants.rs`), ask (`ask.rs`) — then build the call's
//! capabilities and run the component (`run.rs`). Every refusal is an observation built in
//! `observe.rs`, and every step is audited with its `Stage` (`decision.rs`).

// The `Err` side of the ladder's stages is the observation that ends a call: built once, on the
// cold path, so its size does not matter.
#![allow(clippy::result_large_err)]

pub mod approval;
mod ask;
mod credentials;
mod decision;
mod describe;
pub(crate) use describe::has_facts;
mod egress;
pub mod explain;
#[cfg(test)]
mod fake;
mod grants;
mod hook_stage;
pub mod hooks;
mod lsp;
mod mode;
mod observe;
mod open;
mod preview;
mod rules;
mod run;
mod session;
mod shell;
mod staleness;
mod validate;

pub use open::{GateOptions, Surface};

use crate::cancel::CancelToken;
use crate::exec::{ApprovedCommand, Class, ExecHost};
use crate::key::KeyPattern;
use crate::policy::grants::ProjectGrants;
use crate::policy::{Mode, Policy};
use crate::sandbox::{FsDeny, Limits, Sandbox};
use crate::state::{redact, StateDb};
use crate::tools::registry::RegisteredTool;
use crate::tools::{Observation, Registry, Risk};
use crate::workspace::Workspace;
use approval::{Approver, Broker};
use decision::{Decision, Refusal, Stage, Verdict};
use hooks::HookEvent;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use staleness::WriteTarget;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use validate::Paths;

/// One workspace's gate: the tools, the policy, the sandbox and the state.
pub struct Gate {
    workspace: Workspace,
    state: StateDb,
    sandbox: Sandbox,
    registry: Registry,
    policy: Policy,
    /// The one canonical place the mode is read from at decision time.
    mode: RwLock<Mode>,
    limits: Limits,
    project_grants: ProjectGrants,
    cli_grants: Vec<KeyPattern>,
    /// `--allow-write`: every write tool is granted for the session (after `cli_grants`).
    allow_writes: bool,
    broker: Arc<Broker>,
    approver: Option<Arc<dyn Approver>>,
    approval_expiry: Duration,
    /// Who reads the hints.
    surface: Surface,
    denied_globs: Vec<String>,
    /// Sessions already recorded in the state database by this gate.
    known_sessions: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Calls in flight (see [`Gate::idle`]).
    in_flight: std::sync::atomic::AtomicUsize,
    /// Sessions already told (in `data.policy_ignored`) what of the policy was ignored.
    told_ignored: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The deny-list enforced inside the guest's preopens.
    fs_deny: Arc<FsDeny>,
    /// The host exec capability: settings and background jobs (they die with the gate).
    exec_host: Arc<ExecHost>,
    /// Secrets the host puts into requests for tools, which see only placeholders.
    credentials: crate::sandbox::net::creds::Credentials,
    /// The workspace's language servers (the `lsp_*` tools).
    lsp: Arc<crate::exec::lsp::LspHost>,
    /// Scans (`grep`, `glob`, `ls`) run their guest on a thread of their own
    /// ([`Gate::run_scans_apart`]).
    scans_apart: std::sync::atomic::AtomicBool,
}

impl Gate {
    /// Run one call for `session` with the gate's approval surface. Never fails: every outcome
    /// is an observation.
    pub async fn call(&self, session: &str, tool_name: &str, input: Value) -> Observation {
        self.call_with(session, tool_name, input, self.approver.clone())
            .await
    }

    /// Run one call for `session`, asking `approver` when the ladder asks.
    pub async fn call_with(
        &self,
        session: &str,
        tool_name: &str,
        input: Value,
        approver: Option<Arc<dyn Approver>>,
    ) -> Observation {
        self.call_cancellable(session, tool_name, input, approver, CancelToken::never())
            .await
    }

    /// The server answered and may wait for its next request: when no call is in flight, the
    /// sandbox does what finished calls left and instantiates the next calls' components
    /// ahead. Call it only where nothing waits on it (after an answer is written). Under load
    /// (another call in flight) it does nothing: that work would then only compete with the
    /// calls, and they do it themselves.
    pub async fn idle(&self) {
        if !self.busy() {
            self.sandbox.idle().await;
        }
    }

    /// The server's calls overlap (many clients): what [`Gate::idle`] would do is left until
    /// it is called again; meanwhile each call drops its store as it ends and makes its own
    /// instance, with nothing kept between calls.
    pub fn under_load(&self) {
        self.sandbox.under_load();
    }

    /// Whether any call is in flight.
    fn busy(&self) -> bool {
        self.in_flight.load(std::sync::atomic::Ordering::Relaxed) != 0
    }

    /// Run one call for `session` that the caller may cancel with `cancel`: a call cancelled
    /// while it waits for approval is withdrawn, one cancelled as it is decided never starts,
    /// and a running guest or shell command is stopped at its next look (the call then ends
    /// with a `cancelled` error).
    #[tracing::instrument(skip_all, fields(tool = %tool_name))]
    pub async fn call_cancellable(
        &self,
        session: &str,
        tool_name: &str,
        input: Value,
        approver: Option<Arc<dyn Approver>>,
        cancel: CancelToken,
    ) -> Observation {
        let _in_flight = InFlight::enter(&self.in_flight);
        let call_id = session::new_call_id();
        let started = Instant::now();
        let input_sha = hex::encode(Sha256::digest(input.to_string().as_bytes()));
        let mut events: Vec<(&str, Value)> = vec![(
            "intent",
            json!({ "input": redact(&input), "input_sha256": input_sha }),
        )];
        self.touch_session(session);
        // Load the tool here, off the synchronous ladder (which then finds it loaded).
        let _ = self
            .registry
            .tool(&self.sandbox, &self.limits, tool_name)
            .await;

        let mut key: Option<String> = None;
        let observation = match self
            .prepare(
                session,
                tool_name,
                input,
                &call_id,
                approver.clone(),
                &cancel,
                &mut key,
            )
            .await
        {
            Err((decision, observation)) => {
                events.push((
                    "decision",
                    observe::decision_event(&decision, &observation, key.as_deref()),
                ));
                observation
            }
            // Cancelled between the decision and the start (e.g. as its approval came): a
            // cancelled call never starts.
            Ok(prepared) if cancel.is_cancelled() => {
                let (decision, observation) = observe::cancelled(
                    tool_name,
                    &call_id,
                    prepared.decision.stage,
                    "the call was cancelled before it started; nothing ran",
                );
                events.push((
                    "decision",
                    observe::decision_event(&decision, &observation, key.as_deref()),
                ));
                observation
            }
            Ok(prepared) => {
                let d = &prepared.decision;
                tracing::debug!(stage = d.stage.as_str(), rule = ?d.rule, "allowed");
                events.push(("decision", observe::allowed_event(d, key.as_deref())));
                events.push(("started", json!({})));
                if let Err(e) = self.state.audit(&call_id, session, tool_name, &events) {
                    tracing::warn!(error = %e, "audit write failed");
                }
                events.clear();
                self.run(session, prepared, &call_id, approver, &cancel)
                    .await
            }
        };
        let elapsed = started.elapsed();
        events.push(("completed", observe::completed_event(&observation, elapsed)));
        if let Err(e) = self.state.audit(&call_id, session, tool_name, &events) {
            tracing::warn!(error = %e, "audit write failed");
        }
        let mut observation = observation;
        self.tell_ignored(session, &mut observation);
        observation
    }

    /// Stages 1–9: everything before the guest runs. `Err` carries the decision and the
    /// observation that ends the call.
    #[allow(clippy::too_many_arguments)]
    async fn prepare(
        &self,
        session: &str,
        tool_name: &str,
        input: Value,
        call_id: &str,
        approver: Option<Arc<dyn Approver>>,
        cancel: &CancelToken,
        key_seen: &mut Option<String>,
    ) -> Result<Prepared, Refusal> {
        let mut input = input;
        let mut hooks_ran = false;
        // A hook allow outlives the restart on its `updated_input`: it applies to the patched
        // input once that has passed stages 1–4 again (a hook deny returns at once).
        let mut hook_allow: Option<String> = None;
        loop {
            // Stages 1–2: the tool, the schema, the scope; then the call's key.
            let mut v = self.validate(tool_name, &input, call_id)?;
            let tool = v.tool.clone();
            if let Some(grant) = &tool.plugin {
                validate::plugin_paths_granted(grant, &v.paths, tool_name, call_id)?;
            }
            let shell = self.shell_command(&tool.info, &v);
            let key = validate::key_or_refuse(&tool.info, &v, shell.as_ref(), call_id)?;
            let key_text = key.to_string();
            *key_seen = Some(key_text.clone());

            // Stage 3: the mode.
            let mode = self.mode();
            mode::check(mode, &tool.info, call_id)?;

            // Stage 4: banned commands and confinement in every mode, then the rules.
            rules::banned(
                tool_name,
                shell.as_ref(),
                &shell::shell_text(&v.input),
                call_id,
            )?;
            if shell.is_some() && self.policy.require_confinement {
                let missing = self.exec_host.confinement().missing();
                rules::confinement(tool_name, true, &missing, call_id)?;
            }
            // The managed network ceiling: a fetch or download outside it is refused before
            // any rule, grant or person is consulted (and again when it runs).
            if validate::is_fetch(&tool.info) || validate::is_download(&tool.info) {
                if let Some(o) = self.outside_ceiling(tool_name, &v.input, call_id) {
                    let source = o.source.clone().unwrap_or_else(|| "managed".into());
                    return Err((Decision::new(Verdict::Deny, Stage::Rules, source), o));
                }
            }
            let rule = rules::strictest(&self.policy, tool_name, &key, call_id)?;
            let mut force_ask = rules::forces_ask(rule.as_ref());
            // Dangerous shell forms always ask, unless a grant names exactly this command.
            if let Some(Class::Dangerous(_)) = shell.as_ref().map(|k| &k.class) {
                if !self.exact_grant(session, &key_text) {
                    force_ask = true;
                }
            }
            let shell_read_only = self.shell_read_only(&tool.info, &v, shell.as_ref());

            // Stage 5: hooks, once; an `updated_input` is merged and re-validated from stage 1.
            if !hooks_ran && self.policy.hooks.iter().any(|h| h.applies_to(tool_name)) {
                hooks_ran = true;
                let event = HookEvent {
                    tool: tool_name,
                    key: &key_text,
                    session,
                    input: &input,
                    workspace: self.workspace.root(),
                };
                let outcome = hooks::run_pre_tool_use(&self.policy.hooks, &event).await;
                let step = hook_stage::step(outcome, tool_name, call_id)?;
                if step.allowed_by.is_some() {
                    hook_allow = step.allowed_by;
                }
                if let Some(patch) = step.patch {
                    hook_stage::apply(&mut input, patch);
                    continue;
                }
            }

            // A language server's change: computed now, its files checked as writes.
            self.lsp_plan(&mut v, call_id).await?;
            // Read-before-write, checked before anyone is asked about a call that cannot run.
            let before = self.check_writes(session, &tool, &v.paths, call_id)?;

            // Stage 6: read tools inside the scope need no grant. Plugins are strangers' code:
            // they never skip the ladder as no-permission tools.
            let no_permission = tool.info.risk == Risk::ReadOnly && tool.plugin.is_none();
            let decision = if (no_permission || shell_read_only) && !force_ask {
                Some(Decision::allow(
                    Stage::NoPermission,
                    if shell.is_none() && shell_read_only {
                        "a job of this session".into()
                    } else if shell_read_only {
                        "read-only shell command".into()
                    } else {
                        "read-only tool inside the scope".into()
                    },
                ))
            } else if force_ask {
                None
            } else if let Some(d) = mode::allow_all(mode) {
                Some(d)
            } else if let Some(by) = hook_allow.take() {
                Some(hook_stage::allowed(by))
            } else {
                // Stages 7–8: the project allowlist (with the ceiling), then the session's.
                match self.project_allow(&tool.info, &key, rule.as_ref(), call_id)? {
                    Some(d) => Some(d),
                    None => self.session_allow(session, tool_name, &key, call_id)?,
                }
            };
            let (decision, before) = match decision {
                Some(d) => (d, before),
                None => {
                    // Stage 9: ask.
                    let d = self
                        .ask(
                            session,
                            &tool.info,
                            &key,
                            &v,
                            call_id,
                            approver.clone(),
                            cancel,
                            force_ask,
                        )
                        .await?;
                    // The file may have changed while we waited: check scope and staleness again.
                    let mut again = self.validate(tool_name, &input, call_id)?;
                    self.lsp_plan(&mut again, call_id).await?;
                    let plans_differ = match (&again.lsp_plan, &v.lsp_plan) {
                        (Some(a), Some(b)) => !lsp::same_plan(a, b),
                        (a, b) => a.is_some() != b.is_some(),
                    };
                    if plans_differ {
                        return Err(observe::error(
                            tool_name,
                            call_id,
                            Stage::Ask,
                            decision::Code::Changed,
                            "the language server's change is not the one approved (a file changed while the approval was pending); nothing was changed".into(),
                            Some("retry the call".into()),
                        ));
                    }
                    if again.input != v.input {
                        return Err(observe::error(
                            tool_name,
                            call_id,
                            Stage::Ask,
                            decision::Code::Changed,
                            "the call's paths resolved differently after the approval".into(),
                            Some("retry the call".into()),
                        ));
                    }
                    (d, self.check_writes(session, &tool, &v.paths, call_id)?)
                }
            };
            let exec = self.approve_command(&tool.info, &v, shell.as_ref(), call_id)?;
            return Ok(Prepared {
                tool,
                input: v.input,
                paths: v.paths,
                before,
                decision,
                exec,
                lsp_plan: v.lsp_plan,
            });
        }
    }
}

/// Everything decided before the guest runs.
struct Prepared {
    tool: Arc<RegisteredTool>,
    input: Value,
    paths: Paths,
    /// Each written path and, when it exists, its stamp and content before the call.
    before: Vec<WriteTarget>,
    decision: Decision,
    /// For the shell: the one command the exec capability may run in this call.
    exec: Option<ApprovedCommand>,
    /// For `lsp_rename` / `lsp_replace_symbol`: the approved change.
    lsp_plan: Option<lsp::Plan>,
}

pub use session::unique_id;

/// One call counted in flight for as long as it lives.
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}
