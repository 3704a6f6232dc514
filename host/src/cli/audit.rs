//! `toolgate audit`: the audit trail of this workspace's calls.

use anyhow::Result;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use toolgate::state::AuditQuery;

/// Show audit events (oldest first).
#[derive(clap::Args)]
pub struct AuditArgs {
    /// Only this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only calls with this decision (`allow`, `deny`, `error`).
    #[arg(long)]
    decision: Option<String>,
    /// Only events newer than this many seconds.
    #[arg(long, value_name = "SECONDS")]
    since: Option<i64>,
    /// Only this call (an observation's `audit_id`).
    #[arg(long)]
    call: Option<String>,
    /// At most this many events (the newest).
    #[arg(long)]
    limit: Option<usize>,
    /// Print JSON lines.
    #[arg(long)]
    json: bool,
}

/// Run `toolgate audit` on the workspace at `root`.
pub fn run(root: &Path, args: AuditArgs) -> Result<ExitCode> {
    let ws = toolgate::workspace::Workspace::new(root, &[])?;
    let db = toolgate::state::StateDb::open(
        &ws.state_dir().join(toolgate::workspace::layout::STATE_DB),
    )?;
    let query = AuditQuery {
        tool: args.tool,
        decision: args.decision,
        since_ms: args.since.map(|s| toolgate::state::now_ms() - s * 1000),
        call_id: args.call,
        limit: args.limit,
    };
    let mut out = std::io::stdout().lock();
    for e in db.audit_events(&query)? {
        if args.json {
            writeln!(out, "{}", serde_json::to_string(&e)?)?;
        } else {
            writeln!(
                out,
                "{} {} {:<9} {:<10} {}",
                e.at_ms, e.call_id, e.event, e.tool, e.detail
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
