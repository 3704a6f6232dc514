//! The gate: SPEC §5 top to bottom for one call. Validate the input, check every path's scope,
//! walk the permission ladder (mode, rules, hooks, no-permission tools, project and session
//! allowlists, ask), build the call's capabilities, run the component, and turn whatever happened
//! into an observation. Every step is audited.

// The `Err` side of the ladder's stages is the observation that ends a call: built once, on the
// cold path, so its size does not matter.
#![allow(clippy::result_large_err)]

pub mod approval;
pub mod explain;
pub mod hooks;

use crate::cancel::CancelToken;
use crate::error::{Error, Result};
use crate::exec::{ApprovedCommand, Class, ExecGrant, ExecHost};
use crate::key::{CallKey, KeyPattern, RuleDecision};
use crate::policy::grants::ProjectGrants;
use crate::policy::{Mode, Policy, PolicySource, Problem};
use crate::sandbox::net::{HostPattern, NetGrant};
use crate::sandbox::{wit, Capabilities, FsDeny, GuestResult, Limits, Preopen, Sandbox};
use crate::state::{redact, FileStamp, StateDb};
use crate::text::cut_head_tail;
use crate::tools::registry::{PathUse, RegisteredTool};
use crate::tools::{Ceiling, Observation, Registry, Risk, Status, ToolInfo, Total};
use crate::workspace::{Access, ScopedPath, Workspace, GUEST_ROOT, OUTPUTS_DIR};
use approval::{escape_name, plain_text, Answer, ApprovalRequest, Approver, Asked, Broker};
use hooks::{HookEvent, HookVerdict};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How to open a gate.
#[derive(Clone, Default)]
pub struct GateOptions {
    /// The workspace root.
    pub workspace: PathBuf,
    /// Per-call limits; `None`: the policy's.
    pub limits: Option<Limits>,
    /// Where compiled components are cached (`None`: `$TOOLGATE_CACHE_DIR`, else the user's
    /// cache directory).
    pub cache_dir: Option<PathBuf>,
    /// Shorthand for a session grant of every write tool (`--allow-write`).
    pub allow_writes: bool,
    /// Extra component files to serve besides the built-ins.
    pub extra_components: Vec<PathBuf>,
    /// Secret patterns added to the default deny-list (besides the policy's).
    pub extra_secrets: Vec<String>,
    /// Keep the state database here instead of `<workspace>/.toolgate/` (benchmarks over a
    /// tree that must not be written to; saved outputs still go under the workspace).
    pub state_dir: Option<PathBuf>,
    /// The policy; `None`: `.toolgate/policy.toml` if it exists, else the `default` preset.
    pub policy: Option<PolicySource>,
    /// Override the policy's mode.
    pub mode: Option<Mode>,
    /// Session grants from the command line (`--grant KEY`), for every session of this gate.
    pub grants: Vec<String>,
    /// The approval surface for [`Gate::call`] (`None`: headless, asking means deny).
    pub approver: Option<Arc<dyn Approver>>,
    /// How long an approval request waits (default 5 minutes).
    pub approval_expiry: Option<Duration>,
    /// The user's own directories (their policy layer, trust store and signing key); `None`:
    /// from `XDG_CONFIG_HOME`/`XDG_STATE_HOME`/`HOME`.
    pub user_dirs: Option<crate::userdirs::UserDirs>,
    /// The managed policy; `None`: `$TOOLGATE_MANAGED_POLICY`, else
    /// `/etc/toolgate/managed.toml` if it exists.
    pub managed_policy: Option<PathBuf>,
    /// Trust the workspace's own policy, grants and plugins for this run without a record
    /// (`--trust-workspace`, for CI on a repository the job checked out on purpose).
    pub trust_workspace: bool,
    /// How the sandbox is set up (the command line: progress lines, one-shot calls).
    pub sandbox: crate::sandbox::SandboxOptions,
}

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
    denied_globs: Vec<String>,
    /// Sessions already recorded in the state database by this gate.
    known_sessions: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Sessions already told (in `data.policy_ignored`) what of the policy was ignored.
    told_ignored: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The deny-list enforced inside the guest's preopens.
    fs_deny: Arc<FsDeny>,
    /// The host exec capability: settings and background jobs (they die with the gate).
    exec_host: Arc<ExecHost>,
}

/// A ladder decision and what it is based on, as audited.
#[derive(Clone, Debug)]
struct Decision {
    decision: &'static str,
    stage: &'static str,
    source: String,
}

impl Decision {
    fn new(decision: &'static str, stage: &'static str, source: String) -> Self {
        Decision {
            decision,
            stage,
            source,
        }
    }
}

impl Gate {
    /// Open the gate for a workspace: load the policy, the tools and the state database. A
    /// policy with problems stops here with every problem listed.
    pub async fn open(options: GateOptions) -> Result<Self> {
        // The JSON Schema meta-schema every tool's input schema is checked against is built
        // once per process (its patterns are compiled into automata: ~10 ms). Build it beside
        // the policy and state set-up instead of after them, on the first tool load.
        static WARM_SCHEMAS: std::sync::Once = std::sync::Once::new();
        WARM_SCHEMAS.call_once(|| {
            let _ = std::thread::Builder::new()
                .name("toolgate-warm".into())
                .spawn(|| {
                    let _ = jsonschema::validator_for(&json!({"type": "object"}));
                });
        });
        let probe = Workspace::new(&options.workspace, &[])?;
        let user = options
            .user_dirs
            .clone()
            .unwrap_or_else(crate::userdirs::UserDirs::from_env);
        let sources = crate::policy::LayerSources {
            workspace: probe.root().to_path_buf(),
            user: Some(user.clone()),
            cli: options.policy.clone(),
            cli_mode: options.mode,
            managed: options
                .managed_policy
                .clone()
                .or_else(crate::policy::managed_policy_path),
            trust_workspace: options.trust_workspace,
        };
        let policy = Policy::layered(&sources)
            .map_err(|problems| crate::policy::problems_error(&problems))?;
        crate::telemetry::configure(&policy.telemetry);
        let workspace_trusted = Policy::workspace_layer(&sources).trusted_by.is_some();
        let keyring = Arc::new(crate::policy::trust::Keyring::new(&user.config));
        let mut secrets = options.extra_secrets.clone();
        secrets.extend(policy.secrets.iter().cloned());
        let workspace = Workspace::new(&options.workspace, &secrets)?;
        let state_dir = options
            .state_dir
            .clone()
            .unwrap_or_else(|| workspace.state_dir());
        let state = StateDb::open(&state_dir.join(crate::workspace::layout::STATE_DB))?;
        state.sign_session_grants(keyring.clone(), workspace.root());
        let limits = options
            .limits
            .clone()
            .unwrap_or_else(|| policy.limits.clone());
        let sandbox = Sandbox::with_options(options.cache_dir.clone(), options.sandbox)?;
        // Built-ins are loaded when first called or listed, plugins scanned when one is called
        // or the tools are listed: a one-shot call loads one component.
        let mut registry = Registry::new();
        for file in &options.extra_components {
            registry.add_file(&sandbox, &limits, file).await?;
        }
        registry.set_plugins(crate::plugins::PluginStore::signed(
            &workspace.state_dir(),
            workspace.root(),
            keyring.clone(),
            workspace_trusted,
        ));
        let cli_grants = options
            .grants
            .iter()
            .map(|k| KeyPattern::parse(k).map_err(|m| Error::Policy(format!("--grant {m}"))))
            .collect::<Result<Vec<_>>>()?;
        let denied_globs = workspace.guest_denied_globs();
        let fs_deny = Arc::new(FsDeny::new(Workspace::new(workspace.root(), &secrets)?));
        let project_grants = ProjectGrants::signed(
            workspace
                .state_dir()
                .join(crate::workspace::layout::GRANTS_FILE),
            workspace.root(),
            keyring.clone(),
            workspace_trusted,
        );
        let exec_host = Arc::new(
            ExecHost::new(
                workspace.root().to_path_buf(),
                crate::exec::ExecConfig {
                    network: policy.shell.network,
                    env: policy.shell.env.clone(),
                    require_confinement: policy.require_confinement,
                    banned: policy.shell.banned.clone(),
                    output_budget: limits.max_output_bytes,
                    max_processes: policy
                        .shell
                        .max_processes
                        .unwrap_or(crate::exec::confine::DEFAULT_MAX_PROCESSES),
                    read: policy.shell.read.clone(),
                    write: policy.shell.write.clone(),
                },
            )
            .with_secrets({
                let deny = Workspace::new(workspace.root(), &secrets)?;
                Box::new(move |rel: &str| deny.is_secret(rel))
            }),
        );
        Ok(Gate {
            mode: RwLock::new(policy.mode),
            workspace,
            state,
            sandbox,
            registry,
            policy,
            limits,
            project_grants,
            cli_grants,
            allow_writes: options.allow_writes,
            broker: Arc::new(Broker::default()),
            approver: options.approver.clone(),
            approval_expiry: options.approval_expiry.unwrap_or(approval::DEFAULT_EXPIRY),
            denied_globs,
            known_sessions: Default::default(),
            told_ignored: Default::default(),
            fs_deny,
            exec_host,
        })
    }

