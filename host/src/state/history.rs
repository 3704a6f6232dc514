//! File history: every version a tool wrote, the version before it, and any edit the user made
//! in between (noticed when the file no longer matches the last version seen).

use super::{now_ms, FileStamp, StateDb};
use crate::error::Result;
use rusqlite::OptionalExtension;
use std::path::Path;

pub use super::MAX_HISTORY_CONTENT;

/// One stored version of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileVersion {
    /// Row id, increasing.
    pub id: i64,
    /// `original` (first seen before a write), `external` (changed outside toolgate since the
    /// last version), `tool` (written by a tool), or `absent` (did not exist before a write).
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
    /// Why the content of this version was not kept, for display (`None` when it was, or
    /// when the file was absent).
    pub fn content_note(&self) -> Option<&'static str> {
        if self.content.is_some() || self.origin == "absent" {
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
            (None, Some(v)) if v.origin == "absent" => Ok(()),
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

    /// Every stored version of `path`, oldest first.
    pub fn history(&self, path: &Path) -> Result<Vec<FileVersion>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT id, origin, sha256, size, content, call_id FROM file_versions
                 WHERE path = ?1 ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([path.to_string_lossy()], row_to_version)
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }

    fn latest_version(&self, path: &Path) -> Result<Option<FileVersion>> {
        self.conn()
            .query_row(
                "SELECT id, origin, sha256, size, NULL, call_id FROM file_versions
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

fn row_to_version(row: &rusqlite::Row<'_>) -> rusqlite::Result<FileVersion> {
    Ok(FileVersion {
        id: row.get(0)?,
        origin: row.get(1)?,
        sha256: row.get(2)?,
        size: row.get(3)?,
        content: row.get(4)?,
        call_id: row.get(5)?,
    })
}
