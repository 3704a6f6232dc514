//! `toolgate undo`: put back the files a call (or every call of a session, newest first)
//! changed, as they were before it.
//!
//! The whole undo is planned before anything is written: each file must still be what the
//! call left (else it is named, and `--force` overrides), the version to go back to must have
//! its content kept, and its path must pass the write scope today. Only then are files
//! written, each atomically on a directory descriptor (see [`super::restore`]). The undo is
//! recorded as a call of its own (in the audit, and as `undo` versions in the history), so it
//! can be undone in turn.

use super::rel_of;
use super::restore::{random_hex, sha256_hex, Current, Place};
use crate::state::{FileVersion, StateDb, MAX_HISTORY_CONTENT};
use crate::workspace::{Access, Workspace};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What to undo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UndoTarget {
    /// One call, by its id (an observation's `audit_id`, or an undo's id).
    Call(String),
    /// The newest call that changed a file, in any session.
    Last,
    /// Every call of this session that changed a file, newest first.
    Session(String),
}

/// What an undo did to one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Undone {
    /// Workspace-relative path.
    pub path: String,
    /// `restored` (written back), `removed` (the call created it) or `unchanged` (it was
    /// already as before).
    pub action: &'static str,
    /// Set when `--force` overrode a change made after the call: what was there.
    pub overrode: Option<String>,
}

/// A finished undo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UndoReport {
    /// The undo's own id: `toolgate undo ID` undoes it.
    pub undo_id: String,
    /// The calls undone, newest first.
    pub calls: Vec<String>,
    /// The files, by path.
    pub files: Vec<Undone>,
}

/// Why nothing was undone. Nothing was written when this is returned, except for
/// [`UndoError::Write`], which names the files already restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UndoError {
    /// Nothing matches the target.
    Nothing { message: String, hint: String },
    /// Files changed after the call; each with what is there now.
    Changed(Vec<(String, String)>),
    /// A file cannot be put back (content not kept, path refused, not a file).
    Unrestorable(Vec<(String, String)>),
    /// The state database failed.
    State(String),
    /// Writing a file failed after others were restored.
    Write {
        path: String,
        message: String,
        done: Vec<String>,
    },
}

impl std::fmt::Display for UndoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |f: &mut std::fmt::Formatter<'_>, items: &[(String, String)]| {
            for (path, why) in items {
                write!(f, "\n  {}: {why}", crate::text::escape_name(path))?;
            }
            Ok(())
        };
        match self {
            UndoError::Nothing { message, hint } => write!(f, "{message}\nhint: {hint}"),
            UndoError::Changed(items) => {
                write!(f, "nothing was undone: these files changed after the call")?;
                list(f, items)?;
                write!(f, "\nhint: look at them with `toolgate history PATH`; `toolgate undo --force ...` puts them back anyway (what is there now is kept in the history, so that undo can be undone)")
            }
            UndoError::Unrestorable(items) => {
                write!(f, "nothing was undone: these files cannot be put back")?;
                list(f, items)
            }
            UndoError::State(m) => write!(f, "nothing was undone: {m}"),
            UndoError::Write {
                path,
                message,
                done,
            } => {
                write!(
                    f,
                    "writing {} failed: {message}",
                    crate::text::escape_name(path)
                )?;
                if done.is_empty() {
                    write!(f, "\nnothing was changed")
                } else {
                    write!(f, "\nalready put back: {}", done.join(", "))
                }
            }
        }
    }
}

impl std::error::Error for UndoError {}

impl From<crate::error::Error> for UndoError {
    fn from(e: crate::error::Error) -> Self {
        UndoError::State(e.to_string())
    }
}

/// One file's step in the plan: the state to go back to.
struct Step {
    host: PathBuf,
    rel: String,
    /// `None`: the file did not exist.
    content: Option<Vec<u8>>,
    sha256: String,
    /// Set when `--force` puts it back over a change made after a call: what changed.
    overrode: Option<String>,
}

