//! Opening a gate (the policy layers, the state database, the registry, the exec host) and
//! what it tells its surfaces: the tools, the mode, the policy's problems.

use super::approval::{self, Approver, Broker};
use super::Gate;
use crate::error::{Error, Result};
use crate::exec::ExecHost;
use crate::key::{KeyPattern, RuleDecision};
use crate::policy::grants::ProjectGrants;
use crate::policy::{Mode, Policy, PolicySource, Problem};
use crate::sandbox::{FsDeny, Limits, Sandbox};
use crate::state::StateDb;
use crate::tools::registry::RegisteredTool;
use crate::tools::{Ceiling, Registry, Risk, ToolInfo};
use crate::workspace::Workspace;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

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
    /// Who reads the observations' hints (they name what that reader can do).
    pub surface: Surface,
}

/// Who reads a gate's hints: a person at the command line can pass a flag; a model behind an
/// MCP client cannot, and is told what to ask its user for instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Surface {
    /// `toolgate call` and the library: flags and commands the reader can type.
    #[default]
    Cli,
    /// A model behind an MCP client on stdio.
    McpStdio,
    /// A model behind an MCP client over HTTP, where the console can answer approvals.
    McpHttp,
}

impl Gate {
    /// Open the gate for a workspace: load the policy, the tools and the state database. A
    /// policy with problems stops here with every problem listed.
    pub async fn open(options: GateOptions) -> Result<Self> {
        // The JSON Schema meta-schemas tools' input schemas are checked against are built once
        // per process (~4-12 ms): beside the policy and state set-up, not on the first tool load.
        crate::tools::input_schema::warm(options.sandbox.one_shot);
        let probe_root = Workspace::root_of(&options.workspace)?;
        let user = options
            .user_dirs
            .clone()
            .unwrap_or_else(crate::userdirs::UserDirs::from_env);
        let sources = crate::policy::LayerSources {
            workspace: probe_root,
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
        let mut extra_names = Vec::new();
        for file in &options.extra_components {
            extra_names.push(registry.add_file(&sandbox, &limits, file).await?.name);
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
        for g in &cli_grants {
            if let Some(message) = unknown_tool(g.tool(), &extra_names, "--grant", g.as_str()) {
                return Err(Error::Policy(message));
            }
        }
        let denied_globs = workspace.guest_denied_globs();
        let fs_deny = Arc::new(FsDeny::new(workspace.share()));
        // The secrets' identities, taken now, before a process outside the host can move
        // them: a secret directory or file later exchanged with a plain one, or renamed, is
        // still denied under its new name (workspace/view/remember.rs).
        if let Err(e) = fs_deny.index_secrets() {
            tracing::warn!(error = %e, "secrets are denied by name only: where they are could not be found");
        }
        // The values in the deny-listed files, redacted by value (every form) from the audit
        // and the observations, read again when a file changes, for as long as this gate
        // lives.
        {
            let deny = Arc::downgrade(&fs_deny);
            crate::state::secrets::watch_workspace(
                workspace.root().to_path_buf(),
                Box::new(move || deny.upgrade().map(|d| d.secret_file_paths())),
            );
        }
        let project_grants = ProjectGrants::signed(
            workspace
                .state_dir()
                .join(crate::workspace::layout::GRANTS_FILE),
            workspace.root(),
            keyring.clone(),
            workspace_trusted,
        );
        let credentials = super::credentials::load(&policy, workspace.root());
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
                    credentials: super::credentials::env(&credentials),
                },
            )
            .with_secrets({
                let deny = workspace.share();
                Box::new(move |rel: &str| deny.is_secret(rel))
            }),
        );
        let lsp = Arc::new(crate::exec::lsp::LspHost::new(
            exec_host.clone(),
            workspace.share(),
            super::lsp::config(&policy, workspace.root()),
        ));
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
            surface: options.surface,
            denied_globs,
            known_sessions: Default::default(),
            in_flight: Default::default(),
            told_ignored: Default::default(),
            fs_deny,
            exec_host,
            credentials,
            lsp,
            scans_apart: Default::default(),
        })
    }

    /// Run the guests of scans (`grep`, `glob`, `ls`) on a thread of their own, so quick
    /// calls never wait behind one on a runtime worker: for a server with many calls in
    /// flight (see `crate::sandbox::bulk`).
    pub fn run_scans_apart(&self) {
        self.scans_apart
            .store(true, std::sync::atomic::Ordering::Relaxed);
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
    pub(crate) fn tool(&self, name: &str) -> Option<Arc<RegisteredTool>> {
        self.registry.tool_now(&self.sandbox, &self.limits, name)
    }

    pub(crate) fn visible_names(&self) -> Vec<String> {
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
                let names: Vec<String> = self.tools().map(|t| t.name.clone()).collect();
                if let Some(message) = unknown_tool(tool, &names, "rule", rule.pattern.as_str()) {
                    problems.push(Problem {
                        location: rule.source.clone(),
                        message,
                        severity: "error",
                    });
                }
            }
            if rule.decision == RuleDecision::Allow {
                for t in self.tools().filter(|t| t.ceiling == Ceiling::Session) {
                    if tool == "*" || tool == t.name {
                        problems.push(Problem {
                            location: rule.source.clone(),
                            message: format!("allow rule `{}` reaches `{}`, which runs real host processes and can only be allowed per session; the rule is not honoured for it (allow it for a run with --grant, or answer `session` when asked)", rule.pattern.as_str(), t.name),
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
                                message: format!("grant `{}` reaches `{}`, which runs real host processes and can only be allowed per session; the grant is not honoured for it (remove it with `toolgate grants revoke`)", g.pattern.as_str(), t.name),
                                severity: "error",
                            });
                        }
                    }
                }
            }
        }
        problems
    }
}

/// The error for a `--grant` or rule naming a tool that does not exist (`eddit`), with the
/// nearest real name; `None` when `tool` is one (a built-in, an extra component in `known`,
/// or a plugin's `plugin__NAME`, which may be installed later).
fn unknown_tool(tool: &str, known: &[String], what: &str, pattern: &str) -> Option<String> {
    let builtin = crate::tools::Builtin::ALL.map(|b| b.as_str());
    if tool == "*"
        || tool == super::egress::NET_KEY
        || tool.starts_with("plugin__")
        || builtin.contains(&tool)
        || known.iter().any(|k| k == tool)
    {
        return None;
    }
    let candidates = builtin
        .iter()
        .copied()
        .chain(known.iter().map(String::as_str));
    let hint = match crate::text::closest(tool, candidates) {
        Some(near) => format!(" (did you mean `{near}`?)"),
        None => String::new(),
    };
    Some(format!("{what} `{pattern}` names the unknown tool `{tool}`{hint}; `toolgate tools` lists the tools"))
}
