//! File history: every version a tool wrote, the version before it, and any edit the user made
//! in between (noticed when the file no longer matches the last version seen).

use super::{now_ms, StateDb};
use crate::error::Result;
use rusqlite::OptionalExtension;
use std::path::Path;

/// Files larger than this keep only their hash in history, not their content.
pub const MAX_HISTORY_CONTENT: usize = 8 << 20;

/// One stored version of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileVersion {
    /// Row id, increasing.
    pub id: i64,
    /// `original` (first seen before a write), `external` (changed outside toolgate since the
    /// last version), `tool` (written by a tool), or `absent` (did not exist before a write).
    pub origin: String,
    /// Hex sha256 of the content.
    pub sha256: String,
    /// Size in bytes.
    pub size: i64,
    /// The content, unless it was larger than [`MAX_HISTORY_CONTENT`].
    pub content: Option<Vec<u8>>,
    /// The call that wrote it, for `tool` versions.
    pub call_id: Option<String>,
}

impl StateDb {
    /// Record the state of `path` just before a write: the file's current content when it
    /// differs from the newest stored version (as `original` or `external`), or `absent`.
    pub fn history_before_write(
        &self,
        path: &Path,
        current: Option<(&str, &[u8])>,
        call_id: &str,
    ) -> Result<()> {
        let last = self.latest_version(path)?;
        match (current, last) {
            (None, Some(v)) if v.origin == "absent" => Ok(()),
            (None, _) => self.insert_version(path, "absent", "", &[], call_id),
            (Some((sha, _)), Some(v)) if v.sha256 == sha => Ok(()),
            (Some((sha, bytes)), Some(_)) => {
                self.insert_version(path, "external", sha, bytes, call_id)
            }
            (Some((sha, bytes)), None) => {
                self.insert_version(path, "original", sha, bytes, call_id)
            }
        }
    }

    /// Record what a tool wrote to `path`.
    pub fn history_after_write(
        &self,
        path: &Path,
        sha: &str,
        bytes: &[u8],
        call_id: &str,
    ) -> Result<()> {
        self.insert_version(path, "tool", sha, bytes, call_id)
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
        bytes: &[u8],
        call_id: &str,
    ) -> Result<()> {
        let content = (bytes.len() <= MAX_HISTORY_CONTENT).then_some(bytes);
        self.conn()
            .execute(
                "INSERT INTO file_versions (path, origin, sha256, size, content, call_id, at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![
                    path.to_string_lossy(),
                    origin,
                    sha,
                    i64::try_from(bytes.len()).unwrap_or(i64::MAX),
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
