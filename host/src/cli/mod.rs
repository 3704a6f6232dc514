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
mod exit;
mod history;
mod kit;
mod plugin;
mod plugin_add;
mod plugin_oci;
mod plugin_test;
mod prompt;
mod scaffold;
mod serve;

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
    /// The session: read records (and later grants) belong to it. Separate `toolgate call`
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
        command: PolicyCommand,
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
        command: GrantsCommand,
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
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print every policy layer, what each applies and what is ignored, then report syntax
    /// errors, failing rule examples, unknown tools and ceiling violations.
    Check,
    /// Print the decision the ladder would take for one call, stage by stage, without running
    /// it (hooks are named, not run; nobody is asked).
    Explain {
        /// The tool, e.g. `write`.
        tool: String,
        /// The input as a JSON object, or `-` to read it from stdin.
        input: Option<String>,
    },
}

#[derive(Subcommand)]
enum GrantsCommand {
    /// List project grants with their file and line (and the ignored, unsigned ones).
    List,
    /// Add a project grant for KEY, signed with your key (e.g. `write:src/**`).
    Add {
        /// The key pattern to allow for the whole project.
        key: String,
    },
    /// Remove the project grant with exactly this key.
    Revoke {
        /// The grant's key as listed.
        key: String,
    },
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
        Command::Policy {
            command: PolicyCommand::Check,
        } => {
            let gate = match Gate::open(opts).await {
                Ok(gate) => gate,
                Err(toolgate::Error::Policy(problems)) => {
                    println!("{problems}");
                    return Ok(ExitCode::from(1));
                }
                Err(e) => return Err(e).context("cannot open the gate"),
            };
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "layers, lowest first (a higher one overrides; managed is a ceiling):"
            )?;
            for l in &gate.policy().layers {
                let trust = if l.trusted {
                    ""
                } else {
                    "  (untrusted: only what is stricter applies)"
                };
                writeln!(out, "  {:<12} {}{trust}", l.kind.as_str(), l.origin)?;
                if l.applied.is_empty() {
                    writeln!(out, "      applies nothing")?;
                }
                for a in &l.applied {
                    writeln!(out, "      {a}")?;
                }
            }
            let ignored = gate.policy_ignored();
            if !ignored.is_empty() {
                writeln!(out, "ignored:")?;
                for i in &ignored {
                    writeln!(out, "  {i}")?;
                }
                writeln!(out, "  hint: {}", toolgate::policy::TRUST_HINT)?;
            }
            writeln!(
                out,
                "result: mode {}, {} rules, {} hooks\nshell network: {}",
                gate.mode().as_str(),
                gate.policy().rules.len(),
                gate.policy().hooks.len(),
                gate.policy().shell.network_text()
            )?;
            for c in &gate.policy().credentials {
                writeln!(out, "credential: {}", c.describe())?;
            }
            write!(out, "{}", gate.policy().lsp.describe())?;
            writeln!(
                out,
                "secrets denied: {}",
                gate.workspace().guest_denied_globs().join(" ")
            )?;
            let problems = gate.check();
            if problems.is_empty() {
                let p = gate.policy();
                let (rules, mode) = (p.rules.len(), gate.mode().as_str());
                let name = match p.origin.as_str() {
                    "preset default" => "no .toolgate/policy.toml, the built-in default preset",
                    other => other,
                };
                writeln!(out, "{name}: ok ({rules} rules, mode {mode})")?;
                return Ok(ExitCode::SUCCESS);
            }
            for p in &problems {
                writeln!(out, "{p}")?;
            }
            let errors = problems.iter().any(|p| p.severity == "error");
            Ok(ExitCode::from(if errors { 1 } else { 0 }))
        }
        Command::Policy {
            command: PolicyCommand::Explain { tool, input },
        } => {
            let input = match usage_input(input.as_deref()) {
                Ok(v) => v,
                Err(code) => return Ok(code),
            };
            let gate = Gate::open(GateOptions {
                approver: None,
                ..opts
            })
            .await
            .context("cannot open the gate")?;
            let explained = gate.explain(&cli.session, &tool, &input);
            let mut out = std::io::stdout().lock();
            for step in &explained.stages {
                writeln!(
                    out,
                    "{:<20} {:<9} {}",
                    step.stage, step.outcome, step.detail
                )?;
            }
            writeln!(out, "decision: {}", explained.decision)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Trust { yes, forget } => trust(&root, yes, forget),
        Command::Grants { command } => {
            let ws = toolgate::workspace::Workspace::new(&root, &[])?;
            let grants = project_grants(&ws, trust_ws);
            match command {
                GrantsCommand::List => match grants.list() {
                    Ok(list) => {
                        for (key, source) in list {
                            println!("{key}\t{source}");
                        }
                        for i in grants.ignored() {
                            println!("# ignored: {i}");
                        }
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(p) => {
                        eprintln!("toolgate: {p}");
                        Ok(ExitCode::from(1))
                    }
                },
                GrantsCommand::Add { key } => match grants.add(&key, "toolgate grants add") {
                    Ok(()) => {
                        println!(
                            "granted `{key}` for this project ({})",
                            grants.path().display()
                        );
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(p) => {
                        eprintln!("toolgate: {p}");
                        Ok(ExitCode::from(1))
                    }
                },
                GrantsCommand::Revoke { key } => match grants.revoke(&key) {
                    Ok(0) => {
                        eprintln!("toolgate: no project grant with key `{key}` (see `toolgate grants list`)");
                        Ok(ExitCode::from(1))
                    }
                    Ok(n) => {
                        println!("revoked {n} grant(s) for `{key}`");
                        Ok(ExitCode::SUCCESS)
                    }
                    Err(p) => {
                        eprintln!("toolgate: {p}");
                        Ok(ExitCode::from(1))
                    }
                },
            }
        }
        Command::Plugin { command } => plugin::run(command, &root, opts).await,
        Command::Session {
            command: SessionCommand::Forget,
        } => {
            let ws = toolgate::workspace::Workspace::new(&root, &[])?;
            let db = toolgate::state::StateDb::open(
                &ws.state_dir().join(toolgate::workspace::layout::STATE_DB),
            )?;
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

/// The user's signing key (outside every workspace).
fn keyring() -> Arc<toolgate::policy::trust::Keyring> {
    Arc::new(toolgate::policy::trust::Keyring::new(
        &toolgate::userdirs::UserDirs::from_env().config,
    ))
}

fn project_grants(
    ws: &toolgate::workspace::Workspace,
    trust_all: bool,
) -> toolgate::policy::grants::ProjectGrants {
    toolgate::policy::grants::ProjectGrants::signed(
        ws.state_dir()
            .join(toolgate::workspace::layout::GRANTS_FILE),
        ws.root(),
        keyring(),
        trust_all,
    )
}

fn plugin_store(
    ws: &toolgate::workspace::Workspace,
    trust_all: bool,
) -> toolgate::plugins::PluginStore {
    toolgate::plugins::PluginStore::signed(&ws.state_dir(), ws.root(), keyring(), trust_all)
}

/// `toolgate trust`: show what the workspace's own files loosen, then trust them.
fn trust(root: &std::path::Path, yes: bool, forget: bool) -> Result<ExitCode> {
    use toolgate::policy::{trust::TrustStore, LayerSources, Policy};
    let ws = toolgate::workspace::Workspace::new(root, &[])?;
    let user = toolgate::userdirs::UserDirs::from_env();
    let store = TrustStore::new(&user.config);
    if forget {
        let had = store.forget(ws.root()).map_err(anyhow::Error::msg)?;
        println!(
            "{} {}",
            if had {
                "forgot the trust record of"
            } else {
                "no trust record for"
            },
            ws.root().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let sources = LayerSources {
        workspace: ws.root().to_path_buf(),
        user: Some(user.clone()),
        managed: toolgate::policy::managed_policy_path(),
        ..LayerSources::default()
    };
    let layer = Policy::workspace_layer(&sources);
    // What the workspace layer loosens: what is ignored while it is untrusted.
    let untrusted = match Policy::layered(&sources) {
        Ok(p) => p,
        Err(problems) => {
            for p in &problems {
                println!("{p}");
            }
            eprintln!("toolgate: not trusted: fix the policy first (see `toolgate policy check`)");
            return Ok(ExitCode::from(1));
        }
    };
    let file = layer.path.display().to_string();
    let loosens: Vec<_> = untrusted
        .ignored
        .iter()
        .filter(|i| i.file == file)
        .collect();
    let grants = project_grants(&ws, false);
    let unsigned = grants.unsigned_keys().unwrap_or_default();
    let plugins = plugin_store(&ws, false);
    let unsigned_plugins = plugins.unsigned();
    let mut out = std::io::stdout().lock();
    writeln!(out, "workspace  {}", ws.root().display())?;
    match &layer.sha256 {
        Some(h) => writeln!(
            out,
            "policy     {file}
  sha256   {h}"
        )?,
        None => writeln!(out, "policy     (none: {file} does not exist)")?,
    }
    if let Some(by) = &layer.trusted_by {
        writeln!(out, "  already trusted ({by})")?;
    } else if layer.changed_since_trust {
        writeln!(out, "  CHANGED since you trusted it")?;
    }
    if loosens.is_empty() {
        writeln!(out, "  loosens nothing (only stricter settings)")?;
    } else {
        writeln!(out, "  trusting it applies what is ignored now:")?;
        for i in &loosens {
            writeln!(out, "    {}  ({})", i.part, i.reason)?;
        }
    }
    if !unsigned.is_empty() {
        writeln!(
            out,
            "grants     {} entries not written by your toolgate:",
            unsigned.len()
        )?;
        for k in &unsigned {
            writeln!(out, "    {k}")?;
        }
    }
    for r in &unsigned_plugins {
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.join(", ")
            }
        };
        writeln!(
            out,
            "plugin     {} {} (sha256 {}): read {}, write {}, network {}, env {}",
            r.name,
            r.version,
            r.sha256,
            list(&r.granted.fs_read),
            list(&r.granted.fs_write),
            list(&r.granted.http),
            list(&r.granted.env)
        )?;
    }
    out.flush()?;
    drop(out);
    let nothing = (layer.sha256.is_none() || layer.trusted_by.is_some())
        && unsigned.is_empty()
        && unsigned_plugins.is_empty();
    if nothing {
        println!("nothing to trust");
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            eprintln!("toolgate: not trusted: confirm with --yes (no terminal to ask on)");
            return Ok(ExitCode::from(2));
        }
        eprint!("Trust these files of this workspace? [y/N] ");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("toolgate: not trusted");
            return Ok(ExitCode::from(1));
        }
    }
    // Record the hash of what was shown; a file changed meanwhile is not trusted.
    if let (Some(shown), None) = (&layer.sha256, &layer.trusted_by) {
        let now = Policy::workspace_layer(&sources).sha256;
        if now.as_ref() != Some(shown) {
            eprintln!("toolgate: not trusted: {file} changed while you were reviewing it; run `toolgate trust` again");
            return Ok(ExitCode::from(1));
        }
        store.trust(ws.root(), shown).map_err(anyhow::Error::msg)?;
        println!(
            "trusted {file} (sha256 {shown}), recorded in {}",
            store.path().display()
        );
    }
    let n = grants.adopt_all().map_err(|p| anyhow::anyhow!("{p}"))?;
    if n > 0 {
        println!("signed {n} project grant(s) in {}", grants.path().display());
    }
    let n = plugins.adopt_all()?;
    if n > 0 {
        println!("signed {n} plugin record(s)");
    }
    Ok(ExitCode::SUCCESS)
}
