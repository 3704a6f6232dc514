//! File history: every version a tool wrote, the version before it, and any edit the user made
//! in between (noticed when the file no longer matches the last version seen).

use super::{now_ms, FileStamp, StateDb};
use crate::error::Result;
use rusqlite::OptionalExtension;
use std::path::{Path, PathBuf};

pub use super::MAX_HISTORY_CONTENT;

/// One stored version of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileVersion {
    /// Row id, increasing.
    pub id: i64,
    /// The file's host path.
    pub path: PathBuf,
    /// When it was recorded, milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// `original` (first seen before a write), `external` (changed outside toolgate since the
    /// last version), `tool` (written by a tool), `absent` (did not exist before a write), or
    /// `undo` (written back by `toolgate undo`; with an empty `sha256` when undo removed the
    /// file).
    pub origin: String,
    /// Hex sha256 of the content; for a file over `stamp_bytes`, its metadata stamp
    /// (`meta:…`, see [`crate::state::FileStamp`]).
    pub sha256: String,
    /// Size in bytes.
    pub size: i64,
    /// The content, unless it was larger than [`MAX_HISTORY_CONTENT`] or `stamp_bytes`
    /// ([`FileVersion::content_note`] says which).
    pub content: Option<Vec<u8>>,
    /// The call that wrote it, for `tool` versions.
    pub call_id: Option<String>,
}

impl FileVersion {
    /// Whether this version records the file as not existing.
    pub fn is_absent(&self) -> bool {
        self.origin == "absent" || (self.origin == "undo" && self.sha256.is_empty())
    }

    /// Whether this version is what a call wrote (a tool's write or an undo's restore), as
    /// opposed to the state found before it.
    pub fn is_write(&self) -> bool {
        self.origin == "tool" || self.origin == "undo"
    }

    /// Whether the kept content is what the sha256 recorded with it says (`true` when no
    /// content is kept, or the file was absent). A row whose content was changed after it was
    /// written (by anything but toolgate) is `false`, and nothing restores or diffs it.
    pub fn content_matches(&self) -> bool {
        match &self.content {
            _ if self.is_absent() => true,
            None => true,
            Some(c) => {
                let actual = super::keyring::sha256_hex(c);
                // Both are lowercase hex of fixed length when they match; compare every byte.
                actual.len() == self.sha256.len()
                    && actual
                        .bytes()
                        .zip(self.sha256.bytes())
                        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                        == 0
            }
        }
    }

    /// Why the content of this version was not kept, for display (`None` when it was, or
    /// when the file was absent).
    pub fn content_note(&self) -> Option<&'static str> {
        if !self.content_matches() {
            Some("content does not match the sha256 recorded with it (the history was altered); it is never written back")
        } else if self.content.is_some() || self.is_absent() {
            None
        } else if super::reads::is_metadata_stamp(&self.sha256) {
            Some(
                "content not kept: over stamp_bytes (stamped by size, mtime and inode, not hashed)",
            )
        } else {
            Some("content not kept: over 8 MiB (hash only)")
        }
    }
}

impl StateDb {
    /// Record the state of `path` just before a write: the file's current stamp and content
    /// (`None` when it was too large to keep) when it differs from the newest stored version
    /// (as `original` or `external`), or `absent`.
    pub fn history_before_write(
        &self,
        path: &Path,
        current: Option<(&FileStamp, Option<&[u8]>)>,
        call_id: &str,
    ) -> Result<()> {
        let last = self.latest_version(path)?;
        match (current, last) {
            (None, Some(v)) if v.is_absent() => Ok(()),
            (None, _) => self.insert_version(path, "absent", "", 0, Some(&[]), call_id),
            (Some((stamp, _)), Some(v)) if v.sha256 == stamp.sha256 => Ok(()),
            (Some((stamp, bytes)), Some(_)) => {
                self.insert_version(path, "external", &stamp.sha256, stamp.size, bytes, call_id)
            }
            (Some((stamp, bytes)), None) => {
                self.insert_version(path, "original", &stamp.sha256, stamp.size, bytes, call_id)
            }
        }
    }

    /// Record what a tool wrote to `path`: its stamp, and its content when it was small enough
    /// to keep.
    pub fn history_after_write(
        &self,
        path: &Path,
        stamp: &FileStamp,
        bytes: Option<&[u8]>,
        call_id: &str,
    ) -> Result<()> {
        self.insert_version(path, "tool", &stamp.sha256, stamp.size, bytes, call_id)
    }

