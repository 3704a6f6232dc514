//! Argument parsing and printing. Decides nothing: every decision is the library's.
//!
//! Exit codes of `toolgate call`: 0 ok, 1 the tool failed (`error`; a shell command that
//! exited non-zero, died by a signal or timed out is one), 2 usage error, 3 denied, 4 needs
//! approval; 70 the host itself failed (workspace, state, components).

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde_json::Value;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use toolgate::gate::approval::Approver;
use toolgate::policy::{Mode, PolicySource};
use toolgate::{Gate, GateOptions};

mod audit;
mod call;
mod doctor;
mod exit;
mod history;
mod kit;
mod plugin;
mod plugin_add;
mod plugin_oci;
mod plugin_test;
mod policy;
mod prompt;
mod scaffold;
mod serve;
mod trust;

use trust::plugin_store;

/// Exit code when the host itself failed.
const EXIT_HOST_FAILURE: u8 = 70;

#[derive(Parser)]
#[command(
    name = "toolgate",
    version,
    about = "Run tools for agents and CI through one permission gate, each in a WebAssembly sandbox."
)]
struct Cli {
    /// The workspace root (default: the current directory).
    #[arg(long, short = 'w', global = true, env = "TOOLGATE_WORKSPACE")]
    workspace: Option<PathBuf>,
    /// The session: read records and session grants belong to it. Separate `toolgate call`
    /// processes with the same name share it.
    #[arg(
        long,
        global = true,
        default_value = "default",
        env = "TOOLGATE_SESSION"
    )]
    session: String,
    /// Use this policy file instead of .toolgate/policy.toml.
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "preset")]
    policy: Option<PathBuf>,
    /// Use a shipped policy preset: default, ci, readonly.
    #[arg(long, global = true, value_name = "NAME")]
    preset: Option<String>,
    /// Override the policy's mode: safe, ask, allow-all.
    #[arg(long, global = true, value_parser = parse_mode)]
    mode: Option<Mode>,
    /// Allow calls matching KEY for this run (session scope), e.g. `edit:src/**`. Repeatable.
    #[arg(long = "grant", global = true, value_name = "KEY")]
    grants: Vec<String>,
    /// Apply the workspace's own policy, grants and plugins for this run without a
    /// `toolgate trust` record (CI on a repository it checked out on purpose). Also
    /// TOOLGATE_TRUST_WORKSPACE=1.
    #[arg(long, global = true)]
    trust_workspace: bool,
    #[command(subcommand)]
    command: Command,
    /// Whether `--session` was given on the command line (not from the environment or the
    /// default): `history` and `undo` then act on that session only.
    #[arg(skip)]
    session_given: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run one tool call and print its observation as JSON.
    ///
    /// Exits 0 ok, 1 error (a shell command that exited non-zero, died by a signal or timed
    /// out is an error), 2 usage error, 3 denied, 4 needs approval, 70 the host failed.
    Call(call::CallArgs),
    /// Serve the tools to an MCP client (stdio by default; `--http ADDR` for streamable HTTP
    /// at http://ADDR/mcp, with the console at http://ADDR/). Each connection is its own
    /// session.
    Serve(serve::ServeArgs),
    /// Open the console (approvals, live audit, grants, history and undo) in the browser:
    /// `serve --http` on a free loopback port, its address printed with the token.
    Console(serve::ConsoleArgs),
    /// List the tools with their risk and capabilities.
    Tools {
        /// Print JSON (name, description, schema, risk, ceiling, imports, digest).
        #[arg(long)]
        json: bool,
    },
    /// Check the policy and the grants file and report every problem with file and line.
    Policy {
        #[command(subcommand)]
        command: policy::PolicyCommand,
    },
    /// Review the workspace's own policy, grants and plugins and trust them: shows exactly
    /// what they loosen, then records the policy's sha256 in your trust.toml and signs the
    /// grants and plugin records with your key. A changed policy is untrusted again.
    Trust {
        /// Trust without asking (needed when there is no terminal).
        #[arg(long, short = 'y')]
        yes: bool,
        /// Forget this workspace's trust record instead.
        #[arg(long, conflicts_with = "yes")]
        forget: bool,
    },
    /// Project grants saved in .toolgate/grants.toml.
    Grants {
        #[command(subcommand)]
        command: trust::GrantsCommand,
    },
    /// Manage sessions.
    Session {
        #[command(subcommand)]
        command: SessionCommand,
    },
    /// Third-party plugins installed in this workspace (.toolgate/plugins/).
    Plugin {
        #[command(subcommand)]
        command: plugin::PluginCommand,
    },
    /// Show the audit trail: one line per call, or JSON lines.
    Audit(audit::AuditArgs),
    /// Show every version of a file (or of every file); `--session S` only that session's.
    History(history::HistoryArgs),
    /// Put back what a call changed: `undo CALL_ID`, `undo --last`, or `undo --session S`
    /// for every call of a session, newest first.
    Undo(history::UndoArgs),
    /// Show what confinement shell commands get on this host for this user, layer by layer,
    /// with the cause and fix of each gap. Exits 1 when the policy's `require_confinement`
    /// would refuse the shell here, 0 otherwise.
    Doctor(doctor::DoctorArgs),
}