    /// The exec capability's host side (background jobs, confinement).
    pub fn exec_host(&self) -> &Arc<ExecHost> {
        &self.exec_host
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The state database.
    pub fn state(&self) -> &StateDb {
        &self.state
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// What of the workspace's own policy and grants is not applied (untrusted, or changed
    /// since the user trusted it), each part named once.
    pub fn policy_ignored(&self) -> Vec<crate::policy::Ignored> {
        let mut v = self.policy.ignored.clone();
        v.extend(self.project_grants.ignored());
        v.extend(self.registry.ignored_plugins());
        v
    }

    /// The project grants file.
    pub fn project_grants(&self) -> &ProjectGrants {
        &self.project_grants
    }

    /// The approval broker: answer pending requests from any surface (first answer wins).
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// The mode now.
    pub fn mode(&self) -> Mode {
        *self.mode.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Change the mode; the next decision sees it, even for calls already waiting.
    pub fn set_mode(&self, mode: Mode) {
        // The managed layer's mode is a ceiling no surface can go above.
        let mode = self.policy.clamp_mode(mode);
        *self.mode.write().unwrap_or_else(|p| p.into_inner()) = mode;
    }

    /// Why the plugin tool `name` was refused at load, if it was.
    pub fn refused_plugin(&self, name: &str) -> Option<String> {
        if self.tool(name).is_some() {
            return None;
        }
        self.registry.refused(name)
    }

    /// Know every tool now (the built-ins' views, the installed plugins), so that listing
    /// and the first calls wait for nothing: servers call this at start.
    pub async fn preload(&self) {
        self.registry.preload(&self.sandbox, &self.limits).await;
    }

    /// Every tool this gate serves, whatever the mode.
    pub fn tools(&self) -> impl Iterator<Item = &ToolInfo> {
        self.registry.iter(&self.sandbox, &self.limits).into_iter()
    }

    /// The tools a client may see now: in `safe` mode only read-only tools are listed.
    pub fn visible_tools(&self) -> Vec<&ToolInfo> {
        let safe = self.mode() == Mode::Safe;
        self.tools()
            .filter(|t| !safe || t.risk == Risk::ReadOnly)
            .collect()
    }

    /// The tool `name`, loaded now if it is not yet.
    fn tool(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        self.registry.tool_now(&self.sandbox, &self.limits, name)
    }

    fn visible_names(&self) -> Vec<String> {
        self.visible_tools()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// Problems `toolgate policy check` reports beyond what stops loading: rules naming
    /// unknown tools, and persisted allows (rules, grants) that reach a session-capped tool.
    pub fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        for rule in &self.policy.rules {
            let tool = rule.pattern.tool();
            if tool != "*" && !self.tools().any(|t| t.name == tool) {
                problems.push(Problem {
                    location: rule.source.clone(),
                    message: format!(
                        "rule `{}` names the unknown tool `{tool}`",
                        rule.pattern.as_str()
                    ),
                    severity: "warning",
                });
            }
            if rule.decision == RuleDecision::Allow {
                for t in self.tools().filter(|t| t.ceiling == Ceiling::Session) {
                    if tool == "*" || tool == t.name {
                        problems.push(Problem {
                            location: rule.source.clone(),
                            message: format!("CeilingViolation: allow rule `{}` reaches `{}`, which is capped at session scope; it will not be honoured (use --grant)", rule.pattern.as_str(), t.name),
                            severity: "error",
                        });
                    }
                }
            }
        }
        for (tool, why) in self.registry.all_refused(&self.sandbox, &self.limits) {
            problems.push(Problem {
                location: format!("plugin `{tool}`"),
                message: format!("refused at load: {why}"),
                severity: "error",
            });
        }
        match self.project_grants.current() {
            Err(p) => problems.push(p),
            Ok(grants) => {
                for g in grants {
                    for t in self.tools().filter(|t| t.ceiling == Ceiling::Session) {
                        if g.pattern.tool() == "*" || g.pattern.tool() == t.name {
                            problems.push(Problem {
                                location: g.source.clone(),
                                message: format!("CeilingViolation: grant `{}` reaches `{}`, which is capped at session scope; it will not be honoured", g.pattern.as_str(), t.name),
                                severity: "error",
                            });
                        }
                    }
                }
            }
        }
        problems
    }

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
        let call_id = new_call_id();
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
                session, tool_name, input, &call_id, approver, &cancel, &mut key,
            )
            .await
        {
            Err((decision, observation)) => {
                events.push((
                    "decision",
                    decision_event(&decision, &observation, key.as_deref()),
                ));
                observation
            }
            // Cancelled between the decision and the start (e.g. as its approval came): a
            // cancelled call never starts.
            Ok(prepared) if cancel.is_cancelled() => {
                let (decision, observation) = cancelled(
                    tool_name,
                    &call_id,
                    prepared.decision.stage,
                    "the call was cancelled before it started; nothing ran",
                );
                events.push((
                    "decision",
                    decision_event(&decision, &observation, key.as_deref()),
                ));
                observation
            }
            Ok(prepared) => {
                let d = &prepared.decision;
                let mut detail =
                    json!({ "decision": d.decision, "stage": d.stage, "source": d.source });
                if let Some(k) = &key {
                    detail["permission"] = json!(k);
                }
                events.push(("decision", detail));
                events.push(("started", json!({})));
                if let Err(e) = self.state.audit(&call_id, session, tool_name, &events) {
                    tracing::warn!(error = %e, "audit write failed");
                }
                events.clear();
                self.run(session, prepared, &call_id, &cancel).await
            }
        };
        let elapsed = started.elapsed();
        events.push((
            "completed",
            json!({
                "status": observation.status.as_str(),
                "summary": observation.summary,
                "error_code": observation.error_code,
                "duration_us": u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
                "truncated": observation.truncated,
            }),
        ));
        if let Err(e) = self.state.audit(&call_id, session, tool_name, &events) {
            tracing::warn!(error = %e, "audit write failed");
        }
        let mut observation = observation;
        self.tell_ignored(session, &mut observation);
        observation
    }

    /// The first observation of each session names what of the policy was ignored.
    fn tell_ignored(&self, session: &str, o: &mut Observation) {
        let mut told = self.told_ignored.lock().unwrap_or_else(|p| p.into_inner());
        // Computed only until a session has been told: later calls pay one set lookup.
        if told.contains(session) {
            return;
        }
        let ignored = self.policy_ignored();
        if ignored.is_empty() {
            return;
        }
        told.insert(session.to_string());
        drop(told);
        if !o.data.is_object() {
            o.data = json!({});
        }
        if let Value::Object(map) = &mut o.data {
            map.insert(
                "policy_ignored".into(),
                json!({
                    "parts": ignored,
                    "hint": crate::policy::TRUST_HINT,
                }),
            );
        }
    }

    fn touch_session(&self, session: &str) {
        let mut known = self
            .known_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !known.contains(session) && self.state.touch_session(session).is_ok() {
            known.insert(session.to_string());
        }
    }

    /// Stages 1–9: everything before the guest runs. `Err` carries the decision and the
    /// observation that ends the call.
    async fn prepare(
        &self,
        session: &str,
        tool_name: &str,
        input: Value,
        call_id: &str,
        approver: Option<Arc<dyn Approver>>,
        cancel: &CancelToken,
        key_seen: &mut Option<String>,
    ) -> Result<Prepared, (Decision, Observation)> {
        let mut input = input;
        let mut hooks_ran = false;
        // A hook allow outlives the restart on its `updated_input`: it applies to the patched
        // input once that has passed stages 1–4 again (a hook deny returns at once).
        let mut hook_allow: Option<String> = None;
        loop {
            let v = self.validate(tool_name, &input, call_id)?;
            let tool = v.tool.clone();
            if let Some(grant) = &tool.plugin {
                plugin_paths_granted(grant, &v.paths, tool_name, call_id)?;
            }
            let risk = tool.info.risk;
            let shell = self.shell_command(&tool.info, &v);
            let key = match call_key(&tool.info, &v, shell.as_ref()) {
                Ok(k) => k,
                Err(message) => {
                    return Err(error_decision(Observation::error(
                        tool_name,
                        call_id,
                        "bad-url",
                        message,
                        Some("pass an absolute http:// or https:// URL".into()),
                    )))
                }
            };
            let key_text = key.to_string();
            *key_seen = Some(key_text.clone());

            // Stage 3: the mode, read from its one place at decision time.
            let mode = self.mode();
            if mode == Mode::Safe && risk > Risk::ReadOnly {
                return Err(deny(
                    tool_name,
                    call_id,
                    "mode",
                    "mode safe".into(),
                    format!("`{tool_name}` is a {} tool and the mode is `safe` (read-only)", risk.as_str()),
                    "switch the mode to `ask` (`mode = \"ask\"` in .toolgate/policy.toml or `--mode ask`)".into(),
                ));
            }

            // Stage 4: banned shell commands are denied in every mode, before any rule or grant.
            if let Some(Class::Banned(why)) = shell.as_ref().map(|k| &k.class) {
                return Err(deny(
                    tool_name,
                    call_id,
                    "rules",
                    "banned-list".into(),
                    format!("`{}` is banned: {why}", shell_text(&v.input)),
                    "banned commands are denied in every mode and cannot be granted; do it another way (e.g. the fetch tool for downloads)".into(),
                ));
            }
            if shell.is_some() && self.policy.require_confinement {
                let c = self.exec_host.confinement();
                if !c.complete() {
                    return Err(deny(
                        tool_name,
                        call_id,
                        "rules",
                        "[shell] require_confinement".into(),
                        format!(
                            "the policy requires confined shell commands and this host cannot confine them ({} unavailable)",
                            c.missing().join(", ")
                        ),
                        "run on a Linux host with Landlock and namespaces, or drop `require_confinement` from the policy".into(),
                    ));
                }
            }

            // Stage 4: rules, strictest wins across every rule.
            let rule = self.policy.strictest(&key).cloned();
            if let Some(r) = rule.as_ref().filter(|r| r.decision == RuleDecision::Deny) {
                let reason = match &r.reason {
                    Some(why) => format!(
                        "`{key_text}` is denied by rule `{}`: {why}",
                        r.pattern.as_str()
                    ),
                    None => format!("`{key_text}` is denied by rule `{}`", r.pattern.as_str()),
                };
                return Err(deny(
                    tool_name,
                    call_id,
                    "rules",
                    r.source.clone(),
                    reason,
                    format!(
                        "the deny rule at {} decides this; change that rule to allow it",
                        r.source
                    ),
                ));
            }
            let mut force_ask = rule
                .as_ref()
                .is_some_and(|r| r.decision == RuleDecision::Ask);
            // Dangerous shell forms always ask, unless a grant names exactly this command.
            if let Some(Class::Dangerous(_)) = shell.as_ref().map(|k| &k.class) {
                if !self.exact_grant(session, &key_text) {
                    force_ask = true;
                }
            }
            // The job tools only reach jobs this session started under an approved command.
            let shell_read_only = shell
                .as_ref()
                .is_some_and(|k| k.class == Class::ReadOnly && self.args_in_scope(&v, k))
                || (tool.info.builtin && crate::exec::JOB_TOOLS.contains(&tool_name));

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
                match outcome.verdict {
                    HookVerdict::Deny { by, reason, halt } => {
                        let mut o = Observation::denied(
                            tool_name,
                            call_id,
                            "hooks",
                            reason,
                            format!("the PreToolUse hook `{by}` denied this call; see its configuration in the policy"),
                        );
                        o.source = Some(format!("hook `{by}`"));
                        if halt {
                            o.data = json!({ "halt": true });
                        }
                        return Err((Decision::new("deny", "hooks", format!("hook `{by}`")), o));
                    }
                    HookVerdict::Allow { by } => hook_allow = Some(by),
                    HookVerdict::None => {}
                }
                if let Some(Value::Object(patch)) = outcome.updated_input {
                    if let Value::Object(map) = &mut input {
                        for (k, v) in patch {
                            map.insert(k, v);
                        }
                    }
                    continue;
                }
            }

            // Read-before-write, checked before anyone is asked about a call that cannot run.
            let before = self.check_writes(session, &tool, &v.paths, call_id)?;

            let allow = |stage: &'static str, source: String| Decision::new("allow", stage, source);
            // Plugins are strangers' code: they never skip the ladder as no-permission tools.
            let no_permission = risk == Risk::ReadOnly && tool.plugin.is_none();
            let decision = if (no_permission || shell_read_only) && !force_ask {
                // Stage 6: read tools inside the scope need no grant.
                Some(allow(
                    "no-permission",
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
            } else if mode == Mode::AllowAll {
                Some(allow("mode", "mode allow-all".into()))
            } else if let Some(by) = hook_allow.take() {
                Some(allow("hooks", format!("hook `{by}`")))
            } else {
                // Stage 7: the project allowlist, after the ceiling check; then stage 8.
                match self.project_allow(&tool.info, &key, rule.as_ref(), call_id)? {
                    Some(d) => Some(d),
                    None => self.session_allow(session, &key),
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
                    let again = self.validate(tool_name, &input, call_id)?;
                    if again.input != v.input {
                        return Err(error_decision(Observation::error(
                            tool_name,
                            call_id,
                            "changed",
                            "the call's paths resolved differently after the approval".into(),
                            Some("retry the call".into()),
                        )));
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
            });
        }
    }

    /// Stages 1–2: the tool exists, the input fits its schema, every path is in scope (and is
    /// rewritten to what the guest will open).
    fn validate(
        &self,
        tool_name: &str,
        input: &Value,
        call_id: &str,
    ) -> Result<Validated, (Decision, Observation)> {
        let Some(tool) = self.tool(tool_name) else {
            let why = self.registry.refused(tool_name);
            if let Some(why) = why.as_ref().filter(|_| self.registry.is_builtin(tool_name)) {
                return Err(error_decision(Observation::error(
                    tool_name,
                    call_id,
                    "tool-unavailable",
                    format!("the built-in tool `{tool_name}` could not be loaded: {why}"),
                    Some("delete the component cache ($TOOLGATE_CACHE_DIR, else ~/.cache/toolgate) and retry; if it fails again, reinstall toolgate".into()),
                )));
            }
            if let Some(why) = why {
                return Err(error_decision(Observation::error(
                    tool_name,
                    call_id,
                    "plugin-refused",
                    format!("the plugin `{tool_name}` was refused when it was loaded: {why}"),
                    Some("`toolgate plugin list` shows every plugin and its state".into()),
                )));
            }
            return Err(error_decision(Observation::error(
                tool_name,
                call_id,
                "unknown-tool",
                format!("there is no tool `{tool_name}`"),
                Some(format!(
                    "available tools: {}",
                    self.visible_names().join(", ")
                )),
            )));
        };
        if let Some(message) = schema_errors(&tool, input) {
            let mut o = Observation::error(
                tool_name,
                call_id,
                "schema",
                message,
                Some(format!(
                    "see `toolgate tools --json` for the input schema of `{tool_name}`"
                )),
            );
            o.stage = Some("schema".into());
            return Err(error_decision(o));
        }
        let mut input = input.clone();
        let mut paths = Vec::new();
        for (field, usage) in &tool.info.path_fields {
            let Some(raw) = input.get(field).and_then(Value::as_str).map(str::to_string) else {
                continue;
            };
            match self.workspace.scope(&raw, usage.access()) {
                Ok(scoped) => {
                    input[field] = Value::String(scoped.guest.clone());
                    paths.push((field.clone(), *usage, scoped));
                }
                Err(denial) => {
                    return Err(deny(
                        tool_name,
                        call_id,
                        "scope",
                        format!("path `{field}`"),
                        denial.reason,
                        denial.hint,
                    ));
                }
            }
        }
        Ok(Validated { tool, input, paths })
    }

    /// For the built-in shell: the command keyed from what will run.
    fn shell_command(&self, info: &ToolInfo, v: &Validated) -> Option<crate::exec::Keyed> {
        if !(info.builtin && info.name == crate::exec::SHELL_TOOL) {
            return None;
        }
        let text = shell_text(&v.input);
        Some(crate::exec::keyed(&text, &self.policy.shell.banned))
    }

    /// Whether a grant from the command line or this session names exactly `key_text`.
    fn exact_grant(&self, session: &str, key_text: &str) -> bool {
        self.cli_grants.iter().any(|g| g.as_str() == key_text)
            || self
                .write_grant(key_text)
                .is_some_and(|g| g.as_str() == key_text)
            || self
                .state
                .session_grants(session)
                .unwrap_or_default()
                .iter()
                .any(|g| g == key_text)
    }

    /// A read-only command is run without a prompt only when every argument that could be a
    /// path stays in the scope (so `cat .env` or `cat /etc/shadow` still asks).
    fn args_in_scope(&self, v: &Validated, k: &crate::exec::Keyed) -> bool {
        let crate::exec::Plan::Argv(argv) = &k.plan else {
            return false;
        };
        let cwd = v
            .paths
            .iter()
            .find(|(f, _, _)| f == "cwd")
            .map(|(_, _, p)| p.rel.clone())
            .unwrap_or_else(|| ".".into());
        argv[1..].iter().all(|a| {
            // Any argument may name a file the program reads: a plain word, the value of a long
            // option (`--from-file=.env`) and what follows a short option letter (`-f.env`).
            // Values that are not paths (`--color=always`, `-n5`) are judged as paths too;
            // they stay inside, so only a real path outside (or a secret) makes it ask.
            let path = match a.strip_prefix("--") {
                Some(long) => match long.split_once('=') {
                    Some((_, value)) => value,
                    None => return true,
                },
                None => match a.strip_prefix('-') {
                    Some(short) => match short.char_indices().nth(1) {
                        Some((i, _)) => &short[i..],
                        None => return true,
                    },
                    None => a.as_str(),
                },
            };
            let raw = if path.starts_with('/') {
                path.to_string()
            } else {
                format!("{cwd}/{path}")
            };
            self.workspace.scope(&raw, Access::Read).is_ok()
        })
    }

    /// The command the exec capability may run for this call (the shell only).
    fn approve_command(
        &self,
        info: &ToolInfo,
        v: &Validated,
        shell: Option<&crate::exec::Keyed>,
        call_id: &str,
    ) -> Result<Option<ApprovedCommand>, (Decision, Observation)> {
        let Some(k) = shell else {
            return Ok(None);
        };
        let cwd = match v.paths.iter().find(|(f, _, _)| f == "cwd") {
            Some((_, _, p)) if p.host.is_dir() => p.host.clone(),
            Some((_, _, p)) => {
                return Err(error_decision(Observation::error(
                    &info.name,
                    call_id,
                    "not-a-directory",
                    format!("cwd `{}` is not a directory", p.rel),
                    Some("give an existing directory inside the workspace".into()),
                )))
            }
            None => self.workspace.root().to_path_buf(),
        };
        let ms = |field: &str| v.input.get(field).and_then(Value::as_u64);
        let timeout = ms("timeout_ms")
            .map(Duration::from_millis)
            .unwrap_or(crate::exec::DEFAULT_TIMEOUT)
            .min(crate::exec::MAX_TIMEOUT);
        let auto_background = ms("auto_background_ms")
            .map(Duration::from_millis)
            .or_else(|| {
                self.policy
                    .shell
                    .auto_background_secs
                    .map(Duration::from_secs)
            })
            .unwrap_or(crate::exec::DEFAULT_AUTO_BACKGROUND);
        Ok(Some(ApprovedCommand {
            text: shell_text(&v.input),
            plan: k.plan.clone(),
            key: k.key.to_string(),
            class: match k.class {
                Class::ReadOnly => "read-only",
                Class::Dangerous(_) => "dangerous",
                _ => "normal",
            },
            cwd,
            timeout,
            auto_background,
            background: v
                .input
                .get("run_in_background")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }))
    }

    fn project_allow(
        &self,
        info: &ToolInfo,
        key: &CallKey,
        rule: Option<&crate::policy::Rule>,
        call_id: &str,
    ) -> Result<Option<Decision>, (Decision, Observation)> {
        let persisted = match rule.filter(|r| r.decision == RuleDecision::Allow) {
            Some(r) => Some((format!("rule `{}`", r.pattern.as_str()), r.source.clone())),
            None => match self.project_grants.find(key) {
                Ok(g) => g.map(|g| (format!("grant `{}`", g.pattern.as_str()), g.source)),
                Err(problem) => {
                    let mut o = Observation::error(
                        &info.name,
                        call_id,
                        "grants-file",
                        format!("{problem}"),
                        Some("fix or delete .toolgate/grants.toml; until then nothing it grants is honoured".into()),
                    );
                    o.stage = Some("project-allowlist".into());
                    return Err(error_decision(o));
                }
            },
        };
        let Some((what, source)) = persisted else {
            return Ok(None);
        };
        if info.ceiling == Ceiling::Session {
            let mut o = Observation::error(
                &info.name,
                call_id,
                "ceiling-violation",
                format!(
                    "CeilingViolation: {what} at {source} allows `{key}` for the whole project, but `{}` is capped at session scope (its component imports the host exec capability); it is not honoured",
                    info.name
                ),
                Some(format!("remove it from {source}; allow it for one session with `--grant '{key}'` instead")),
            );
            o.stage = Some("project-allowlist".into());
            o.source = Some(source.clone());
            return Err((Decision::new("error", "project-allowlist", source), o));
        }
        Ok(Some(Decision::new("allow", "project-allowlist", source)))
    }

    /// With `--allow-write`: the grant of the write tool `tool` (keyed by its name, as if
    /// given with `--grant`), if it is one.
    fn write_grant(&self, tool: &str) -> Option<KeyPattern> {
        if !self.allow_writes {
            return None;
        }
        let tool = self.registry.loaded(tool)?;
        (tool.info.risk == Risk::Write)
            .then(|| KeyPattern::parse(&tool.info.name).ok())
            .flatten()
    }

    fn session_allow(&self, session: &str, key: &CallKey) -> Option<Decision> {
        if let Some(g) = self.cli_grants.iter().find(|g| g.matches(key)) {
            return Some(Decision::new(
                "allow",
                "session-allowlist",
                format!("--grant '{}'", g.as_str()),
            ));
        }
        if let Some(g) = self.write_grant(&key.tool).filter(|g| g.matches(key)) {
            return Some(Decision::new(
                "allow",
                "session-allowlist",
                format!("--grant '{}'", g.as_str()),
            ));
        }
        let grants = self.state.session_grants(session).unwrap_or_default();
        grants
            .iter()
            .filter_map(|g| KeyPattern::parse(g).ok())
            .find(|g| g.matches(key))
            .map(|g| {
                Decision::new(
                    "allow",
                    "session-allowlist",
                    format!("session grant `{}`", g.as_str()),
                )
            })
    }

    #[allow(clippy::too_many_arguments)]
    async fn ask(
        &self,
        session: &str,
        info: &ToolInfo,
        key: &CallKey,
        v: &Validated,
        call_id: &str,
        approver: Option<Arc<dyn Approver>>,
        cancel: &CancelToken,
        forced: bool,
    ) -> Result<Decision, (Decision, Observation)> {
        let name = info.name.as_str();
        let key_text = key.to_string();
        let Some(approver) = approver else {
            let hint = if info.ceiling == Ceiling::Session {
                format!("no one can approve here (headless); allow it for this run with `--grant '{key_text}'`")
            } else if forced {
                format!("an `ask` rule covers `{key_text}` and no one can approve here (headless); change that rule, or run where a person can answer")
            } else {
                format!(
                    "no one can approve here (headless); allow it for this run with `--grant '{key_text}'`, or for the project with a rule in .toolgate/policy.toml: [[rules]] key = \"{key_text}\" decision = \"allow\""
                )
            };
            return Err(deny(
                name,
                call_id,
                "ask",
                "headless".into(),
                format!("`{key_text}` needs approval and there is no approval surface"),
                hint,
            ));
        };
        let mut choices = vec![Answer::Once, Answer::Session];
        if info.ceiling == Ceiling::Project && !forced {
            choices.push(Answer::Project);
        }
        choices.push(Answer::Deny);
        let expiry = self.approval_expiry;
        let request = ApprovalRequest {
            id: format!("{call_id}-approval"),
            session: session.to_string(),
            tool: name.to_string(),
            key: key_text.clone(),
            description: plain_text(&describe_call(info, v)),
            risk: info.risk,
            input_sha256: hex::encode(Sha256::digest(v.input.to_string().as_bytes())),
            choices: choices.clone(),
            expires_in_secs: expiry.as_secs(),
        };
        let answer = match self
            .broker
            .ask(Some(approver), request, expiry, cancel.clone())
            .await
        {
            Asked::Withdrawn => return Err(cancelled(name, call_id, "ask", &format!("the call was cancelled while it waited for approval of `{key_text}`; the request was withdrawn and nothing ran"))),
            // The call was cancelled as the answer came: the answer approves nothing (no grant
            // is saved either).
            Asked::Answered(_) if cancel.is_cancelled() => {
                return Err(cancelled(name, call_id, "ask", &format!("the call was cancelled as `{key_text}` was approved; the approval was not used and nothing ran")))
            }
            Asked::Answered(a) => Some(a),
            Asked::Expired => None,
        };
        match answer {
            Some(a) if !choices.contains(&a) => {
                if a == Answer::Project && info.ceiling == Ceiling::Session {
                    let mut o = Observation::error(
                        name,
                        call_id,
                        "ceiling-violation",
                        format!("CeilingViolation: `{name}` is capped at session scope; `project` is not an answer for `{key_text}`"),
                        Some("answer `once` or `session`".into()),
                    );
                    o.stage = Some("ask".into());
                    return Err((Decision::new("error", "ask", "user".into()), o));
                }
                Err(deny(
                    name,
                    call_id,
                    "ask",
                    "user".into(),
                    format!("`{}` was not one of the offered answers", a.as_str()),
                    "answer with one of the offered choices".into(),
                ))
            }
            Some(Answer::Once) => Ok(Decision::new("allow", "ask", "user: once".into())),
            Some(Answer::Session) => {
                if let Err(e) = self.state.add_session_grant(session, &key_text, None) {
                    tracing::warn!(error = %e, "saving a session grant failed");
                }
                Ok(Decision::new("allow", "ask", "user: session".into()))
            }
            Some(Answer::Project) => match self.project_grants.add(&key_text, "prompt") {
                Ok(()) => Ok(Decision::new("allow", "ask", "user: project".into())),
                Err(problem) => Err(error_decision(Observation::error(
                    name,
                    call_id,
                    "grants-file",
                    problem.to_string(),
                    Some("fix .toolgate/grants.toml and answer again".into()),
                ))),
            },
            Some(Answer::Deny) => Err(deny(
                name,
                call_id,
                "ask",
                "user".into(),
                format!("the user denied `{key_text}`"),
                "do something else, or ask the user what they want".into(),
            )),
            None => Err(deny(
                name,
                call_id,
                "ask",
                "expired".into(),
                format!("the approval request for `{key_text}` expired unanswered"),
                "ask again when the user is there".into(),
            )),
        }
    }

    /// Read-before-write: the session must have seen each written file as it is now.
    fn check_writes(
        &self,
        session: &str,
        tool: &RegisteredTool,
        paths: &[(String, PathUse, ScopedPath)],
        call_id: &str,
    ) -> Result<Vec<WriteTarget>, (Decision, Observation)> {
        let tool_name = tool.info.name.as_str();
        let fail = |code: &str, message: String, hint: Option<String>| {
            let mut o = Observation::error(tool_name, call_id, code, message, hint);
            o.stage = Some("staleness".into());
            error_decision(o)
        };
        let mut before = Vec::new();
        for (_, usage, scoped) in paths {
            if *usage != PathUse::Write {
                continue;
            }
            // One non-blocking open of regular files only: a FIFO, device or socket is
            // refused here, before any read (and before the guest), so it cannot hang the call.
            let current = match FileStamp::for_history(&scoped.host, self.limits.stamp_bytes) {
                Ok(current) => current,
                Err(e) if e.is_not_found() => {
                    before.push((scoped.clone(), None));
                    continue;
                }
                Err(e) if e.is_directory() => {
                    return Err(fail(
                        "is-directory",
                        format!("{} is a directory", scoped.rel),
                        Some("give the path of a file".into()),
                    ))
                }
                Err(e @ crate::fsutil::OpenError::NotRegular { .. }) => {
                    return Err(fail(
                        e.code(),
                        e.message_for(&scoped.rel),
                        Some(format!("{} cannot be changed with this tool", scoped.rel)),
                    ))
                }
                Err(e) => return Err(fail(e.code(), e.message_for(&scoped.rel), None)),
            };
            match self.state.last_read(session, &scoped.host) {
                Ok(Some(seen)) if seen.same_content(&current.0) => {}
                Ok(Some(seen)) => {
                    return Err(fail(
                        "stale",
                        format!(
                            "{} changed since it was last read in this session ({} -> {} bytes)",
                            scoped.rel, seen.size, current.0.size
                        ),
                        Some(format!(
                            "read {} again, then retry the change against what it contains now",
                            scoped.rel
                        )),
                    ))
                }
                Ok(None) => {
                    return Err(fail(
                        "not-read",
                        format!("{} has not been read in this session", scoped.rel),
                        Some(format!(
                        "call `read` on {} first, so the change is made against what it contains",
                        scoped.rel
                    )),
                    ))
                }
                Err(e) => return Err(fail("state", e.to_string(), None)),
            }
            before.push((scoped.clone(), Some(current)));
        }
        Ok(before)
    }

    /// Build the capabilities, run the guest, and record what it did.
    async fn run(
        &self,
        session: &str,
        p: Prepared,
        call_id: &str,
        cancel: &CancelToken,
    ) -> Observation {
        let name = p.tool.info.name.clone();
        let mut caps = Capabilities {
            preopens: vec![Preopen {
                host: self.workspace.root().to_path_buf(),
                guest: GUEST_ROOT.to_string(),
                writable: false,
            }],
            deny: Some(self.fs_deny.clone()),
            exec: None,
            ..Capabilities::default()
        };
        let mut limits = self.limits.clone();
        if p.tool.info.ceiling == Ceiling::Session {
            // Importing the exec capability: the shell gets its approved command, every such
            // tool reaches this session's jobs, nothing else.
            if let Some(a) = &p.exec {
                // The guest waits in the host while the command runs: its deadline covers the
                // command's own (the command is killed at its timeout by the host).
                let wait = if a.background {
                    crate::exec::BACKGROUND_GRACE
                } else {
                    a.auto_background.min(a.timeout)
                };
                limits.timeout = limits.timeout.max(wait + Duration::from_secs(30));
            }
            caps.exec = Some(ExecGrant {
                approved: p.exec.clone(),
                session: session.to_string(),
                call_id: call_id.to_string(),
                host: self.exec_host.clone(),
            });
        }
        if let Some(grant) = &p.tool.plugin {
            if let Err(o) = self.plugin_capabilities(grant, &mut caps, &mut limits, &name, call_id)
            {
                return *o;
            }
        }
        if is_fetch(&p.tool.info) {
            let mut net = self.fetch_grant(session, &p.input);
            net.deadline = Some(Instant::now() + limits.timeout);
            caps.net = Some(net);
        }
        for (scoped, current) in &p.before {
            // A plugin writes only where its grant reaches (checked in `prepare`), through the
            // preopens made from the grant: its path fields add nothing.
            let (Some(parent), Some(guest_parent)) =
                (scoped.host.parent(), guest_parent(&scoped.guest))
            else {
                return Observation::error(
                    &name,
                    call_id,
                    "scope",
                    format!("{} has no parent directory", scoped.rel),
                    None,
                );
            };
            // Made on descriptors, never through a link: a directory swapped for
            // `sub -> .toolgate` after the scope check fails the call instead.
            if let Err(e) = crate::fsutil::create_dirs_beneath(self.workspace.root(), parent) {
                return Observation::error(
                    &name,
                    call_id,
                    "io",
                    format!(
                        "cannot create the directories of {}: {}",
                        crate::gate::approval::escape_name(&scoped.rel),
                        crate::fsutil::plain_error(&e)
                    ),
                    None,
                );
            }
            if p.tool.plugin.is_none() {
                caps.preopens.push(Preopen {
                    host: parent.to_path_buf(),
                    guest: guest_parent,
                    writable: true,
                });
            }
            let snapshot = current
                .as_ref()
                .map(|(stamp, bytes)| (stamp, bytes.as_deref()));
            if let Err(e) = self
                .state
                .history_before_write(&scoped.host, snapshot, call_id)
            {
                tracing::warn!(error = %e, "history write failed");
            }
        }

        // What `read` shows the model is recorded from the host's own look at the file. A
        // FIFO, device or socket is refused here, before the guest waits on it; a directory or
        // a missing file is the guest's to answer.
        let mut read_stamp = None;
        if p.tool.info.builtin && name == "read" {
            if let Some((_, _, s)) = p.paths.iter().find(|(_, u, _)| *u == PathUse::Read) {
                match FileStamp::stamp(&s.host, limits.stamp_bytes) {
                    Ok(stamp) => read_stamp = Some((s.host.clone(), stamp)),
                    Err(e @ crate::fsutil::OpenError::NotRegular { .. }) if !e.is_directory() => {
                        return Observation::error(
                            &name,
                            call_id,
                            e.code(),
                            e.message_for(&s.rel),
                            Some(format!("{} cannot be read with this tool", s.rel)),
                        );
                    }
                    Err(_) => {}
                }
            }
        }

        let context = wit::CallContext {
            workspace_root: GUEST_ROOT.to_string(),
            max_output_bytes: u64::try_from(limits.max_output_bytes).unwrap_or(u64::MAX),
            denied_globs: self.denied_globs.clone(),
        };
        let input = p.input.to_string();
        let result = self
            .sandbox
            .call(&p.tool.loaded, &caps, &limits, &input, &context, cancel)
            .await;
        let refusals = caps
            .net
            .as_ref()
            .and_then(|n| n.refusals.lock().ok().map(|r| r.clone()))
            .unwrap_or_default();
        let mut observation = match result {
            Err(e) => limit_or_crash(&name, call_id, e),
            Ok(GuestResult::ToolError(e)) => {
                let data = parse_data(&e.data);
                match crate::tools::observation::carried_output(&data) {
                    // A failure that still produced output (a command that exited non-zero):
                    // shown as a success would be, with the error's code and reason.
                    Some(out) => {
                        let mut o =
                            self.ok_observation(&name, call_id, out, limits.max_output_bytes);
                        o.status = Status::Error;
                        o.error_code = Some(e.code);
                        o.reason = Some(e.message);
                        o
                    }
                    None => {
                        let mut o = Observation::error(&name, call_id, &e.code, e.message, None);
                        o.data = data;
                        o
                    }
                }
            }
            Ok(GuestResult::Output(out)) => {
                self.ok_observation(&name, call_id, out, limits.max_output_bytes)
            }
        };
        if observation.status == Status::Ok {
            if let Some((path, stamp)) = read_stamp {
                if let Err(e) = self.state.record_read(session, &path, &stamp) {
                    tracing::warn!(error = %e, "read record failed");
                }
            }
            for (scoped, _) in &p.before {
                match FileStamp::for_history(&scoped.host, limits.stamp_bytes) {
                    Ok((stamp, bytes)) => {
                        let _ = self.state.record_read(session, &scoped.host, &stamp);
                        let _ = self.state.history_after_write(
                            &scoped.host,
                            &stamp,
                            bytes.as_deref(),
                            call_id,
                        );
                    }
                    Err(e) => tracing::warn!(error = %e, "stamping a written file failed"),
                }
            }
        }
        if !refusals.is_empty() {
            // What the host refused is part of the result, whatever the guest made of it.
            if observation.status != Status::Ok {
                let why = refusals.join("; ");
                observation.reason = Some(match observation.reason.take() {
                    Some(r) => format!("{r} (the host refused: {why})"),
                    None => format!("the host refused: {why}"),
                });
            }
            if let Value::Object(map) = &mut observation.data {
                map.insert("network_refused".into(), json!(refusals));
            } else if observation.data.is_null() {
                observation.data = json!({ "network_refused": refusals });
            }
        }
        observation.audit_id = call_id.to_string();
        observation
    }

    /// A plugin call's capabilities: preopens for its granted paths (each checked against the
    /// scope now, so a path that became a symlink out of the workspace is not opened), its
    /// environment variables, its network grant and its limits.
    fn plugin_capabilities(
        &self,
        grant: &crate::plugins::PluginGrant,
        caps: &mut Capabilities,
        limits: &mut Limits,
        name: &str,
        call_id: &str,
    ) -> Result<(), Box<Observation>> {
        caps.preopens.clear();
        for (paths, access, writable) in [
            (&grant.fs_read, Access::Read, false),
            (&grant.fs_write, Access::Write, true),
        ] {
            for rel in paths {
                let scoped = self.workspace.scope(rel, access).map_err(|d| {
                    Box::new(Observation::error(
                        name,
                        call_id,
                        "plugin-grant",
                        format!("the plugin's granted path `{rel}` cannot be used: {}", d.reason),
                        Some("narrow the plugin's [granted] paths in .toolgate/plugins/ or reinstall it".into()),
                    ))
                })?;
                if writable {
                    if let Err(e) =
                        crate::fsutil::create_dirs_beneath(self.workspace.root(), &scoped.host)
                    {
                        return Err(Box::new(Observation::error(
                            name,
                            call_id,
                            "io",
                            format!(
                                "cannot create the plugin's granted directory {}: {}",
                                crate::gate::approval::escape_name(&scoped.rel),
                                crate::fsutil::plain_error(&e)
                            ),
                            None,
                        )));
                    }
                } else if !scoped.host.exists() {
                    continue;
                }
                // Preopens are directories; opening a file's parent would hand over its
                // siblings too, so a grant naming a file is an error, not a wider grant.
                if !scoped.host.is_dir() {
                    return Err(Box::new(Observation::error(
                        name,
                        call_id,
                        "plugin-grant",
                        format!("the plugin's granted path `{rel}` is not a directory; plugin grants name directories"),
                        Some("grant the directory that holds it, in the manifest and in .toolgate/plugins/".into()),
                    )));
                }
                caps.preopens.push(Preopen {
                    host: scoped.host.clone(),
                    guest: scoped.guest.clone(),
                    writable,
                });
            }
        }
        caps.env = grant
            .env
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v)))
            .collect();
        if !grant.http.is_empty() {
            caps.net = Some(NetGrant {
                allow: grant.http.clone(),
                also: None,
                allow_private: self.policy.network.allow_private.clone(),
                max_response_bytes: self.policy.network.max_response_bytes,
                timeout: self.policy.network.timeout,
                deadline: None,
                refusals: Default::default(),
            });
        }
        *limits = grant.limits(limits);
        if let Some(net) = &mut caps.net {
            net.deadline = Some(Instant::now() + limits.timeout);
        }
        Ok(())
    }

