//! `toolgate plugin push`: publish a component and its manifest as one OCI artifact, signed
//! the way cosign signs when `--sign-key` is given. (`plugin add oci://…` is in
//! `plugin_add.rs`; the registry code is `toolgate::plugins::oci`.)

use anyhow::Result;
use clap::Args;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use toolgate::plugins::{oci, Manifest};
use toolgate::GateOptions;

/// `toolgate plugin push COMPONENT oci://REGISTRY/REPO:TAG`.
#[derive(Args)]
pub(super) struct PushArgs {
    /// The component (.wasm) to publish.
    component: PathBuf,
    /// Where to publish it, `oci://REGISTRY/REPO:TAG`.
    reference: String,
    /// Its manifest (found as `plugin add` finds it when not given).
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// Sign the pushed artifact with this unencrypted PKCS#8 P-256 private key (PEM), stored
    /// as cosign stores signatures (tag `sha256-HEX.sig`).
    #[arg(long, value_name = "KEY")]
    sign_key: Option<PathBuf>,
}

pub(super) async fn run_push(
    args: PushArgs,
    ws: &toolgate::workspace::Workspace,
    _opts: GateOptions,
) -> Result<ExitCode> {
    let PushArgs {
        component,
        reference,
        manifest,
        sign_key,
    } = args;
    let r = match oci::Reference::parse(&reference) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("toolgate: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let manifest = match manifest {
        Some(m) => m,
        None => match super::plugin_add::find_manifest(&component) {
            Ok(m) => m,
            Err(looked) => {
                let looked: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
                eprintln!(
                    "toolgate: no manifest for {}: looked for {}; pass one with --manifest FILE",
                    component.display(),
                    looked.join(", ")
                );
                return Ok(ExitCode::from(2));
            }
        },
    };
    let fail = |msg: String| {
        eprintln!("toolgate: not pushed: {msg}");
        Ok(ExitCode::from(1))
    };
    let bytes = match std::fs::read(&component) {
        Ok(b) => b,
        Err(e) => return fail(format!("{}: {e}", component.display())),
    };
    if !bytes.starts_with(b"\0asm") {
        return fail(format!(
            "{} is not a WebAssembly component",
            component.display()
        ));
    }
    let text = match std::fs::read_to_string(&manifest) {
        Ok(t) => t,
        Err(e) => return fail(format!("{}: {e}", manifest.display())),
    };
    let m = match Manifest::parse(&manifest.display().to_string(), &text) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let digest = toolgate::plugins::sha256_hex(&bytes);
    if let Some(want) = m
        .sha256
        .as_ref()
        .filter(|w| !w.eq_ignore_ascii_case(&digest))
    {
        return fail(format!(
            "{} has sha256 {digest}, but {} says {want}: this is not the component the manifest describes",
            component.display(),
            manifest.display()
        ));
    }
    let key = match sign_key
        .as_deref()
        .map(oci::sign::read_private_key)
        .transpose()
    {
        Ok(k) => k,
        Err(e) => return fail(e),
    };
    let annotations = BTreeMap::from([
        ("org.opencontainers.image.title".to_string(), m.name.clone()),
        (
            "org.opencontainers.image.version".to_string(),
            m.version.clone(),
        ),
    ]);
    match oci::push(&r, &bytes, &text, annotations, key.as_ref(), ws.root()).await {
        Ok(pushed) => {
            println!("pushed {} {} to {}", m.name, m.version, r.display());
            println!("digest {}", pushed.digest);
            if let Some(sig) = &pushed.signature {
                println!("signed {sig}");
            }
            println!(
                "install it with: toolgate plugin add {}",
                r.pinned(&pushed.digest)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => fail(e),
    }
}