#[derive(Subcommand)]
enum SessionCommand {
    /// Forget the session named by `--session`: its read records are dropped.
    Forget,
}

/// Run the command line.
pub fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    cli.session_given = history::session_given(&matches);
    if let Command::Serve(serve::ServeArgs {
        state_key_file: Some(file),
        ..
    }) = &cli.command
    {
        // Before any thread exists: the MCP server reads the key file's name from here once.
        std::env::set_var(toolgate::mcp::mrtr::STATE_KEY_FILE_ENV, file);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .event_interval(EVENT_INTERVAL)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolgate: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_HOST_FAILURE);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => exit::report(e),
    }
}

/// How many tasks a runtime worker runs before it looks for new I/O and timers while it has
/// tasks waiting (tokio's default is 61; a worker with nothing to run looks at once). A busy
/// `serve --http` that looked every 61 tasks took each batch of newly readable connections in
/// ahead of the tasks already waiting, one of them first of all (the worker's LIFO slot):
/// under the load script (100 calls in flight) `read` p99 was 21.1-23.0 ms; looking about once
/// per turn of the worker's queue (256 tasks, its local capacity) it was 19.8-20.9 ms, with
/// calls/s +1-2% (docs/benchmarks.md). One connection at a time never has tasks waiting, so
/// its calls do not change.
const EVENT_INTERVAL: u32 = 256;

fn workspace(cli_ws: &Option<PathBuf>) -> Result<PathBuf> {
    match cli_ws {
        Some(p) => Ok(p.clone()),
        None => std::env::current_dir().context("cannot read the current directory"),
    }
}

fn parse_mode(s: &str) -> std::result::Result<Mode, String> {
    Mode::parse(s).ok_or_else(|| format!("unknown mode `{s}`; use safe, ask or allow-all"))
}

fn gate_options(cli: &Cli, root: PathBuf) -> GateOptions {
    let policy = match (&cli.policy, &cli.preset) {
        (Some(file), _) => Some(PolicySource::File(file.clone())),
        (None, Some(name)) => Some(PolicySource::Preset(name.clone())),
        (None, None) => None,
    };
    // Ask on the terminal only when a person is there; never under the ci preset (headless).
    let headless = cli.preset.as_deref() == Some("ci");
    let approver: Option<Arc<dyn Approver>> =
        if !headless && std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            Some(Arc::new(prompt::TerminalApprover))
        } else {
            None
        };
    GateOptions {
        workspace: root,
        policy,
        mode: cli.mode,
        grants: cli.grants.clone(),
        approver,
        trust_workspace: trust_workspace(cli),
        // A first use compiles a component for a second or so: say so on stderr.
        sandbox: toolgate::sandbox::SandboxOptions {
            progress: true,
            one_shot: false,
        },
        ..GateOptions::default()
    }
}

/// `--trust-workspace` or `TOOLGATE_TRUST_WORKSPACE=1`.
fn trust_workspace(cli: &Cli) -> bool {
    cli.trust_workspace
        || std::env::var("TOOLGATE_TRUST_WORKSPACE")
            .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
}