    /// The network grant of a `fetch` call: the host that was approved, and, for redirects,
    /// any host whose `fetch:HOST` key is already allowed without a prompt (a rule, a grant,
    /// the mode) and not denied or forced to ask by a rule.
    fn fetch_grant(&self, session: &str, input: &Value) -> NetGrant {
        let approved: Vec<HostPattern> = fetch_target(input)
            .ok()
            .and_then(|(_, host, _)| HostPattern::parse(&host).ok())
            .into_iter()
            .collect();
        let policy = self.policy.clone();
        let allow_all = self.mode() == Mode::AllowAll;
        let mut patterns: Vec<KeyPattern> = self.cli_grants.clone();
        patterns.extend(
            self.state
                .session_grants(session)
                .unwrap_or_default()
                .iter()
                .filter_map(|g| KeyPattern::parse(g).ok()),
        );
        if let Ok(grants) = self.project_grants.current() {
            patterns.extend(grants.into_iter().map(|g| g.pattern));
        }
        let also: crate::sandbox::net::HostCheck = Arc::new(move |host: &str| {
            let key = CallKey::with_target(FETCH_TOOL, host);
            match policy.strictest(&key).map(|r| r.decision) {
                Some(RuleDecision::Deny) | Some(RuleDecision::Ask) => false,
                Some(RuleDecision::Allow) => true,
                None => allow_all || patterns.iter().any(|p| p.matches(&key)),
            }
        });
        NetGrant {
            allow: vec![approved],
            also: Some(also),
            allow_private: self.policy.network.allow_private.clone(),
            max_response_bytes: self.policy.network.max_response_bytes,
            timeout: self.policy.network.timeout,
            deadline: None,
            refusals: Default::default(),
        }
    }

