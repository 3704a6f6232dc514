//! `toolgate call`: one tool call, its observation printed as JSON.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use toolgate::{Gate, GateOptions, Status};

#[derive(clap::Args)]
pub(super) struct CallArgs {
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
    /// After the observation, print on stderr how long the call took and the host process's
    /// peak memory (its resident set's high-water mark, read from the kernel).
    #[arg(long)]
    stats: bool,
}

pub(super) async fn call(session: &str, opts: GateOptions, args: CallArgs) -> Result<ExitCode> {
    let began = Instant::now();
    let input = match super::usage_input(args.input.as_deref()) {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let gate = Gate::open(GateOptions {
        allow_writes: args.allow_write,
        extra_components: args.components,
        sandbox: toolgate::sandbox::SandboxOptions {
            one_shot: true,
            ..opts.sandbox
        },
        ..opts
    })
    .await
    .context("cannot open the gate")?;
    super::warn_ignored(&gate);
    let tool = args.tool;
    let observation = gate.call(session, &tool, input).await;
    let text = if args.compact {
        serde_json::to_string(&observation)?
    } else {
        serde_json::to_string_pretty(&observation)?
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    let code = match observation.status {
        Status::Ok => 0,
        Status::Error => 1,
        Status::Denied => 3,
        Status::NeedsApproval => 4,
    };
    if args.stats {
        eprintln!("{}", stats_line(&tool, began));
    }
    // A one-shot call needs nothing more once its audit is written: no teardown of the engine,
    // the runtime or the state database (whose closing checkpoint fsyncs three times; the audit
    // writer's own checkpoints keep the WAL bounded). Shell and language-server calls keep the
    // orderly exit, which ends the jobs and servers they started and removes their private
    // directories.
    if !matches!(tool.as_str(), "shell" | "job_output" | "job_kill") && !tool.starts_with("lsp_") {
        gate.state().flush_for_exit();
        drop(out);
        std::process::exit(i32::from(code));
    }
    Ok(ExitCode::from(code))
}

/// `toolgate: read took 12.3 ms; host peak memory 41234 KiB`. The peak is `VmHWM` of this
/// process's own address space: unlike `getrusage`, it never includes what the parent had
/// resident when it started this process.
fn stats_line(tool: &str, began: Instant) -> String {
    let ms = began.elapsed().as_secs_f64() * 1000.0;
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        });
    match peak {
        Some(kib) => format!("toolgate: {tool} took {ms:.1} ms; host peak memory {kib} KiB"),
        None => format!(
            "toolgate: {tool} took {ms:.1} ms; host peak memory unknown (no /proc/self/status)"
        ),
    }
}
