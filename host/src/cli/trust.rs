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
        GrantsCommand::Add { key } => match refuse_capped(&ws, &key) {
            Some(why) => {
                eprintln!("toolgate: {why}");
                Ok(ExitCode::from(1))
            }
            None => match grants.add(&key, "toolgate grants add") {
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

/// Why `key` must not become a project grant (it reaches a tool capped at session scope, or
/// the shell's network), as the ladder would say; `None`: it may. The tools and their
/// ceilings are the gate's own (built-ins and installed plugins), so a tool's ceiling is
/// decided by its component's imports, not by its name. A gate that cannot be opened refuses.
fn refuse_capped(ws: &toolgate::workspace::Workspace, key: &str) -> Option<String> {
    let pattern = match toolgate::key::KeyPattern::parse(key) {
        Ok(p) => p,
        Err(m) => return Some(format!("grant key {m}")),
    };
    let root = ws.root().to_path_buf();
    // `grants` runs inside the CLI's runtime without being async: the gate is opened on a
    // runtime of its own, on a thread of its own.
    let capped = std::thread::spawn(move || -> Result<Vec<String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            let gate = toolgate::Gate::open(toolgate::GateOptions {
                workspace: root,
                ..Default::default()
            })
            .await?;
            gate.preload().await;
            Ok(gate
                .tools()
                .filter(|t| t.ceiling == toolgate::tools::Ceiling::Session)
                .map(|t| t.name.clone())
                .collect())
        })
    })
    .join();
    match capped {
        Ok(Ok(capped)) => toolgate::policy::grants::ceiling_refusal(&pattern, &capped),
        Ok(Err(e)) => Some(format!(
            "cannot tell which tools `{key}` reaches ({e:#}); nothing was written"
        )),
        Err(_) => Some(format!(
            "cannot tell which tools `{key}` reaches; nothing was written"
        )),
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

/// The most bytes of one bound file `trust` prints (its sha256 names the rest).
const SHOW_BYTES: usize = 32 * 1024;

/// `bytes` as text safe to print: control characters (but newline and tab) escaped, so a
/// file cannot repaint the terminal or hide a line; `None` for binary content.
fn printable(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.contains('\0') {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\n' || c == '\t' || !c.is_control() {
            out.push(c);
        } else {
            out.push_str(&c.escape_unicode().to_string());
        }
    }
    Some(out)
}

/// `toolgate trust`: show what the workspace's own files loosen and the files its policy
/// runs, then trust exactly what was shown. Every file is read once: what is shown is what
/// is hashed and recorded, so a change made while the prompt is open is not covered.
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
    // Read once: the policy and every file it binds.
    let layer = Policy::workspace_layer(&sources);
    // What the workspace layer loosens (what is ignored while it is untrusted), from the
    // same bytes.
    let untrusted = match Policy::layered_with(&sources, &layer) {
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
        writeln!(out, "  CHANGED since you trusted it:")?;
        for c in &layer.changed {
            writeln!(out, "    {c}")?;
        }
    }
    if loosens.is_empty() {
        writeln!(out, "  loosens nothing (only stricter settings)")?;
    } else {
        writeln!(out, "  trusting it applies what is ignored now:")?;
        for i in &loosens {
            writeln!(out, "    {}  ({})", i.part, i.reason)?;
        }
    }
    if !layer.files.is_empty() {
        writeln!(
            out,
            "files      the policy runs these workspace files; trusting it binds them as shown (any change untrusts the workspace):"
        )?;
    }
    use toolgate::gate::approval::escape_name;
    let absent: Vec<String> = layer
        .files
        .iter()
        .filter(|f| f.file.state == toolgate::policy::hooks::ABSENT)
        .map(|f| format!("`{}`", escape_name(&f.file.path)))
        .collect();
    if !absent.is_empty() {
        writeln!(
            out,
            "  naming nothing now (a file created there untrusts the workspace): {}",
            absent.join(", ")
        )?;
    }
    for f in layer
        .files
        .iter()
        .filter(|f| f.file.state != toolgate::policy::hooks::ABSENT)
    {
        let news = match &f.trusted {
            None => "new",
            Some(t) if t != &f.file.state => "CHANGED",
            Some(_) => "as trusted",
        };
        writeln!(
            out,
            "  {}  {}  ({}; {news})",
            escape_name(&f.file.path),
            f.file.state,
            escape_name(&f.used_by.join(", "))
        )?;
        if news == "as trusted" || layer.trusted_by.is_some() {
            continue;
        }
        match f.bytes.as_deref() {
            None => {}
            Some(bytes) => match printable(&bytes[..bytes.len().min(SHOW_BYTES)]) {
                Some(text) => {
                    writeln!(
                        out,
                        "  ----- {} ({} bytes) -----",
                        escape_name(&f.file.path),
                        bytes.len()
                    )?;
                    write!(out, "{text}")?;
                    if !text.ends_with('\n') {
                        writeln!(out)?;
                    }
                    if bytes.len() > SHOW_BYTES {
                        writeln!(
                            out,
                            "  ----- {} more bytes not shown: review the file itself; the sha256 above is what is trusted -----",
                            bytes.len() - SHOW_BYTES
                        )?;
                    } else {
                        writeln!(out, "  ----- end of {} -----", escape_name(&f.file.path))?;
                    }
                }
                None => writeln!(
                    out,
                    "  (binary, {} bytes: review it yourself; the sha256 above is what is trusted)",
                    bytes.len()
                )?,
            },
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
    let mut status = ExitCode::SUCCESS;
    // Record the hashes of what was shown, never of what is there now: a file changed while
    // the prompt was open is not covered (it is untrusted at the next load). Saying so now
    // is only for the user.
    if let (Some(shown), None) = (&layer.sha256, &layer.trusted_by) {
        let files: Vec<_> = layer.files.iter().map(|f| f.file.clone()).collect();
        store
            .trust_shown(ws.root(), shown, files.clone())
            .map_err(anyhow::Error::msg)?;
        println!(
            "trusted {file} (sha256 {shown}) and {} file(s) it runs, recorded in {}",
            files.len(),
            store.path().display()
        );
        let now = Policy::workspace_layer(&sources);
        let mut moved: Vec<String> = Vec::new();
        if now.sha256.as_ref() != Some(shown) {
            moved.push(file.clone());
        }
        for f in &now.files {
            if !files.contains(&f.file) {
                moved.push(f.file.path.clone());
            }
        }
        if !moved.is_empty() {
            eprintln!(
                "toolgate: {} changed while you were reviewing; what you saw is what is trusted, so the workspace is untrusted until you run `toolgate trust` again",
                moved.join(", ")
            );
            status = ExitCode::from(1);
        }
    }
    let (n, left) = grants
        .adopt_shown(&unsigned)
        .map_err(|p| anyhow::anyhow!("{p}"))?;
    if n > 0 {
        println!("signed {n} project grant(s) in {}", grants.path().display());
    }
    if !left.is_empty() {
        eprintln!(
            "toolgate: not signed (added while you were reviewing, never shown): {}; run `toolgate trust` again to review them",
            left.join(", ")
        );
        status = ExitCode::from(1);
    }
    if !unsigned_plugins.is_empty() {
        // Adopt only if what is unsigned now is exactly what was shown.
        if plugins.unsigned() == unsigned_plugins {
            let n = plugins.adopt_all()?;
            if n > 0 {
                println!("signed {n} plugin record(s)");
            }
        } else {
            eprintln!("toolgate: the unsigned plugin records changed while you were reviewing; none was signed: run `toolgate trust` again");
            status = ExitCode::from(1);
        }
    }
    Ok(status)
}