    fn ok_observation(
        &self,
        name: &str,
        call_id: &str,
        out: wit::Output,
        max: usize,
    ) -> Observation {
        let mut o = Observation::new(name, Status::Ok, call_id);
        o.summary = out.summary;
        o.truncated = out.truncated;
        o.data = parse_data(&out.data);
        for t in out.totals {
            o.totals.insert(
                t.unit,
                Total {
                    seen: t.seen,
                    returned: t.returned,
                },
            );
        }
        if out.content.len() > max {
            let rel = format!("{OUTPUTS_DIR}/{call_id}.txt");
            let file = self.workspace.root().join(&rel);
            let saved = crate::workspace::layout::write_state_file(&file, out.content.as_bytes());
            let reference = if saved.is_ok() {
                rel.clone()
            } else {
                "(could not be saved)".into()
            };
            if let Some(cut) = cut_head_tail(&out.content, max, &reference) {
                o.totals.insert(
                    "bytes".into(),
                    Total {
                        seen: out.content.len() as u64,
                        returned: cut.len() as u64,
                    },
                );
                o.content = cut;
                o.truncated = true;
                if saved.is_ok() {
                    o.full_output_ref = Some(rel);
                }
            }
        } else {
            o.content = out.content;
        }
        o
    }
}

/// A path the call writes and, when it exists, its stamp and content before the call (the
/// content only when history keeps it: not over 8 MiB or `stamp_bytes`).
type WriteTarget = (ScopedPath, Option<(FileStamp, Option<Vec<u8>>)>);

