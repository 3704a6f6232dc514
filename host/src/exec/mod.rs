//! The shell: the host side of the `toolgate:host/exec` capability.
//!
//! - [`lex`] decides simple vs compound, [`policy`] holds the argv-aware lists, and
//!   [`key_for_command`] turns a command text into the ladder's key and class;
//! - the gate approves one exact command per call and puts it in the call's capabilities as an
//!   [`ExecGrant`]; the exec host functions run that command and nothing else;
//! - [`run`] spawns (simple: argv, no shell; compound: `bash -c` with exactly the approved
//!   text) in its own process group, [`confine`] applies Landlock, a fresh network and mount
//!   namespace and a scrubbed environment, [`jobs`] keeps background jobs per session.

pub mod catalog;
pub mod confine;
mod error;
mod gitwatch;
pub mod jobs;
pub mod lex;
pub mod lsp;
pub mod netns;
pub mod option_tables;
pub mod options;
pub mod policy;
pub mod prepare;
pub mod process;
pub mod run;
#[cfg(target_os = "linux")]
pub mod seccomp;
pub mod spawner;

pub use confine::Confinement;
pub use error::ExecError;
pub use lex::{lex, Lexed};
pub use policy::Class;

use crate::cancel::CancelToken;
use crate::key::CallKey;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The tool name of the built-in shell.
pub const SHELL_TOOL: &str = "shell";
/// The built-in job tools.
pub const JOB_TOOLS: &[&str] = &["job_output", "job_kill"];
/// A command still running after this long becomes a background job.
pub const DEFAULT_AUTO_BACKGROUND: Duration = Duration::from_secs(60);
/// `run_in_background` returns after about this long (sooner if the command ends).
pub const BACKGROUND_GRACE: Duration = Duration::from_secs(1);
/// The default timeout of a shell command.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// How a command runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// A simple command: exactly these words, program looked up on the scrubbed PATH, no shell.
    Argv(Vec<String>),
    /// A compound command: `bash -c` with exactly this text.
    Bash(String),
}

/// A command text keyed for the ladder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keyed {
    /// `shell:<program>` with `argv` for a simple command, `shell:<exact text>` otherwise.
    pub key: CallKey,
    /// What the lists say.
    pub class: Class,
    /// How it will run.
    pub plan: Plan,
    /// Why it is keyed on its whole text, when it is.
    pub exact_reason: Option<String>,
}

/// Key a command from what will run: simple → `shell:<program>` with its argv; compound,
/// wrappers and program-running options → `shell:<exact text>`.
pub fn key_for_command(text: &str) -> (CallKey, Class) {
    let k = keyed(text, &[]);
    (k.key, k.class)
}

/// [`key_for_command`] with the policy's extra banned programs, and the plan.
pub fn keyed(text: &str, extra_banned: &[String]) -> Keyed {
    let whole = CallKey::with_target(SHELL_TOOL, text);
    match lex(text) {
        Lexed::Simple(argv) => {
            let class = if let Some(why) = policy::banned(&argv, extra_banned) {
                Class::Banned(why)
            } else if let Some(why) = policy::dangerous(&argv) {
                Class::Dangerous(why)
            } else if policy::exact_text(&argv).is_none() && policy::read_only(&argv) {
                Class::ReadOnly
            } else {
                Class::Normal
            };
            let exact_reason = policy::exact_text(&argv);
            let key = if exact_reason.is_some() {
                whole
            } else if matches!(class, Class::Dangerous(_)) {
                // Keyed on the whole text (with its argv for patterns), so a session answer or
                // `--grant` for it names exactly this command, never the program.
                CallKey {
                    argv: Some(argv.clone()),
                    ..whole
                }
            } else {
                CallKey {
                    tool: SHELL_TOOL.to_string(),
                    target: Some(argv[0].clone()),
                    argv: Some(argv.clone()),
                }
            };
            Keyed {
                key,
                class,
                plan: Plan::Argv(argv),
                exact_reason,
            }
        }
        Lexed::Compound(why) => {
            let segments = policy::segments(text);
            let class = segments
                .iter()
                .find_map(|s| policy::banned(s, extra_banned))
                .map(Class::Banned)
                .or_else(|| {
                    segments
                        .iter()
                        .find_map(|s| policy::dangerous(s))
                        .map(Class::Dangerous)
                })
                .unwrap_or(Class::Normal);
            Keyed {
                key: whole,
                class,
                plan: Plan::Bash(text.to_string()),
                exact_reason: Some(format!("compound: {why}")),
            }
        }
    }
}

