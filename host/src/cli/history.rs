//! `toolgate history` and `toolgate undo`: what the state database holds of each file, and
//! putting back what a call changed. Undo is the user's command; no tool reaches it.

use super::audit::local_time;
use anyhow::Result;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use toolgate::history::{UndoError, UndoTarget};
use toolgate::text::escape_name;

/// Every version of a file: the original, edits made outside toolgate, each tool write (with
/// its call id, tool, session and time) and each undo.
#[derive(clap::Args)]
pub struct HistoryArgs {
    /// Only this file (a workspace path); default: every file with history.
    path: Option<String>,
    /// Print JSON (one object: `files`, each with `path` and `versions`).
    #[arg(long)]
    json: bool,
}

/// Put back the files a call changed, as they were before it. Refuses a file that changed
/// since (naming it) unless --force; the undo is itself recorded, so it can be undone.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").args(["call", "last"]).multiple(false)))]
pub struct UndoArgs {
    /// The call to undo: an observation's `audit_id`, as `toolgate history` and
    /// `toolgate audit` show it (an undo's own id undoes that undo).
    call: Option<String>,
    /// Undo the newest call that changed a file.
    #[arg(long)]
    last: bool,
    /// Put files back even when they changed after the call (what is there now is kept in
    /// the history first).
    #[arg(long)]
    force: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

fn open(root: &Path) -> Result<(toolgate::workspace::Workspace, toolgate::state::StateDb)> {
    let ws = toolgate::workspace::Workspace::new(root, &[])?;
    let db = super::open_state(&ws)?;
    Ok((ws, db))
}

/// Run `toolgate history`; `session` filters when the user named one.
pub fn history(root: &Path, args: HistoryArgs, session: Option<&str>) -> Result<ExitCode> {
    let (ws, db) = open(root)?;
    let files = match toolgate::history::list(&db, &ws, args.path.as_deref(), session) {
        Ok(f) => f,
        Err(e @ toolgate::Error::Workspace { .. }) => {
            eprintln!("toolgate: {e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e.into()),
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::json!({ "files": files }))?;
        return Ok(ExitCode::SUCCESS);
    }
    if files.is_empty() {
        let what = match (&args.path, session) {
            (Some(p), _) => format!("{} has no history", escape_name(p)),
            (None, Some(s)) => format!("no call of session {} changed a file", escape_name(s)),
            (None, None) => "no file has history yet".to_string(),
        };
        writeln!(out, "{what} (tools' writes, edits and undos are recorded; a shell command's changes are not)")?;
        return Ok(ExitCode::SUCCESS);
    }
    for file in &files {
        writeln!(out, "{}", escape_name(&file.path))?;
        for v in &file.versions {
            let what = match v.origin.as_str() {
                "original" => "original".to_string(),
                "external" => "changed outside toolgate".to_string(),
                "absent" => "did not exist".to_string(),
                "undo" if v.sha256.is_empty() => "undo: removed".to_string(),
                "undo" => "undo".to_string(),
                _ => v
                    .tool
                    .as_deref()
                    .map(|t| escape_name(t).into_owned())
                    .unwrap_or_else(|| "tool".into()),
            };
            let stat = match (v.added, v.removed) {
                (Some(a), Some(r)) => format!("+{a} -{r}"),
                _ => String::new(),
            };
            let call = v.call_id.as_deref().map(escape_name).unwrap_or_default();
            let session = v.session.as_deref().map(escape_name).unwrap_or_default();
            let mut line = format!(
                "  {}  {what:<24}  {stat:<11}  {:>9} B  {session:<12}  {call}",
                local_time(v.at_ms),
                v.size
            );
            if let Some(note) = v.note {
                line.push_str(&format!("  ({note})"));
            }
            writeln!(out, "{}", line.trim_end())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Run `toolgate undo`; `session` (the user named one with `--session`) undoes all its calls.
pub fn undo(
    root: &Path,
    args: UndoArgs,
    named_session: Option<&str>,
    session: &str,
) -> Result<ExitCode> {
    let target = match (args.call, args.last, named_session) {
        (Some(id), false, _) => UndoTarget::Call(id),
        (None, true, _) => UndoTarget::Last,
        (None, false, Some(s)) => UndoTarget::Session(s.to_string()),
        _ => {
            eprintln!("toolgate: say what to undo: a call id (`toolgate undo CALL_ID`), `--last`, or every call of a session (`toolgate undo --session NAME`)\nhint: `toolgate history` lists the calls that changed files");
            return Ok(ExitCode::from(2));
        }
    };
    let (ws, db) = open(root)?;
    match toolgate::history::undo(&db, &ws, &target, args.force, session) {
        Ok(report) => {
            db.flush_for_exit();
            let mut out = std::io::stdout().lock();
            if args.json {
                writeln!(out, "{}", serde_json::to_string(&report)?)?;
                return Ok(ExitCode::SUCCESS);
            }
            let calls: Vec<String> = report
                .calls
                .iter()
                .map(|c| escape_name(c).into_owned())
                .collect();
            writeln!(out, "undid {}", calls.join(", "))?;
            for f in &report.files {
                let path = escape_name(&f.path);
                match f.action {
                    "removed" => writeln!(out, "  removed   {path} (the call created it)")?,
                    "unchanged" => writeln!(out, "  unchanged {path} (already as before)")?,
                    _ => writeln!(out, "  restored  {path}")?,
                }
                if let Some(why) = &f.overrode {
                    writeln!(out, "            (--force: {why})")?;
                }
            }
            writeln!(
                out,
                "this undo is {0}; `toolgate undo {0}` puts the files back as they were",
                report.undo_id
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            db.flush_for_exit();
            eprintln!("toolgate: {e}");
            Ok(ExitCode::from(match e {
                UndoError::Nothing { .. } => 2,
                UndoError::Changed(_) | UndoError::Unrestorable(_) => 1,
                UndoError::State(_) | UndoError::Write { .. } => 70,
            }))
        }
    }
}

/// Whether `--session` was typed, at the top or after the subcommand (a global argument).
pub fn session_given(matches: &clap::ArgMatches) -> bool {
    let typed = |m: &clap::ArgMatches| {
        m.value_source("session") == Some(clap::parser::ValueSource::CommandLine)
    };
    typed(matches) || matches.subcommand().is_some_and(|(_, sub)| typed(sub))
}
