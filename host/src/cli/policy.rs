//! `toolgate policy`: every layer of the policy and every problem in it, or the decision the
//! ladder would take for one call.

use super::usage_input;
use anyhow::{Context, Result};
use clap::Subcommand;
use std::io::Write;
use std::process::ExitCode;
use toolgate::{Gate, GateOptions};

#[derive(Subcommand)]
pub(super) enum PolicyCommand {
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

/// Run `toolgate policy COMMAND` (`session`: the one `explain` decides the call in).
pub(super) async fn run(
    command: PolicyCommand,
    session: &str,
    opts: GateOptions,
) -> Result<ExitCode> {
    match command {
        PolicyCommand::Check => check(opts).await,
        PolicyCommand::Explain { tool, input } => explain(session, opts, &tool, input).await,
    }
}

/// `toolgate policy check`: the layers, what each applies and ignores, then the problems.
async fn check(opts: GateOptions) -> Result<ExitCode> {
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

/// `toolgate policy explain TOOL [INPUT]`: the decision, stage by stage, without running it.
async fn explain(
    session: &str,
    opts: GateOptions,
    tool: &str,
    input: Option<String>,
) -> Result<ExitCode> {
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
    let explained = gate.explain(session, tool, &input);
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