    /// Record what `toolgate undo` (call `undo_id`) wrote back to `path`: `None` when it
    /// removed the file.
    pub fn history_after_undo(
        &self,
        path: &Path,
        written: Option<(&str, &[u8])>,
        undo_id: &str,
    ) -> Result<()> {
        match written {
            Some((sha, bytes)) => {
                let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
                self.insert_version(path, "undo", sha, size, Some(bytes), undo_id)
            }
            None => self.insert_version(path, "undo", "", 0, None, undo_id),
        }
    }

    /// Every stored version of `path`, oldest first.
    pub fn history(&self, path: &Path) -> Result<Vec<FileVersion>> {
        self.versions_where("path = ?1", &path.to_string_lossy())
    }

    /// Every stored version of every file, oldest first.
    pub fn history_all(&self) -> Result<Vec<FileVersion>> {
        self.versions_where("?1 = ''", "")
    }

    /// The versions call `call_id` recorded (the state before its write, then what it wrote),
    /// oldest first.
    pub fn versions_of_call(&self, call_id: &str) -> Result<Vec<FileVersion>> {
        self.versions_where("call_id = ?1", call_id)
    }

    /// The newest version of `path` recorded before row `id`, with its content.
    pub fn version_before(&self, path: &Path, id: i64) -> Result<Option<FileVersion>> {
        self.conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM file_versions WHERE path = ?1 AND id < ?2 ORDER BY id DESC LIMIT 1"),
                rusqlite::params![path.to_string_lossy(), id],
                row_to_version,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// The calls that wrote files (tools' writes and undos), newest write first; only those
    /// the audit places in `session` when one is given.
    pub fn writing_calls(&self, session: Option<&str>) -> Result<Vec<String>> {
        self.flush_audit();
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT call_id, MAX(id) AS last FROM file_versions
                 WHERE origin IN ('tool', 'undo') AND call_id IS NOT NULL
                   AND (?1 IS NULL OR call_id IN (SELECT call_id FROM audit WHERE session = ?1))
                 GROUP BY call_id ORDER BY last DESC",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([session], |row| row.get::<_, String>(0))
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    /// The tool and session the audit names for `call_id`, when it has the call (as written so
    /// far: [`StateDb::flush_audit`] first to see this process's newest events).
    pub fn call_origin(&self, call_id: &str) -> Result<Option<(String, String)>> {
        self.conn()
            .query_row(
                "SELECT tool, session FROM audit WHERE call_id = ?1 ORDER BY id LIMIT 1",
                [call_id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    fn versions_where(&self, condition: &str, value: &str) -> Result<Vec<FileVersion>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {COLUMNS} FROM file_versions WHERE {condition} ORDER BY id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([value], row_to_version)
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn latest_version(&self, path: &Path) -> Result<Option<FileVersion>> {
        self.conn()
            .query_row(
                "SELECT id, path, at_ms, origin, sha256, size, NULL, call_id FROM file_versions
                 WHERE path = ?1 ORDER BY id DESC LIMIT 1",
                [path.to_string_lossy()],
                row_to_version,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    fn insert_version(
        &self,
        path: &Path,
        origin: &str,
        sha: &str,
        size: i64,
        bytes: Option<&[u8]>,
        call_id: &str,
    ) -> Result<()> {
        let content = bytes.filter(|b| b.len() <= MAX_HISTORY_CONTENT);
        self.conn()
            .execute(
                "INSERT INTO file_versions (path, origin, sha256, size, content, call_id, at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![
                    path.to_string_lossy(),
                    origin,
                    sha,
                    size,
                    content,
                    call_id,
                    now_ms()
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }
}

/// The columns [`row_to_version`] reads, in its order.
const COLUMNS: &str = "id, path, at_ms, origin, sha256, size, content, call_id";

fn row_to_version(row: &rusqlite::Row<'_>) -> rusqlite::Result<FileVersion> {
    Ok(FileVersion {
        id: row.get(0)?,
        path: PathBuf::from(row.get::<_, String>(1)?),
        at_ms: row.get(2)?,
        origin: row.get(3)?,
        sha256: row.get(4)?,
        size: row.get(5)?,
        content: row.get(6)?,
        call_id: row.get(7)?,
    })
}