/// The one command the gate approved for one call: what the exec host function may run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovedCommand {
    /// The exact text that was approved (the guest must pass exactly this).
    pub text: String,
    /// How it runs.
    pub plan: Plan,
    /// The key it was approved under.
    pub key: String,
    /// Its class, for the observation (`read-only`, `normal`, `dangerous`).
    pub class: &'static str,
    /// The host working directory (inside the workspace, checked by the gate).
    pub cwd: PathBuf,
    /// Kill the process group after this long.
    pub timeout: Duration,
    /// Become a background job after this long.
    pub auto_background: Duration,
    /// Start in the background.
    pub background: bool,
    /// The command's own network namespace behind the egress proxy (`None`: no network, or
    /// the whole network when the policy gives it).
    pub net: Option<netns::CommandNet>,
}

/// Shell settings from the policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecConfig {
    /// Give commands the network (no fresh network namespace).
    pub network: bool,
    /// Extra environment variables passed through (never loader-injection variables).
    pub env: Vec<String>,
    /// Deny instead of running unconfined.
    pub require_confinement: bool,
    /// Programs banned on top of the built-in list.
    pub banned: Vec<String>,
    /// Content budget for stdout + stderr previews.
    pub output_budget: usize,
    /// Most processes and threads the gate's running commands may have at once, together (a
    /// command forked from the host, such as a language server, has this limit of its own).
    pub max_processes: u32,
    /// Host paths mounted read-only into every command's view (`[shell] read`).
    pub read: Vec<PathBuf>,
    /// Host paths mounted writable into normal commands' views (`[shell] write`).
    pub write: Vec<PathBuf>,
    /// Brokered credentials: the variables that hold their placeholders, and the real values
    /// no command may get (a variable holding one is dropped, whatever its name).
    pub credentials: CredentialEnv,
}

/// What commands see of the brokered credentials.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CredentialEnv {
    /// `(variable, placeholder)`.
    pub placeholders: Vec<(String, String)>,
    /// The real values.
    pub hidden: Vec<String>,
}

impl std::fmt::Debug for CredentialEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values.
        f.debug_struct("CredentialEnv")
            .field("placeholders", &self.placeholders)
            .field("hidden", &self.hidden.len())
            .finish()
    }
}

impl CredentialEnv {
    /// Drop every variable holding a real value, then set the placeholders.
    pub fn apply(&self, env: &mut Vec<(String, String)>) {
        env.retain(|(_, v)| !self.hidden.iter().any(|h| v.contains(h.as_str())));
        for (k, ph) in &self.placeholders {
            env.retain(|(name, _)| name != k);
            env.push((k.clone(), ph.clone()));
        }
    }
}

/// The exec capability's host state for one gate: workspace, settings, background jobs.
pub struct ExecHost {
    /// The workspace root (canonical).
    pub workspace: PathBuf,
    /// Settings.
    pub config: ExecConfig,
    /// Background jobs of every session; they die with the gate.
    pub jobs: jobs::JobTable,
    /// Starts commands without forking the (large) host process.
    pub spawner: spawner::Spawner,
    /// Finds what each command's view must hide or freeze in the workspace.
    pub finder: crate::workspace::view::Finder,
}

impl ExecHost {
    /// The exec host for a workspace.
    pub fn new(workspace: PathBuf, config: ExecConfig) -> Self {
        ExecHost {
            // Without a deny-list the view still hides `.toolgate/` and freezes git dirs.
            finder: crate::workspace::view::Finder::new(workspace.clone(), Box::new(|_| false)),
            workspace,
            spawner: spawner::Spawner::with_pids_limit(config.max_processes),
            config,
            jobs: jobs::JobTable::default(),
        }
    }

    /// Hide from commands what `is_secret` (the file tools' deny-list on a workspace-relative
    /// path) denies.
    pub fn with_secrets(mut self, is_secret: Box<dyn Fn(&str) -> bool + Send + Sync>) -> Self {
        self.finder = crate::workspace::view::Finder::new(self.workspace.clone(), is_secret);
        self
    }

