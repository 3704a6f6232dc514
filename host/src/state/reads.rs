//! Read records: what a session has read, so writes can refuse files it has not seen or that
//! changed since.

use super::{now_ms, StateDb};
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::path::Path;

/// A file's identity at one moment: modification time, size and content hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStamp {
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Size in bytes.
    pub size: i64,
    /// Hex sha256 of the content.
    pub sha256: String,
}

impl FileStamp {
    /// Stamp the file at `path` as it is now, and return its content too.
    pub fn of(path: &Path) -> Result<(FileStamp, Vec<u8>)> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        let stamp = FileStamp {
            mtime_ns,
            size: i64::try_from(bytes.len()).unwrap_or(i64::MAX),
            sha256: hex::encode(Sha256::digest(&bytes)),
        };
        Ok((stamp, bytes))
    }

    /// Whether the content is the same. The hash decides: an mtime that moved without a change
    /// (a checkout, `touch`) is not a change, which avoids false "changed since read" errors.
    pub fn same_content(&self, other: &FileStamp) -> bool {
        self.size == other.size && self.sha256 == other.sha256
    }
}

impl StateDb {
    /// Record that `session` has seen `path` as `stamp`.
    pub fn record_read(&self, session: &str, path: &Path, stamp: &FileStamp) -> Result<()> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO reads (session, path, mtime_ns, size, sha256, at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (session, path) DO UPDATE SET
                   mtime_ns = excluded.mtime_ns, size = excluded.size,
                   sha256 = excluded.sha256, at_ms = excluded.at_ms",
            )
            .map_err(|e| self.err(e))?;
        stmt.execute(rusqlite::params![
            session,
            path.to_string_lossy(),
            stamp.mtime_ns,
            stamp.size,
            stamp.sha256,
            now_ms()
        ])
        .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// What `session` last saw of `path`, if it read it.
    pub fn last_read(&self, session: &str, path: &Path) -> Result<Option<FileStamp>> {
        use rusqlite::OptionalExtension;
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT mtime_ns, size, sha256 FROM reads WHERE session = ?1 AND path = ?2",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_row(rusqlite::params![session, path.to_string_lossy()], |row| {
            Ok(FileStamp {
                mtime_ns: row.get(0)?,
                size: row.get(1)?,
                sha256: row.get(2)?,
            })
        })
        .optional()
        .map_err(|e| self.err(e))
    }
}
