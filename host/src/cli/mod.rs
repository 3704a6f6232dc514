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
use toolgate::state::AuditQuery;
use toolgate::{Gate, GateOptions, Status};

mod prompt;
mod scaffold;

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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one tool call and print its observation as JSON.
    ///
    /// Exits 0 ok, 1 error (a shell command that exited non-zero, died by a signal or timed
    /// out is an error), 2 usage error, 3 denied, 4 needs approval, 70 the host failed.
    Call {
        /// The tool, e.g. `grep`.
        tool: String,
        /// The input as a JSON object, or `-` to read it from stdin.
        input: Option<String>,
        /// Shorthand for `--grant` of every write tool (write, edit, multiedit).
        #[arg(long)]
        allow_write: bool,
        /// Print the observation on one line instead of indented.
        #[arg(long)]
        compact: bool,
        /// Also serve the component in this file (a test or local tool).
        #[arg(long = "component", value_name = "FILE")]
        components: Vec<PathBuf>,
    },
    /// Serve the tools to an MCP client (stdio by default; `--http ADDR` for streamable HTTP
    /// at http://ADDR/mcp). Each connection is its own session.
    Serve {
        /// Listen for streamable HTTP on ADDR (e.g. 127.0.0.1:8765; port 0 picks one) instead
        /// of stdio. Only loopback addresses unless --allow-remote.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Allow --http on a non-loopback address (anyone who can reach it can run tools).
        #[arg(long, requires = "http")]
        allow_remote: bool,
        /// With --allow-remote: also accept this name in Host/Origin headers. Repeatable.
        #[arg(long = "allowed-host", value_name = "NAME", requires = "allow_remote")]
        allowed_hosts: Vec<String>,
        /// Shorthand for `--grant` of every write tool (write, edit, multiedit).
        #[arg(long)]
        allow_write: bool,
        /// Also serve the component in this file (a test or local tool).
        #[arg(long = "component", value_name = "FILE")]
        components: Vec<PathBuf>,
    },
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
        command: PluginCommand,
    },
    /// Show audit events (oldest first).
    Audit {
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only calls with this decision (`allow`, `deny`, `error`).
        #[arg(long)]
        decision: Option<String>,
        /// Only events newer than this many seconds.
        #[arg(long, value_name = "SECONDS")]
        since: Option<i64>,
        /// Only this call (an observation's `audit_id`).
        #[arg(long)]
        call: Option<String>,
        /// At most this many events (the newest).
        #[arg(long)]
        limit: Option<usize>,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Report syntax errors, failing rule examples, unknown tools and ceiling violations.
    Check,
}

