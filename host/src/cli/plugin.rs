//! `toolgate plugin …`: install, list and remove plugins, start a new one, and print the WIT
//! a plugin may use.

use super::{plugin_store, scaffold};
use anyhow::{Context, Result};
use clap::Subcommand;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use toolgate::{Gate, GateOptions};

#[derive(Subcommand)]
pub(super) enum PluginCommand {
    /// Check a plugin component and its manifest, show what it asks for, and install it.
    Add(super::plugin_add::AddArgs),
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
    /// Create a new plugin to start from (Rust by default).
    New(scaffold::NewArgs),
    /// Print the WIT a plugin implements (the `toolgate:tool` world it must export), or write
    /// it under DIR.
    Wit {
        /// Write the files under this directory instead of printing them.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Publish an installed-ready plugin (component and manifest) to an OCI registry.
    Push(super::plugin_oci::PushArgs),
    /// Run one call of an installed plugin with everything its manifest requests granted, and
    /// print what it touched (files opened, hosts called), to tighten the manifest.
    Test(super::plugin_test::TestArgs),
}

pub(super) async fn run(
    command: PluginCommand,
    root: &std::path::Path,
    opts: GateOptions,
) -> Result<ExitCode> {
    let ws = toolgate::workspace::Workspace::new(root, &[])?;
    let store = plugin_store(&ws, opts.trust_workspace);
    match command {
        PluginCommand::Add(args) => super::plugin_add::run(args, &ws, &store, opts).await,
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
        PluginCommand::New(args) => scaffold::run_new(args),
        PluginCommand::Wit { out } => wit(out.as_deref()),
        PluginCommand::Push(args) => super::plugin_oci::run_push(args, &ws, opts).await,
        PluginCommand::Test(args) => super::plugin_test::run(args, &ws, &store, opts).await,
    }
}

/// `plugin wit`: every WIT file, each after a comment naming it, or written under `out`.
fn wit(out: Option<&std::path::Path>) -> Result<ExitCode> {
    // `toolgate:host` (exec), `toolgate:fs` and `toolgate:search` are for built-in tools
    // only: a plugin importing them is refused at install and at every load, so they are not
    // shown as something to use. A plugin's other imports are WASI's.
    let files = super::kit::wit_files()
        .into_iter()
        .filter(|(rel, _)| rel.starts_with("since_v"));
    match out {
        Some(dir) => {
            for (rel, text) in files {
                let path = dir.join(rel);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .with_context(|| format!("cannot create {}", parent.display()))?;
                }
                std::fs::write(&path, text)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                println!("wrote {}", path.display());
            }
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            for (rel, text) in files {
                writeln!(stdout, "// ==== wit/{rel}\n{}", text.trim_end())?;
                writeln!(stdout)?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
