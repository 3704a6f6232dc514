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
