//! `toolgate doctor`: the confinement this host gives this user's shell commands, layer by
//! layer with the exact cause and fix of each gap, and what the tools will do under the
//! workspace's policy. Exits 1 when that policy would refuse the shell here, so a CI job can
//! check its runner before it starts.

use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::process::ExitCode;
use toolgate::exec::confine::report::HostReport;
use toolgate::policy::{LayerSources, Policy};
use toolgate::GateOptions;

#[derive(Args)]
pub(super) struct DoctorArgs {
    /// Print JSON (the policy's settings and the report).
    #[arg(long)]
    json: bool,
}

/// Run `toolgate doctor`. Only the policy is loaded (as a gate would layer it), so it works
/// in a directory it may not write to and leaves no state behind.
pub(super) fn run(opts: GateOptions, args: DoctorArgs) -> Result<ExitCode> {
    let root = toolgate::workspace::Workspace::root_of(&opts.workspace)
        .context("cannot open the workspace")?;
    let policy = Policy::layered(&LayerSources {
        workspace: root.clone(),
        user: Some(
            opts.user_dirs
                .clone()
                .unwrap_or_else(toolgate::userdirs::UserDirs::from_env),
        ),
        cli: opts.policy.clone(),
        cli_mode: opts.mode,
        managed: opts
            .managed_policy
            .clone()
            .or_else(toolgate::policy::managed_policy_path),
        trust_workspace: opts.trust_workspace,
    })
    .map_err(|p| toolgate::policy::problems_error(&p))?;
    // The workspace's loosening parts do not apply until trusted: the report is about what
    // does.
    for i in &policy.ignored {
        eprintln!("toolgate: {i}");
    }
    if !policy.ignored.is_empty() {
        eprintln!("toolgate: {}", toolgate::policy::TRUST_HINT);
    }
    let report = HostReport::gather(policy.require_confinement, policy.shell.network);
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut v = report.to_json();
        v["workspace"] = root.display().to_string().into();
        v["policy"] = serde_json::json!({
            "origin": policy.origin,
            "require_confinement": policy.require_confinement,
            "shell_network": policy.shell.network_text(),
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        writeln!(
            out,
            "workspace {}, policy {}\nnetwork  {}",
            root.display(),
            policy.origin,
            policy.shell.network_text()
        )?;
        write!(out, "{}", report.render())?;
        if report.refuses_shell {
            writeln!(
                out,
                "\nthe policy refuses the shell on this host: fix the causes above, or drop `require_confinement`"
            )?;
        }
    }
    Ok(ExitCode::from(if report.refuses_shell { 1 } else { 0 }))
}