    /// What the next command's view must hide and freeze (the state directory and git
    /// directories even without a deny-list).
    pub fn view_plan(&self) -> Result<Arc<crate::workspace::view::Plan>, ExecError> {
        self.finder.plan().map_err(ExecError::View)
    }

    /// Which confinement commands would get here (probed once per process).
    pub fn confinement(&self) -> Confinement {
        confine::available(self.config.network)
    }
}

impl Drop for ExecHost {
    fn drop(&mut self) {
        // Ended commands' private directories are removed in the background; let that finish
        // before the host goes away.
        confine::finish_cleanup(Duration::from_secs(5));
    }
}

/// What one call may do with the exec capability: run the approved command (the shell), or
/// reach this session's jobs (the job tools). Put into the call's capabilities by the gate.
#[derive(Clone)]
pub struct ExecGrant {
    /// The command approved for this call (`None`: `run` is refused).
    pub approved: Option<ApprovedCommand>,
    /// Whose jobs `job-output` / `job-kill` may reach.
    pub session: String,
    /// The call's audit id (names saved outputs).
    pub call_id: String,
    /// The gate's exec host.
    pub host: Arc<ExecHost>,
}

impl std::fmt::Debug for ExecGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecGrant")
            .field("approved", &self.approved)
            .field("session", &self.session)
            .finish()
    }
}

impl PartialEq for ExecGrant {
    fn eq(&self, other: &Self) -> bool {
        self.approved == other.approved
            && self.session == other.session
            && self.call_id == other.call_id
    }
}

impl Eq for ExecGrant {}

/// What a process did (the host's side of the WIT `outcome`).
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// `exited`, `running`, `timed-out` or `killed`.
    pub state: run::State,
    /// Exit code when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// stdout preview and totals.
    pub stdout: run::StreamView,
    /// stderr preview and totals.
    pub stderr: run::StreamView,
    /// Milliseconds since it started.
    pub duration_ms: u64,
    /// The job id, when it is (or was) a job.
    pub job_id: Option<String>,
    /// `.toolgate/outputs/…` when a preview was cut.
    pub full_output_ref: Option<String>,
    /// Host facts (JSON).
    pub data: serde_json::Value,
}

/// The `run` host function: only the approved command, and only once per call.
pub async fn host_run(
    grant: Option<&mut ExecGrant>,
    text: &str,
    background: bool,
    cancel: &CancelToken,
) -> Result<Outcome, ExecError> {
    let Some(grant) = grant else {
        return Err(ExecError::NotGranted);
    };
    let Some(approved) = grant.approved.take() else {
        return Err(ExecError::NotApproved);
    };
    if approved.text != text {
        return Err(ExecError::NotTheApprovedCommand {
            approved: approved.text,
            asked: text.to_string(),
        });
    }
    let _ = background; // the approved flag decides
    let host = grant.host.clone();
    let session = grant.session.clone();
    let call_id = grant.call_id.clone();
    let cancel = cancel.clone();
    tokio::task::spawn_blocking(move || {
        run::run_approved(&host, &session, &call_id, approved, cancel)
    })
    .await
    .map_err(|e| ExecError::Worker(e.to_string()))?
}

/// The `job-output` host function.
pub async fn host_job_output(
    grant: Option<&ExecGrant>,
    job_id: &str,
) -> Result<Outcome, ExecError> {
    let Some(grant) = grant else {
        return Err(ExecError::JobsNotGranted);
    };
    grant
        .host
        .jobs
        .output(&grant.host, &grant.session, job_id, &grant.call_id)
}

/// The `job-kill` host function.
pub async fn host_job_kill(grant: Option<&ExecGrant>, job_id: &str) -> Result<Outcome, ExecError> {
    let Some(grant) = grant else {
        return Err(ExecError::JobsNotGranted);
    };
    let host = grant.host.clone();
    let (session, id, call_id) = (
        grant.session.clone(),
        job_id.to_string(),
        grant.call_id.clone(),
    );
    tokio::task::spawn_blocking(move || host.jobs.kill(&host, &session, &id, &call_id))
        .await
        .map_err(|e| ExecError::Worker(e.to_string()))?
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
