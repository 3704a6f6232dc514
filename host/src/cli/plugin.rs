//! `toolgate plugin …`: install, list and remove plugins, start a new one, and print the WIT
//! a plugin may use.

use super::{plugin_store, scaffold};
use anyhow::{Context, Result};
use clap::Subcommand;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use toolgate::{Gate, GateOptions};

#[derive(Subcommand)]
pub(super) enum PluginCommand {
    /// Check a plugin component and its manifest, show what it asks for, and install it.
    Add {
        /// The component (.wasm) to install.
        component: PathBuf,
        /// Its manifest (default: COMPONENT with a .toml extension, else toolgate-plugin.toml
        /// beside it, else at the crate root when COMPONENT is under a cargo `target/`).
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
        /// Depend on this guest SDK crate (e.g. a toolgate checkout's `guest-tools/sdk`)
        /// instead of the copy vendored into the new crate.
        #[arg(long, value_name = "PATH")]
        sdk: Option<PathBuf>,
    },
    /// Print the WIT a plugin implements (the `toolgate:tool` world it must export), or write
    /// it under DIR.
    Wit {
        /// Write the files under this directory instead of printing them.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

pub(super) async fn run(
    command: PluginCommand,
    root: &std::path::Path,
    opts: GateOptions,
) -> Result<ExitCode> {
    use toolgate::plugins::TOOL_PREFIX;
    let ws = toolgate::workspace::Workspace::new(root, &[])?;
    let store = plugin_store(&ws, opts.trust_workspace);
    match command {
        PluginCommand::Add {
            component,
            manifest,
            yes,
        } => {
            let manifest = match manifest {
                Some(m) => m,
                None => match find_manifest(&component) {
                    Ok(found) => found,
                    Err(looked) => {
                        let looked: Vec<String> =
                            looked.iter().map(|p| p.display().to_string()).collect();
                        eprintln!(
                            "toolgate: no manifest for {}: looked for {}; pass one with --manifest FILE",
                            component.display(),
                            looked.join(", ")
                        );
                        return Ok(ExitCode::from(2));
                    }
                },
            };
            let policy = toolgate::policy::Policy::layered(&toolgate::policy::LayerSources {
                workspace: ws.root().to_path_buf(),
                user: Some(toolgate::userdirs::UserDirs::from_env()),
                cli: opts.policy.clone(),
                cli_mode: opts.mode,
                managed: toolgate::policy::managed_policy_path(),
                trust_workspace: opts.trust_workspace,
            })
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
            let files = scaffold::scaffold(&name, &dir, sdk.as_deref())?;
            for f in &files {
                println!("created {}", f.display());
            }
            println!(
                "next: cd {} && cargo build --release --target wasm32-wasip2, then `toolgate plugin add target/wasm32-wasip2/release/toolgate_plugin_{}.wasm` (see README.md there)",
                dir.display(),
                name.replace('-', "_")
            );
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Wit { out } => wit(out.as_deref()),
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

/// The manifest of a component given without `--manifest`: `COMPONENT.toml`, else
/// `toolgate-plugin.toml` beside it, else at the crate root of a cargo build (the folder that
/// holds the `target/` the component is under). `Err` lists where it looked.
fn find_manifest(component: &std::path::Path) -> std::result::Result<PathBuf, Vec<PathBuf>> {
    let mut looked = vec![component.with_extension("toml")];
    let dir = component.parent().unwrap_or(std::path::Path::new("."));
    looked.push(dir.join("toolgate-plugin.toml"));
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    if let Some(target) = abs
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "target"))
    {
        if let Some(root) = target.parent() {
            looked.push(root.join("toolgate-plugin.toml"));
        }
    }
    match looked.iter().find(|p| p.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(looked),
    }
}
