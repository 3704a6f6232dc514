//! File history and undo, for the person beside the agent: every version of a file the state
//! database holds (the original, edits noticed from outside, each tool write, each undo), and
//! restoring what a call or a session's calls changed.
//!
//! Undo belongs to the user: the CLI (and the console) call it; no tool can, so a model cannot
//! rewind what the user kept. The database is the workspace's, so it is read as untrusted: a
//! stored path outside the workspace, or one the write scope refuses, is never written.

pub(crate) mod restore;
mod undo;

pub use undo::{undo, UndoError, UndoReport, UndoTarget, Undone};

use crate::error::Result;
use crate::state::{FileVersion, StateDb};
use crate::workspace::{Access, Workspace};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// One version of a file, as `toolgate history` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Version {
    /// Row id, increasing.
    pub id: i64,
    /// When it was recorded, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// `original`, `external`, `tool`, `absent` or `undo` (see [`FileVersion::origin`]).
    pub origin: String,
    /// The call that recorded it (`toolgate undo` takes it).
    pub call_id: Option<String>,
    /// The tool of that call, from the audit (`undo` for an undo).
    pub tool: Option<String>,
    /// The session of that call, from the audit.
    pub session: Option<String>,
    /// sha256 of the content (`""` when the file did not exist).
    pub sha256: String,
    /// Size in bytes.
    pub size: i64,
    /// Lines added and removed since the previous version, when both contents were kept.
    pub added: Option<usize>,
    /// See `added`.
    pub removed: Option<usize>,
    /// Why the content is not kept, when it is not.
    pub note: Option<&'static str>,
}

/// Every version of one file, oldest first.
#[derive(Clone, Debug, Serialize)]
pub struct FileHistory {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    /// Oldest first.
    pub versions: Vec<Version>,
}

/// The history of `path` (a workspace path as the user types it), or of every file; only
/// versions recorded by calls of `session` when one is given.
pub fn list(
    db: &StateDb,
    ws: &Workspace,
    path: Option<&str>,
    session: Option<&str>,
) -> Result<Vec<FileHistory>> {
    let versions = match path {
        Some(p) => {
            let scoped = ws
                .scope(p, Access::Read)
                .map_err(|d| crate::error::Error::Workspace {
                    path: ws.root().to_path_buf(),
                    message: format!("{}; {}", d.reason, d.hint),
                })?;
            db.history(&scoped.host)?
        }
        None => db.history_all()?,
    };
    // Once for the whole listing: each version's call is then looked up without waiting.
    db.flush_audit();
    let mut origins: HashMap<String, Option<(String, String)>> = HashMap::new();
    let mut by_path: BTreeMap<String, Vec<Version>> = BTreeMap::new();
    let mut previous: HashMap<std::path::PathBuf, FileVersion> = HashMap::new();
    for v in versions {
        let origin = match &v.call_id {
            Some(id) if !id.is_empty() => match origins.get(id) {
                Some(o) => o.clone(),
                None => {
                    let o = db.call_origin(id)?;
                    origins.insert(id.clone(), o.clone());
                    o
                }
            },
            _ => None,
        };
        let (added, removed) = match previous.get(&v.path) {
            Some(prev) => diff_stat(prev, &v),
            None => (None, None),
        };
        let keep = match session {
            Some(s) => origin.as_ref().is_some_and(|(_, sess)| sess == s),
            None => true,
        };
        if keep {
            let (tool, sess) = match (origin, v.origin.as_str()) {
                (Some((t, s)), _) => (Some(t), Some(s)),
                (None, "undo") => (Some("undo".to_string()), None),
                (None, _) => (None, None),
            };
            by_path
                .entry(rel_of(ws, &v.path))
                .or_default()
                .push(Version {
                    id: v.id,
                    at_ms: v.at_ms,
                    origin: v.origin.clone(),
                    call_id: v.call_id.clone(),
                    tool,
                    session: sess,
                    sha256: v.sha256.clone(),
                    size: v.size,
                    added,
                    removed,
                    note: v.content_note(),
                });
        }
        previous.insert(v.path.clone(), v);
    }
    Ok(by_path
        .into_iter()
        .map(|(path, versions)| FileHistory { path, versions })
        .collect())
}

/// `path` relative to the workspace root; a stored path outside it (a database from
/// elsewhere) is shown as it is.
pub(crate) fn rel_of(ws: &Workspace, path: &std::path::Path) -> String {
    match path.strip_prefix(ws.root()) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().replace('\\', "/"),
        _ => path.to_string_lossy().into_owned(),
    }
}

/// Lines added and removed from `old` to `new`, when both contents are known.
fn diff_stat(old: &FileVersion, new: &FileVersion) -> (Option<usize>, Option<usize>) {
    let text = |v: &FileVersion| -> Option<String> {
        if v.is_absent() {
            return Some(String::new());
        }
        if !v.content_matches() {
            return None;
        }
        v.content
            .as_ref()
            .map(|c| String::from_utf8_lossy(c).into_owned())
    };
    let (Some(a), Some(b)) = (text(old), text(new)) else {
        return (None, None);
    };
    let diff = similar::TextDiff::from_lines(&a, &b);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (Some(added), Some(removed))
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