/// Undo `target`, as `session` (the audit's session for the undo itself). With `force`, files
/// changed after the call are put back too.
pub fn undo(
    db: &StateDb,
    ws: &Workspace,
    target: &UndoTarget,
    force: bool,
    session: &str,
) -> Result<UndoReport, UndoError> {
    let calls = calls_of(db, target)?;
    // Simulated state of each file as the calls are undone newest first: starts as what is
    // on disk, and after each call is what that call found.
    let mut state: BTreeMap<PathBuf, (Place, Current, Option<Step>)> = BTreeMap::new();
    let mut changed = Vec::new();
    let mut unrestorable = Vec::new();
    for call in &calls {
        for (path, after, before) in writes_of(db, call)? {
            let rel = rel_of(ws, &path);
            if !state.contains_key(&path) {
                match open_checked(ws, &path, &rel) {
                    // A directory at the name cannot be replaced by a file (even with
                    // --force): refused in the plan, not half-way through the writes.
                    Ok((_, Current::Other("a directory"))) => {
                        unrestorable.push((rel, "it is a directory now".into()));
                        continue;
                    }
                    Ok((place, current)) => {
                        state.insert(path.clone(), (place, current, None));
                    }
                    Err(why) => {
                        unrestorable.push((rel, why));
                        continue;
                    }
                }
            }
            let Some((_, current, step)) = state.get_mut(&path) else {
                continue;
            };
            let expected = match step {
                Some(s) => Some(s.sha256.as_str()),
                None => current.sha256(),
            };
            let after_sha = if after.is_absent() {
                ""
            } else {
                after.sha256.as_str()
            };
            let mut overrode = None;
            if expected != Some(after_sha) {
                let why = describe_change(current, step.as_ref(), call);
                if force {
                    overrode = Some(why);
                } else {
                    changed.push((rel.clone(), why));
                }
            }
            let Some(before) = before else {
                unrestorable.push((
                    rel,
                    format!("the history has no version before call {call}"),
                ));
                continue;
            };
            let content = if before.is_absent() {
                None
            } else {
                match before.content {
                    // A row changed after toolgate wrote it (its content no longer hashes to
                    // the sha256 recorded with it) is never written back.
                    Some(_) if !before.content_matches() => {
                        unrestorable.push((
                            rel,
                            format!("the version before call {call} was altered: its content does not match the sha256 recorded with it, so it is not written back"),
                        ));
                        continue;
                    }
                    Some(c) => Some(c),
                    None => {
                        let why = before.content_note().unwrap_or("content not kept");
                        unrestorable.push((rel, format!("the version before call {call}: {why}")));
                        continue;
                    }
                }
            };
            let sha256 = content.as_deref().map(sha256_hex).unwrap_or_default();
            *step = Some(Step {
                host: path.clone(),
                rel,
                content,
                sha256,
                overrode: overrode.or_else(|| step.as_ref().and_then(|s| s.overrode.clone())),
            });
        }
    }
    if !unrestorable.is_empty() {
        return Err(UndoError::Unrestorable(unrestorable));
    }
    if !changed.is_empty() {
        return Err(UndoError::Changed(changed));
    }
    apply(db, state, calls, session)
}

/// Write the plan, record it, audit it.
fn apply(
    db: &StateDb,
    state: BTreeMap<PathBuf, (Place, Current, Option<Step>)>,
    calls: Vec<String>,
    session: &str,
) -> Result<UndoReport, UndoError> {
    let undo_id = format!("undo-{}", random_hex());
    let mut files = Vec::new();
    let mut done: Vec<String> = Vec::new();
    for (_, (place, current, step)) in state {
        let Some(step) = step else { continue };
        if current.sha256() == Some(step.sha256.as_str()) {
            files.push(Undone {
                path: step.rel,
                action: "unchanged",
                overrode: None,
            });
            continue;
        }
        // What is there now goes into the history first, so this undo can be undone.
        if let Current::File {
            sha256, content, ..
        } = &current
        {
            let stamp = crate::state::FileStamp {
                mtime_ns: 0,
                size: content.as_ref().map_or(0, |c| c.len() as i64),
                sha256: sha256.clone(),
            };
            db.history_before_write(&step.host, Some((&stamp, content.as_deref())), &undo_id)?;
        } else if let Current::Absent = current {
            db.history_before_write(&step.host, None, &undo_id)?;
        }
        let mode = match &current {
            Current::File { mode, .. } => *mode,
            _ => 0o644,
        };
        let (result, action) = match &step.content {
            Some(bytes) => (place.write(bytes, mode), "restored"),
            None => (place.remove(), "removed"),
        };
        if let Err(e) = result {
            audit(db, &undo_id, session, &calls, &done, Some(&step.rel));
            return Err(UndoError::Write {
                path: step.rel,
                message: crate::fsutil::plain_error(&e),
                done,
            });
        }
        let written = step.content.as_deref().map(|b| (step.sha256.as_str(), b));
        db.history_after_undo(&step.host, written, &undo_id)?;
        done.push(step.rel.clone());
        files.push(Undone {
            path: step.rel,
            action,
            overrode: step.overrode,
        });
    }
    audit(db, &undo_id, session, &calls, &done, None);
    Ok(UndoReport {
        undo_id,
        calls,
        files,
    })
}

