//! `toolgate plugin test NAME JSON`: one call of an installed plugin with everything its
//! manifest requests granted, printing what it touched.
//!
//! PLACEHOLDER: wired by the lead, implemented by the #19 part 4 work.

use anyhow::Result;
use clap::Args;
use std::process::ExitCode;
use toolgate::plugins::PluginStore;
use toolgate::GateOptions;

/// `toolgate plugin test NAME JSON`.
#[derive(Args)]
pub(super) struct TestArgs {
    /// The installed plugin's name (or its tool name, `plugin__NAME`).
    name: String,
    /// The call's input, a JSON object.
    json: String,
}

pub(super) async fn run(
    args: TestArgs,
    _ws: &toolgate::workspace::Workspace,
    _store: &PluginStore,
    _opts: GateOptions,
) -> Result<ExitCode> {
    anyhow::bail!("plugin test {} {}: not built yet", args.name, args.json)
}
