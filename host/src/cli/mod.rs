//! Argument parsing and printing. Decides nothing: every decision is the library's.
//!
//! Exit codes of `toolgate call`: 0 ok, 1 the tool failed (`error`), 2 usage error,
//! 3 denied, 4 needs approval; 70 the host itself failed (workspace, state, components).

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use toolgate::state::AuditQuery;
use toolgate::{Gate, GateOptions, Status};

/// Exit code when the host itself failed.
const EXIT_HOST_FAILURE: u8 = 70;

#[derive(Parser)]
#[command(name = "toolgate", version, about = "Run tools for agents and CI through one permission gate, each in a WebAssembly sandbox.")]
struct Cli {
    /// The workspace root (default: the current directory).
    #[arg(long, short = 'w', global = true, env = "TOOLGATE_WORKSPACE")]
    workspace: Option<PathBuf>,
    /// The session: read records (and later grants) belong to it. Separate `toolgate call`
    /// processes with the same name share it.
    #[arg(long, global = true, default_value = "default", env = "TOOLGATE_SESSION")]
    session: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one tool call and print its observation as JSON.
    Call {
        /// The tool, e.g. `grep`.
        tool: String,
        /// The input as a JSON object, or `-` to read it from stdin.
        input: Option<String>,
        /// Let write tools (write, edit, multiedit) run.
        #[arg(long)]
        allow_write: bool,
        /// Print the observation on one line instead of indented.
        #[arg(long)]
        compact: bool,
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
    /// Manage sessions.
    Session {
        #[command(subcommand)]
        command: SessionCommand,
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
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
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

async fn run(cli: Cli) -> Result<ExitCode> {
    let root = workspace(&cli.workspace)?;
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
                workspace: root,
                allow_writes: allow_write,
                extra_components: components,
                ..GateOptions::default()
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
        Command::Tools { json } => {
            let gate = Gate::open(GateOptions {
                workspace: root,
                ..GateOptions::default()
            })
            .await
            .context("cannot open the gate")?;
            let mut out = std::io::stdout().lock();
            if json {
                let tools: Vec<_> = gate.tools().collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&tools)?)?;
            } else {
                writeln!(out, "{:<10} {:<9} {:<8} DESCRIPTION", "TOOL", "RISK", "CEILING")?;
                for t in gate.tools() {
                    let ceiling = match t.ceiling {
                        toolgate::tools::Ceiling::Project => "project",
                        toolgate::tools::Ceiling::Session => "session",
                    };
                    let first = t.description.lines().next().unwrap_or_default();
                    writeln!(out, "{:<10} {:<9} {:<8} {first}", t.name, t.risk.as_str(), ceiling)?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Session { command: SessionCommand::Forget } => {
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
                    writeln!(out, "{} {} {:<9} {:<10} {}", e.at_ms, e.call_id, e.event, e.tool, e.detail)?;
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