/// Say once on stderr what of the workspace's own files is ignored, and how to trust them.
pub(crate) fn warn_ignored(gate: &Gate) {
    let ignored = gate.policy_ignored();
    if ignored.is_empty() {
        return;
    }
    for i in &ignored {
        eprintln!("toolgate: {i}");
    }
    eprintln!("toolgate: {}", toolgate::policy::TRUST_HINT);
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let root = workspace(&cli.workspace)?;
    let opts = gate_options(&cli, root.clone());
    let trust_ws = trust_workspace(&cli);
    match cli.command {
        Command::Call(args) => call::call(&cli.session, opts, args).await,
        Command::Serve(args) => serve::serve(opts, args).await,
        Command::Console(args) => serve::console(opts, args).await,
        Command::Tools { json } => {
            let gate = Gate::open(opts).await.context("cannot open the gate")?;
            gate.preload().await;
            let mut out = std::io::stdout().lock();
            if json {
                let tools = gate.listed_tools();
                writeln!(out, "{}", serde_json::to_string_pretty(&tools)?)?;
            } else {
                writeln!(
                    out,
                    "{:<10} {:<9} {:<8} DESCRIPTION",
                    "TOOL", "RISK", "CEILING"
                )?;
                for t in gate.visible_tools() {
                    let ceiling = match t.ceiling {
                        toolgate::tools::Ceiling::Project => "project",
                        toolgate::tools::Ceiling::Session => "session",
                    };
                    let first = t.description.lines().next().unwrap_or_default();
                    writeln!(
                        out,
                        "{:<10} {:<9} {:<8} {first}",
                        t.name,
                        t.risk.as_str(),
                        ceiling
                    )?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Policy { command } => policy::run(command, &cli.session, opts).await,
        Command::Trust { yes, forget } => trust::trust(&root, yes, forget),
        Command::Grants { command } => trust::grants(&root, command, trust_ws),
        Command::Plugin { command } => plugin::run(command, &root, opts).await,
        Command::Session {
            command: SessionCommand::Forget,
        } => {
            let ws = toolgate::workspace::Workspace::new(&root, &[])?;
            let db = open_state(&ws)?;
            let n = db.forget_session(&cli.session)?;
            println!("forgot session `{}` ({n} read records)", cli.session);
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(args) => audit::run(&root, args),
        Command::History(args) => history::history(
            &root,
            args,
            cli.session_given.then_some(cli.session.as_str()),
        ),
        Command::Undo(args) => history::undo(
            &root,
            args,
            cli.session_given.then_some(cli.session.as_str()),
            &cli.session,
        ),
        Command::Doctor(args) => doctor::run(opts, args),
    }
}

/// The call's input, or the usage exit code after saying why on stderr.
fn usage_input(arg: Option<&str>) -> std::result::Result<Value, ExitCode> {
    read_input(arg).map_err(|message| {
        eprintln!("toolgate: {message}");
        ExitCode::from(2)
    })
}

fn read_input(arg: Option<&str>) -> std::result::Result<Value, String> {
    let text = match arg {
        None => "{}".to_string(),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| format!("cannot read the input from stdin: {e}"))?;
            s
        }
        Some(s) => s.to_string(),
    };
    serde_json::from_str(&text).map_err(|e| format!("the input is not valid JSON: {e}"))
}

/// The workspace's state database for a command that reads or restores from it (`audit`,
/// `history`, `undo`, `session forget`), checked like a gate checks it: a database without a
/// marker signed with this user's key (a repository's own, another user's) is quarantined
/// before anything in it is shown or written back.
pub(crate) fn open_state(
    ws: &toolgate::workspace::Workspace,
) -> toolgate::Result<toolgate::state::StateDb> {
    let db = toolgate::state::StateDb::open(
        &ws.state_dir().join(toolgate::workspace::layout::STATE_DB),
    )?;
    let keyring =
        toolgate::policy::trust::Keyring::new(&toolgate::userdirs::UserDirs::from_env().config);
    db.authenticate(&keyring, ws.root())?;
    Ok(db)
}