/// Everything decided before the guest runs.
struct Prepared {
    tool: Arc<RegisteredTool>,
    input: Value,
    paths: Vec<(String, PathUse, ScopedPath)>,
    /// Each written path and, when it exists, its stamp and content before the call.
    before: Vec<WriteTarget>,
    decision: Decision,
    /// For the shell: the one command the exec capability may run in this call.
    exec: Option<ApprovedCommand>,
}

/// A plugin's path arguments must lie inside what it was granted: a read inside `fs_read` or
/// `fs_write`, a write inside `fs_write`. The host checks this before anyone is asked.
fn plugin_paths_granted(
    grant: &crate::plugins::PluginGrant,
    paths: &[(String, PathUse, ScopedPath)],
    tool: &str,
    call_id: &str,
) -> Result<(), (Decision, Observation)> {
    let within = |rel: &str, roots: &[String]| {
        roots
            .iter()
            .any(|r| crate::plugins::manifest::within(rel, r))
    };
    for (field, usage, scoped) in paths {
        let ok = match usage {
            PathUse::Read => {
                within(&scoped.rel, &grant.fs_read) || within(&scoped.rel, &grant.fs_write)
            }
            PathUse::Write => within(&scoped.rel, &grant.fs_write),
        };
        if !ok {
            let (verb, list) = match usage {
                PathUse::Read => ("read", &grant.fs_read),
                PathUse::Write => ("write", &grant.fs_write),
            };
            return Err(deny(
                tool,
                call_id,
                "scope",
                format!("path `{field}`"),
                format!(
                    "`{}` is outside what the plugin may {verb} ({})",
                    scoped.rel,
                    if list.is_empty() { "nothing".to_string() } else { list.join(", ") }
                ),
                "pass a path inside the plugin's granted directories, or grant more in its manifest and reinstall it".into(),
            ));
        }
    }
    Ok(())
}

