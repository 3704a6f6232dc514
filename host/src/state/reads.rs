//! Read records: what a session has read, so writes can refuse files it has not seen or that
//! changed since.

use super::{now_ms, StateDb};
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

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

/// Read records on their way to the database, by (session, path).
#[derive(Clone, Default)]
pub(crate) struct PendingReads(Arc<Mutex<HashMap<(String, String), FileStamp>>>);

impl PendingReads {
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<(String, String), FileStamp>> {
        // Every update is one insert or remove: a poisoned map is still consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forget the records of `rows`, now committed, unless a newer read replaced them.
    pub(crate) fn settle(&self, rows: &[ReadRow]) {
        let mut pending = self.lock();
        for r in rows {
            let key = (r.session.clone(), r.path.clone());
            if pending.get(&key) == Some(&r.stamp) {
                pending.remove(&key);
            }
        }
    }
}

/// One read record on its way to the database.
pub(crate) struct ReadRow {
    session: String,
    path: String,
    stamp: FileStamp,
    at_ms: i64,
}

/// Store read records in one transaction (the writer thread, or the caller when it is gone).
pub(crate) fn write_reads(
    conn: &mut rusqlite::Connection,
    rows: &[ReadRow],
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare_cached(
            "INSERT INTO reads (session, path, mtime_ns, size, sha256, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (session, path) DO UPDATE SET
               mtime_ns = excluded.mtime_ns, size = excluded.size,
               sha256 = excluded.sha256, at_ms = excluded.at_ms",
        )?;
        for r in rows {
            stmt.execute(rusqlite::params![
                r.session,
                r.path,
                r.stamp.mtime_ns,
                r.stamp.size,
                r.stamp.sha256,
                r.at_ms
            ])?;
        }
    }
    tx.commit()
}

impl StateDb {
    /// Record that `session` has seen `path` as `stamp`.
    ///
    /// The record is kept in memory at once (this process's later checks see it) and written
    /// to the database by the writer thread, so a call does not wait for SQLite; it is on disk
    /// before the database is closed, and before `session forget` deletes.
    pub fn record_read(&self, session: &str, path: &Path, stamp: &FileStamp) -> Result<()> {
        let path = path.to_string_lossy().into_owned();
        self.pending_reads
            .lock()
            .insert((session.to_string(), path.clone()), stamp.clone());
        let row = ReadRow {
            session: session.to_string(),
            path,
            stamp: stamp.clone(),
            at_ms: now_ms(),
        };
        match self.writer.send(super::audit::AuditMsg::Read(row)) {
            Ok(()) => Ok(()),
            Err(std::sync::mpsc::SendError(super::audit::AuditMsg::Read(row))) => {
                // The writer is gone (it failed to open the database): write here instead.
                let mut conn = self.conn();
                write_reads(&mut conn, std::slice::from_ref(&row)).map_err(|e| self.err(e))?;
                self.pending_reads.settle(&[row]);
                Ok(())
            }
            Err(_) => Ok(()),
        }
    }

    /// What `session` last saw of `path`, if it read it.
    pub fn last_read(&self, session: &str, path: &Path) -> Result<Option<FileStamp>> {
        use rusqlite::OptionalExtension;
        let path = path.to_string_lossy();
        if let Some(stamp) = self
            .pending_reads
            .lock()
            .get(&(session.to_string(), path.to_string()))
        {
            return Ok(Some(stamp.clone()));
        }
        // Committed records, this process's and those of others sharing the session.
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT mtime_ns, size, sha256 FROM reads WHERE session = ?1 AND path = ?2",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_row(rusqlite::params![session, path], |row| {
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