#[derive(Subcommand)]
enum GrantsCommand {
    /// List project grants with their file and line.
    List,
    /// Remove the project grant with exactly this key.
    Revoke {
        /// The grant's key as listed.
        key: String,
    },
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Check a plugin component and its manifest, show what it asks for, and install it.
    Add {
        /// The component (.wasm) to install.
        component: PathBuf,
        /// Its manifest (default: COMPONENT with a .toml extension, else toolgate-plugin.toml
        /// beside it).
        #[arg(long, value_name = "FILE")]
        manifest: Option<PathBuf>,
        /// Install without asking (needed when there is no terminal).
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// List installed plugins, what they were granted, and whether each loads.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove an installed plugin.
    Remove {
        /// The plugin's name (or its tool name, `plugin__NAME`).
        name: String,
    },
    /// Create a new plugin crate to start from.
    New {
        /// The plugin's name (a-z, 0-9, `-`, `_`).
        name: String,
        /// Where to create it (default: ./NAME).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The guest SDK crate to depend on (default: the one in this toolgate checkout).
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum SessionCommand {
    /// Forget the session named by `--session`: its read records are dropped.
    Forget,
}

/// Run the command line.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("toolgate: {e:#}");
            ExitCode::from(EXIT_HOST_FAILURE)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
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
    // Ask on the terminal only when a person is there to answer.
    let approver: Option<Arc<dyn Approver>> =
        if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
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
        ..GateOptions::default()
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let root = workspace(&cli.workspace)?;
    let opts = gate_options(&cli, root.clone());
    match cli.command {
        Command::Call {
            tool,
            input,
            allow_write,
            compact,
            components,
        } => {
            let input = match read_input(input.as_deref()) {
                Ok(v) => v,
                Err(message) => {
                    eprintln!("toolgate: {message}");
                    return Ok(ExitCode::from(2));
                }
            };
            let gate = Gate::open(GateOptions {
                allow_writes: allow_write,
                extra_components: components,
                ..opts
            })
            .await
            .context("cannot open the gate")?;
            let observation = gate.call(&cli.session, &tool, input).await;
            let text = if compact {
                serde_json::to_string(&observation)?
            } else {
                serde_json::to_string_pretty(&observation)?
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}")?;
            out.flush()?;
            Ok(ExitCode::from(match observation.status {
                Status::Ok => 0,
                Status::Error => 1,
                Status::Denied => 3,
                Status::NeedsApproval => 4,
            }))
        }
        Command::Serve {
            http,
            allow_remote,
            allowed_hosts,
            allow_write,
            components,
        } => {
            let gate = Gate::open(GateOptions {
                // Approvals come from each MCP client (elicitation), never from this terminal.
                approver: None,
                allow_writes: allow_write,
                extra_components: components,
                ..opts
            })
            .await
            .context("cannot open the gate")?;
            let gate = Arc::new(gate);
            match http {
                None => {
                    if std::io::stdin().is_terminal() {
                        eprintln!(
                            "toolgate: serving MCP on stdio for {}; start it from an MCP client (see the README, \"Use it from an agent\"), or press Ctrl-D to stop",
                            gate.workspace().root().display()
                        );
                    }
                    toolgate::mcp::serve_stdio(gate).await?
                }
                Some(addr) => {
                    let options = toolgate::mcp::http::HttpOptions {
                        addr,
                        allow_remote,
                        allowed_hosts,
                    };
                    toolgate::mcp::http::serve_http(gate, options, |bound| {
                        eprintln!(
                            "toolgate: serving MCP on http://{bound}{}",
                            toolgate::mcp::http::MCP_PATH
                        );
                    })
                    .await?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools { json } => {
            let gate = Gate::open(opts).await.context("cannot open the gate")?;
            let mut out = std::io::stdout().lock();
            if json {
                let tools = gate.visible_tools();
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
            let problems = gate.check();
            let origin = &gate.policy().origin;
            if problems.is_empty() {
                println!(
                    "{origin}: ok ({} rules, mode {})",
                    gate.policy().rules.len(),
                    gate.mode().as_str()
                );
                return Ok(ExitCode::SUCCESS);
            }
            for p in &problems {
                println!("{p}");
            }
            let errors = problems.iter().any(|p| p.severity == "error");
            Ok(ExitCode::from(if errors { 1 } else { 0 }))
        }
        Command::Grants { command } => {
            let ws = toolgate::gate::scope::Workspace::new(&root, &[])?;
            let grants =
                toolgate::policy::grants::ProjectGrants::new(ws.state_dir().join("grants.toml"));
            match command {
                GrantsCommand::List => match grants.list() {
                    Ok(list) => {
                        for (key, source) in list {
                            println!("{key}\t{source}");
                        }
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
        Command::Plugin { command } => plugin(command, &root, opts).await,
        Command::Session {
            command: SessionCommand::Forget,
        } => {
            let ws = toolgate::gate::scope::Workspace::new(&root, &[])?;
            let db = toolgate::state::StateDb::open(&ws.state_dir().join("state.db"))?;
            let n = db.forget_session(&cli.session)?;
            println!("forgot session `{}` ({n} read records)", cli.session);
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit {
            tool,
            decision,
            since,
            call,
            limit,
            json,
        } => {
            let ws = toolgate::gate::scope::Workspace::new(&root, &[])?;
            let db = toolgate::state::StateDb::open(&ws.state_dir().join("state.db"))?;
            let query = AuditQuery {
                tool,
                decision,
                since_ms: since.map(|s| toolgate::state::now_ms() - s * 1000),
                call_id: call,
                limit,
            };
            let mut out = std::io::stdout().lock();
            for e in db.audit_events(&query)? {
                if json {
                    writeln!(out, "{}", serde_json::to_string(&e)?)?;
                } else {
                    writeln!(
                        out,
                        "{} {} {:<9} {:<10} {}",
                        e.at_ms, e.call_id, e.event, e.tool, e.detail
                    )?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
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

async fn plugin(
    command: PluginCommand,
    root: &std::path::Path,
    opts: GateOptions,
) -> Result<ExitCode> {
    use toolgate::plugins::{PluginStore, TOOL_PREFIX};
    let ws = toolgate::gate::scope::Workspace::new(root, &[])?;
    let store = PluginStore::new(&ws.state_dir());
    match command {
        PluginCommand::Add {
            component,
            manifest,
            yes,
        } => {
            let manifest = match manifest {
                Some(m) => m,
                None => {
                    let sibling = component.with_extension("toml");
                    let beside = component
                        .parent()
                        .unwrap_or(std::path::Path::new("."))
                        .join("toolgate-plugin.toml");
                    if sibling.is_file() {
                        sibling
                    } else if beside.is_file() {
                        beside
                    } else {
                        eprintln!(
                            "toolgate: no manifest for {}: looked for {} and {}; pass one with --manifest FILE",
                            component.display(),
                            sibling.display(),
                            beside.display()
                        );
                        return Ok(ExitCode::from(2));
                    }
                }
            };
            let policy =
                toolgate::policy::Policy::for_workspace(&ws.state_dir(), opts.policy.as_ref())
                    .map_err(|p| toolgate::policy::problems_error(&p))?;
            let sandbox = toolgate::sandbox::Sandbox::new(None)?;
            let pending = match store
                .prepare(&sandbox, &policy.limits, &component, &manifest)
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("toolgate: not installed: {e}");
                    return Ok(ExitCode::from(1));
                }
            };
            let r = &pending.record;
            let list = |v: &[String]| {
                if v.is_empty() {
                    "(nothing)".to_string()
                } else {
                    v.join(", ")
                }
            };
            let mut out = std::io::stdout().lock();
            if r.description.is_empty() {
                writeln!(out, "plugin {} {}", r.name, r.version)?;
            } else {
                writeln!(out, "plugin {} {}: {}", r.name, r.version, r.description)?;
            }
            writeln!(out, "  component  {}", r.source)?;
            writeln!(
                out,
                "  sha256     {}{}",
                r.sha256,
                if pending.unsigned {
                    "  (the manifest names no sha256; this digest is pinned now)"
                } else {
                    "  (matches the manifest)"
                }
            )?;
            writeln!(
                out,
                "  tool       {} ({})",
                pending.tool.name,
                pending.tool.risk.as_str()
            )?;
            writeln!(out, "  imports    {}", pending.imports.join(", "))?;
            writeln!(out, "  asks for")?;
            writeln!(out, "    read     {}", list(&r.capabilities.fs_read))?;
            writeln!(out, "    write    {}", list(&r.capabilities.fs_write))?;
            writeln!(out, "    network  {}", list(&r.capabilities.http))?;
            writeln!(out, "    env      {}", list(&r.capabilities.env))?;
            let l = &r.limits;
            let limit = |v: Option<u64>, unit: &str| {
                v.map_or("the policy's".to_string(), |v| format!("{v} {unit}"))
            };
            writeln!(
                out,
                "  limits     timeout {}, memory {}, output {} (never above the policy's)",
                limit(l.timeout_ms, "ms"),
                limit(l.memory_mb, "MiB"),
                limit(l.max_output_bytes, "bytes"),
            )?;
            if let Some(old) = &pending.replaces {
                writeln!(
                    out,
                    "  replaces   {} {} ({})",
                    old.name, old.version, old.sha256
                )?;
            }
            out.flush()?;
            drop(out);
            if !yes {
                if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
                    eprintln!(
                        "toolgate: not installed: confirm with --yes (no terminal to ask on)"
                    );
                    return Ok(ExitCode::from(2));
                }
                eprint!("Install it with these capabilities? [y/N] ");
                let mut answer = String::new();
                std::io::stdin().read_line(&mut answer)?;
                if !matches!(answer.trim(), "y" | "Y" | "yes") {
                    eprintln!("toolgate: not installed");
                    return Ok(ExitCode::from(1));
                }
            }
            let record = pending.commit()?;
            println!(
                "installed {} {} as `{TOOL_PREFIX}{}` in {}",
                record.name,
                record.version,
                record.name,
                store.dir().join(&record.name).display()
            );
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::List { json } => {
            let gate = Gate::open(opts).await.context("cannot open the gate")?;
            let mut rows = Vec::new();
            for (name, record) in store.list() {
                let tool = toolgate::plugins::tool_name(&name);
                let state = match gate.refused_plugin(&tool) {
                    Some(why) => format!("refused: {why}"),
                    None if gate.tools().any(|t| t.name == tool) => "ok".to_string(),
                    None => "not loaded".to_string(),
                };
                rows.push(serde_json::json!({
                    "name": name,
                    "tool": tool,
                    "version": record.as_ref().map(|r| r.version.clone()).ok(),
                    "sha256": record.as_ref().map(|r| r.sha256.clone()).ok(),
                    "requested": record.as_ref().map(|r| r.capabilities.clone()).ok(),
                    "granted": record.as_ref().map(|r| r.granted.clone()).ok(),
                    "state": state,
                }));
            }
            let mut out = std::io::stdout().lock();
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
            } else if rows.is_empty() {
                writeln!(out, "no plugins installed in {}", store.dir().display())?;
            } else {
                for r in &rows {
                    writeln!(
                        out,
                        "{}\t{}\t{}",
                        r["tool"].as_str().unwrap_or_default(),
                        r["version"].as_str().unwrap_or("?"),
                        r["state"].as_str().unwrap_or_default()
                    )?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Remove { name } => {
            if store.remove(&name)? {
                println!("removed plugin `{name}`");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("toolgate: no plugin `{name}` is installed (see `toolgate plugin list`)");
                Ok(ExitCode::from(1))
            }
        }
        PluginCommand::New { name, dir, sdk } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let sdk = match sdk {
                Some(p) => p,
                None => {
                    let bundled =
                        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-tools/sdk");
                    if !bundled.join("Cargo.toml").is_file() {
                        eprintln!("toolgate: cannot find the guest SDK (looked in {}); pass --sdk PATH to the `guest-tools/sdk` crate of a toolgate checkout", bundled.display());
                        return Ok(ExitCode::from(2));
                    }
                    bundled
                }
            };
            let sdk = std::fs::canonicalize(&sdk)
                .with_context(|| format!("the SDK path {}", sdk.display()))?;
            let files = scaffold::scaffold(&name, &dir, &sdk)?;
            for f in &files {
                println!("created {}", f.display());
            }
            println!(
                "next: cd {} && cargo build --release --target wasm32-wasip2, then `toolgate plugin add` the .wasm (see README.md there)",
                dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