/// The built-in network tool.
const FETCH_TOOL: &str = "fetch";

/// The call's key: a shell command's, a fetch's host, else the tool and its paths. `Err` when
/// a fetch URL cannot be read.
fn call_key(
    info: &ToolInfo,
    v: &Validated,
    shell: Option<&crate::exec::Keyed>,
) -> std::result::Result<CallKey, String> {
    match shell {
        Some(k) => Ok(k.key.clone()),
        None if is_fetch(info) => {
            fetch_target(&v.input).map(|(_, host, _)| CallKey::with_target(FETCH_TOOL, &host))
        }
        None => Ok(key_for(info, &v.paths)),
    }
}

fn is_fetch(info: &ToolInfo) -> bool {
    info.builtin && info.name == FETCH_TOOL
}

/// `(scheme, host, port)` of a fetch call's `url`, lowercased; the host is what the call is
/// keyed on (`fetch:api.github.com`).
fn fetch_target(input: &Value) -> std::result::Result<(String, String, u16), String> {
    let url = input.get("url").and_then(Value::as_str).unwrap_or_default();
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("`url` is not a valid URL ({e}): `{url}`"))?;
    let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "`url` must start with http:// or https://: `{url}`"
        ));
    }
    let host = uri
        .host()
        .map(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase()
        })
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("`url` has no host: `{url}`"))?;
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    Ok((scheme, host, port))
}