/// The calls `target` names, newest first, each known to have changed a file.
fn calls_of(db: &StateDb, target: &UndoTarget) -> Result<Vec<String>, UndoError> {
    let nothing = |message: String| UndoError::Nothing {
        message,
        hint: "`toolgate history` lists the calls that changed files (changes a shell command \
               made are not in the history)"
            .into(),
    };
    match target {
        UndoTarget::Call(id) => {
            if db.versions_of_call(id)?.iter().any(FileVersion::is_write) {
                Ok(vec![id.clone()])
            } else {
                Err(nothing(format!(
                    "call {} changed no file the history knows",
                    crate::text::escape_name(id)
                )))
            }
        }
        UndoTarget::Last => match db.writing_calls(None)?.into_iter().next() {
            Some(id) => Ok(vec![id]),
            None => Err(nothing(
                "no call has changed a file in this workspace".into(),
            )),
        },
        UndoTarget::Session(s) => {
            let calls = db.writing_calls(Some(s))?;
            if calls.is_empty() {
                Err(nothing(format!(
                    "no call of session {} changed a file",
                    crate::text::escape_name(s)
                )))
            } else {
                Ok(calls)
            }
        }
    }
}

/// For each file `call` wrote: its path, the last version the call wrote, and the version
/// just before the call's first write (with content).
fn writes_of(
    db: &StateDb,
    call: &str,
) -> Result<Vec<(PathBuf, FileVersion, Option<FileVersion>)>, UndoError> {
    let mut first: BTreeMap<PathBuf, (i64, FileVersion)> = BTreeMap::new();
    for v in db.versions_of_call(call)? {
        if !v.is_write() {
            continue;
        }
        match first.get_mut(&v.path) {
            Some((_, last)) => *last = v,
            None => {
                first.insert(v.path.clone(), (v.id, v));
            }
        }
    }
    let mut out = Vec::new();
    for (path, (first_id, last)) in first {
        let before = db.version_before(&path, first_id)?;
        out.push((path, last, before));
    }
    Ok(out)
}

/// Check the stored path against today's write scope, open its directory, and look at it.
fn open_checked(ws: &Workspace, host: &PathBuf, rel: &str) -> Result<(Place, Current), String> {
    if !host.starts_with(ws.root()) || host == ws.root() {
        return Err("the history names it outside this workspace; it is not touched".into());
    }
    let scoped = ws
        .scope(rel, Access::Write)
        .map_err(|d| format!("{} ({})", d.reason, d.hint))?;
    if &scoped.host != host {
        return Err(format!(
            "it resolves to {} now (a symbolic link on the way); it is not touched",
            scoped.host.display()
        ));
    }
    let place =
        Place::open(ws.root(), &scoped.rel, true).map_err(|e| crate::fsutil::plain_error(&e))?;
    let keep = u64::try_from(MAX_HISTORY_CONTENT).unwrap_or(u64::MAX);
    let current = place
        .current(keep)
        .map_err(|e| crate::fsutil::plain_error(&e))?;
    Ok((place, current))
}

fn describe_change(current: &Current, step: Option<&Step>, call: &str) -> String {
    if step.is_some() {
        return format!("a later call changed it again in a way call {call} did not leave it");
    }
    match current {
        Current::Absent => format!("deleted after call {call}"),
        Current::Other(kind) => format!("it is {kind} now"),
        Current::File { .. } => format!("edited after call {call}"),
    }
}

fn audit(
    db: &StateDb,
    undo_id: &str,
    session: &str,
    calls: &[String],
    done: &[String],
    failed: Option<&str>,
) {
    let status = if failed.is_some() { "error" } else { "ok" };
    let events = [
        ("intent", json!({ "input": { "calls": calls } })),
        (
            "decision",
            json!({ "decision": "allow", "stage": "user", "source": "toolgate undo", "permission": format!("undo:{}", calls.join(",")) }),
        ),
        (
            "completed",
            json!({ "status": status, "summary": format!("undid {} call(s): {} file(s) put back", calls.len(), done.len()), "failed": failed }),
        ),
    ];
    if let Err(e) = db.audit(undo_id, session, "undo", &events) {
        tracing::warn!(error = %e, "auditing the undo failed");
    }
}
