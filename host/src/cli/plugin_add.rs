//! `toolgate plugin add`: check a plugin component and its manifest (a local file, or an OCI
//! artifact pulled from a registry), show what it asks for, and install it.

use anyhow::Result;
use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use toolgate::plugins::{oci, PluginStore, TOOL_PREFIX};
use toolgate::GateOptions;

/// `toolgate plugin add COMPONENT` or `toolgate plugin add oci://REGISTRY/REPO:TAG`.
#[derive(Args)]
pub(super) struct AddArgs {
    /// The component (.wasm) to install, or an OCI artifact: `oci://REGISTRY/REPO:TAG` or
    /// `oci://REGISTRY/REPO@sha256:DIGEST` (as `toolgate plugin push` prints it).
    #[arg(value_name = "COMPONENT|oci://REF")]
    source: String,
    /// Its manifest (default: COMPONENT with a .toml extension, else toolgate-plugin.toml
    /// beside it, else at the crate root when COMPONENT is under a cargo `target/`). Not for
    /// oci://: an artifact carries its manifest.
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// Verify the artifact's cosign signature with this public key (PEM, e.g. cosign.pub)
    /// before installing (oci:// only).
    #[arg(long, value_name = "KEY.pub")]
    verify_key: Option<PathBuf>,
    /// Install without asking (needed when there is no terminal).
    #[arg(long, short = 'y')]
    yes: bool,
}

pub(super) async fn run(
    args: AddArgs,
    ws: &toolgate::workspace::Workspace,
    store: &PluginStore,
    opts: GateOptions,
) -> Result<ExitCode> {
    let AddArgs {
        source,
        manifest,
        verify_key,
        yes,
    } = args;
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
    let (prepared, artifact) = if oci::is_oci(&source) {
        if manifest.is_some() {
            eprintln!("toolgate: --manifest is for a local component: an OCI artifact carries its own manifest as a layer");
            return Ok(ExitCode::from(2));
        }
        let r = match oci::Reference::parse(&source) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("toolgate: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let pulled = match pull(&r, verify_key.as_deref(), &policy.plugins, ws.root()).await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("toolgate: not installed: {e}");
                return Ok(ExitCode::from(1));
            }
        };
        let pinned = r.pinned(&pulled.digest);
        let origin = format!("{pinned} (its {} layer)", oci::MANIFEST_LAYER);
        let names = (pinned.as_str(), origin.as_str(), pinned.as_str());
        let p = store
            .prepare_bytes(
                &sandbox,
                &policy.limits,
                names,
                &pulled.manifest,
                pulled.component.clone(),
            )
            .await;
        (p, Some((r, pulled)))
    } else {
        if verify_key.is_some() {
            eprintln!("toolgate: --verify-key checks the signature of an oci:// artifact; a local file has none (install from a registry, or drop --verify-key)");
            return Ok(ExitCode::from(2));
        }
        if let Some(by) = policy
            .plugins
            .required_by
            .as_ref()
            .filter(|_| policy.plugins.require_signature)
        {
            eprintln!("toolgate: not installed: {source} is a local file, which carries no signature, and `[plugins] require_signature` is on ({by}); install the plugin from a signed OCI artifact (`toolgate plugin push --sign-key`, then `toolgate plugin add oci://…`)");
            return Ok(ExitCode::from(1));
        }
        let component = PathBuf::from(&source);
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
        let p = store
            .prepare(&sandbox, &policy.limits, &component, &manifest)
            .await;
        (p, None)
    };
    let pending = match prepared {
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
    if let Some((reference, pulled)) = &artifact {
        if let Some(tag) = &reference.tag {
            writeln!(out, "  tag        {tag} (the digest above is pinned: a later push to the tag changes nothing installed)")?;
        }
        if pulled.verified_by.is_empty() {
            writeln!(
                out,
                "  signature  not checked (no --verify-key, and the policy does not require one)"
            )?;
        }
        for k in &pulled.verified_by {
            writeln!(out, "  signature  verified with {}", k.display())?;
        }
    }
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
        if old.source != r.source {
            writeln!(out, "    was from {}", old.source)?;
        }
    }
    out.flush()?;
    drop(out);
    if !yes {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            eprintln!("toolgate: not installed: confirm with --yes (no terminal to ask on)");
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

/// The manifest of a component given without `--manifest`: `COMPONENT.toml`, else
/// `toolgate-plugin.toml` beside it, else at the crate root of a cargo build (the folder that
/// holds the `target/` the component is under). `Err` lists where it looked.
pub(super) fn find_manifest(
    component: &std::path::Path,
) -> std::result::Result<PathBuf, Vec<PathBuf>> {
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

/// Pull `r`, verifying its signature with `verify_key` and, when the policy requires
/// signatures, with one of its trusted keys.
async fn pull(
    r: &oci::Reference,
    verify_key: Option<&std::path::Path>,
    plugins: &toolgate::policy::PluginsPolicy,
    workspace: &std::path::Path,
) -> std::result::Result<oci::Pulled, String> {
    let mut verify = oci::Verify::default();
    if let Some(k) = verify_key {
        verify
            .any_of
            .push(("--verify-key".into(), vec![oci::sign::read_public_key(k)?]));
    }
    if plugins.require_signature {
        let keys = plugins
            .trusted_keys
            .iter()
            .map(|k| {
                oci::sign::read_public_key(k)
                    .map_err(|e| format!("{e} (listed in [plugins] trusted_keys)"))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let by = plugins.required_by.as_deref().unwrap_or("the policy");
        verify
            .any_of
            .push((format!("`[plugins] require_signature` ({by})"), keys));
    }
    oci::pull(r, &verify, workspace).await
}