/// A call that passed stages 1–2.
struct Validated {
    tool: Arc<RegisteredTool>,
    /// The input with every path rewritten to what the guest opens.
    input: Value,
    paths: Vec<(String, PathUse, ScopedPath)>,
}

fn deny(
    tool: &str,
    call_id: &str,
    stage: &'static str,
    source: String,
    reason: String,
    hint: String,
) -> (Decision, Observation) {
    let mut o = Observation::denied(tool, call_id, stage, reason, hint);
    o.source = Some(source.clone());
    (Decision::new("deny", stage, source), o)
}

/// A call cancelled before it started (while it waited for approval, or as it was decided):
/// nothing ran, and the audit says `cancelled`, not `allow`.
fn cancelled(
    tool: &str,
    call_id: &str,
    stage: &'static str,
    message: &str,
) -> (Decision, Observation) {
    let mut o = Observation::error(
        tool,
        call_id,
        "cancelled",
        message.to_string(),
        Some("call again if it is still wanted".into()),
    );
    o.stage = Some(stage.into());
    (Decision::new("cancelled", stage, "client".into()), o)
}

fn error_decision(o: Observation) -> (Decision, Observation) {
    let stage: &'static str = match o.stage.as_deref() {
        Some("scope") => "scope",
        Some("staleness") => "staleness",
        Some("project-allowlist") => "project-allowlist",
        _ => "schema",
    };
    (Decision::new("error", stage, "input".into()), o)
}

