//! The workspace's trust: `toolgate trust`, `toolgate grants`, and the signed stores (project
//! grants, plugin records) they and `toolgate plugin` use.

use anyhow::Result;
use clap::Subcommand;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Subcommand)]
pub(super) enum GrantsCommand {
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

/// Run `toolgate grants COMMAND` on the workspace at `root`.
pub(super) fn grants(root: &Path, command: GrantsCommand, trust_all: bool) -> Result<ExitCode> {
    let ws = toolgate::workspace::Workspace::new(root, &[])?;
    let grants = project_grants(&ws, trust_all);
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
                eprintln!(
                    "toolgate: no project grant with key `{key}` (see `toolgate grants list`)"
                );
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

/// The user's signing key (outside every workspace).
fn keyring() -> Arc<toolgate::policy::trust::Keyring> {
    Arc::new(toolgate::policy::trust::Keyring::new(
        &toolgate::userdirs::UserDirs::from_env().config,
    ))
}

/// The project grants of `ws`, signed with the user's key.
pub(super) fn project_grants(
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

/// The plugin records of `ws`, signed with the user's key.
pub(super) fn plugin_store(
    ws: &toolgate::workspace::Workspace,
    trust_all: bool,
) -> toolgate::plugins::PluginStore {
    toolgate::plugins::PluginStore::signed(&ws.state_dir(), ws.root(), keyring(), trust_all)
}

/// `toolgate trust`: show what the workspace's own files loosen, then trust them.
pub(super) fn trust(root: &Path, yes: bool, forget: bool) -> Result<ExitCode> {
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
