//! `toolgate plugin push` and `plugin add oci://…`: plugins as OCI artifacts.
//!
//! PLACEHOLDER: wired by the lead, implemented by the #19 part 3 work.

use anyhow::Result;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use toolgate::GateOptions;

/// `toolgate plugin push COMPONENT oci://REGISTRY/REPO:TAG`.
#[derive(Args)]
pub(super) struct PushArgs {
    /// The component (.wasm) to publish.
    component: PathBuf,
    /// Where to publish it, `oci://REGISTRY/REPO:TAG`.
    reference: String,
}

pub(super) async fn run_push(
    args: PushArgs,
    _ws: &toolgate::workspace::Workspace,
    _opts: GateOptions,
) -> Result<ExitCode> {
    anyhow::bail!(
        "plugin push {} {}: not built yet",
        args.component.display(),
        args.reference
    )
}