/// The `command` field of a shell call.
fn shell_text(input: &Value) -> String {
    input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The key of a call, computed from what will run: writes key on the parent directory
/// (`write:src/`), reads on the path (`read:src/main.rs`), other tools on their name.
fn key_for(info: &ToolInfo, paths: &[(String, PathUse, ScopedPath)]) -> CallKey {
    if let Some((_, _, p)) = paths.iter().find(|(_, u, _)| *u == PathUse::Write) {
        let parent = match p.rel.rfind('/') {
            Some(i) => format!("{}/", &p.rel[..i]),
            None => "./".to_string(),
        };
        return CallKey::with_target(&info.name, &parent);
    }
    if let Some((_, _, p)) = paths.first() {
        return CallKey::with_target(&info.name, &p.rel);
    }
    if info.path_fields.iter().any(|(_, u)| *u == PathUse::Read) {
        return CallKey::with_target(&info.name, ".");
    }
    CallKey::tool(&info.name)
}

/// What the user is asked to approve: the tool, where, and the exact input.
fn describe_call(info: &ToolInfo, v: &Validated) -> String {
    let mut text = format!("{} ({} tool)", escape_name(&info.name), info.risk.as_str());
    for (field, usage, p) in &v.paths {
        let verb = match usage {
            PathUse::Read => "reads",
            PathUse::Write if p.host.exists() => "overwrites/changes",
            PathUse::Write => "creates",
        };
        text.push_str(&format!("\n  {verb} {} ({field})", escape_name(&p.rel)));
    }
    let mut input = serde_json::to_string_pretty(&v.input).unwrap_or_default();
    if input.len() > 4000 {
        let mut cut = 4000;
        while !input.is_char_boundary(cut) {
            cut -= 1;
        }
        input.truncate(cut);
        input.push_str(
            "\n  … (input cut for display; the approval covers the whole input by its hash)",
        );
    }
    text.push_str(&format!("\ninput:\n{input}"));
    text
}

/// The audit's `decision` event; `permission` is the call's key once the ladder computed it (a
/// call refused before that, at the schema or scope, has none). Not named `key`: the audit's
/// redaction reads a field named so as a secret.
fn decision_event(d: &Decision, o: &Observation, key: Option<&str>) -> Value {
    let mut v = json!({
        "decision": d.decision,
        "stage": d.stage,
        "source": d.source,
        "reason": o.reason,
    });
    if let Some(k) = key {
        v["permission"] = json!(k);
    }
    v
}

/// Every schema error, one per line, each naming the field.
fn schema_errors(tool: &RegisteredTool, input: &Value) -> Option<String> {
    if !input.is_object() {
        return Some(format!(
            "the input of `{}` must be a JSON object",
            tool.info.name
        ));
    }
    let errors: Vec<String> = tool
        .validator
        .iter_errors(input)
        .take(5)
        .map(|e| {
            let at = e.instance_path.to_string();
            let field = if at.is_empty() {
                "input".to_string()
            } else {
                format!("input{}", at.replace('/', "."))
            };
            format!("{field}: {e}")
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("\n"))
}

fn guest_parent(guest: &str) -> Option<String> {
    let i = guest.rfind('/')?;
    let parent = &guest[..i];
    (!parent.is_empty()).then(|| parent.to_string())
}

fn parse_data(data: &str) -> Value {
    if data.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_string()))
}

fn limit_or_crash(name: &str, call_id: &str, e: Error) -> Observation {
    match e {
        Error::Cancelled { message } => {
            Observation::error(name, call_id, "cancelled", message, None)
        }
        Error::Limit { limit, message } => {
            let mut o = Observation::error(
                name,
                call_id,
                "limit",
                message,
                Some(format!("the `{limit}` limit stopped the tool; narrow the request, or raise `limits.{limit}` in .toolgate/policy.toml if it is legitimate")),
            );
            o.data = json!({ "limit": limit.as_str() });
            o
        }
        other => Observation::error(name, call_id, "crashed", other.to_string(), None),
    }
}

fn new_call_id() -> String {
    unique_id("call")
}

/// A process-unique, unguessable id: `<prefix>-<16 hex digits>`.
pub fn unique_id(prefix: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(n);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("{prefix}-{:016x}", h.finish())
}
