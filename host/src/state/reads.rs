//! Read records: what a session has read, so writes can refuse files it has not seen or that
//! changed since.

use super::read_rows::{write_reads, ReadRow};
use super::{now_ms, StateDb};
use crate::error::Result;
use crate::fsutil::{open_regular, OpenError};
use sha2::{Digest, Sha256};
use std::io::Read as _;
use std::path::Path;

/// The default of the policy's `[limits] stamp_bytes`: files up to this size are stamped by
/// their content.
pub const DEFAULT_STAMP_BYTES: u64 = 64 << 20;

/// A file's identity at one moment: modification time, size and content hash.
///
/// A file of up to `stamp_bytes` (policy `[limits] stamp_bytes`) is stamped by its content,
/// hashed as it streams through a fixed buffer; a larger one by its metadata only (device,
/// inode, mtime, ctime and size), so stamping a 2 GB or 1 TB sparse file costs one `fstat`, not
/// its length in memory or time. The metadata stamp sits in `sha256` as `meta:…`, so the
/// database and [`FileStamp::same_content`] treat both alike; a `touch` of such a file counts
/// as a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStamp {
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Size in bytes.
    pub size: i64,
    /// Hex sha256 of the content, or `meta:dev:ino:mtime_ns:ctime_ns` for a file over
    /// `stamp_bytes` (see [`FileStamp::is_content_hash`]).
    pub sha256: String,
}

/// The prefix of a metadata stamp in [`FileStamp::sha256`].
const META_PREFIX: &str = "meta:";

/// Streaming buffer for hashing: the host never holds more of a file than this, unless it was
/// asked to keep the content (history, bounded by the caller).
const HASH_BUFFER: usize = 64 << 10;

impl FileStamp {
    /// Stamp the regular file at `path` as it is now (through [`open_regular`]: a FIFO,
    /// device, socket, directory or last-component symlink is refused before any read).
    pub fn stamp(path: &Path, stamp_bytes: u64) -> Result<FileStamp, OpenError> {
        Ok(Self::with_content(path, stamp_bytes, 0)?.0)
    }

    /// Stamp a small regular file and return its content too, with the default `stamp_bytes`;
    /// a larger file is an error (its content is not read). The host itself uses
    /// [`FileStamp::stamp`] and [`FileStamp::for_history`], which never load a whole file.
    pub fn of(path: &Path) -> Result<(FileStamp, Vec<u8>)> {
        let limit = DEFAULT_STAMP_BYTES;
        let e = |e: OpenError| crate::error::Error::io(path, std::io::Error::other(e.to_string()));
        match Self::with_content(path, limit, limit).map_err(e)? {
            (stamp, Some(bytes)) => Ok((stamp, bytes)),
            (_, None) => Err(crate::error::Error::io(
                path,
                std::io::Error::other(format!("larger than {limit} bytes")),
            )),
        }
    }

    /// Stamp the regular file at `path`, and return its content too when it is at most `keep`
    /// bytes (and at most `stamp_bytes`): one open, one pass, for history snapshots.
    pub fn with_content(
        path: &Path,
        stamp_bytes: u64,
        keep: u64,
    ) -> Result<(FileStamp, Option<Vec<u8>>), OpenError> {
        let (file, meta) = open_regular(path)?;
        let keep = keep.min(stamp_bytes);
        if meta.len() > stamp_bytes {
            return Ok((Self::by_metadata(&meta, meta.len()), None));
        }
        let io = |source| OpenError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut hasher = Sha256::new();
        let mut content = (meta.len() <= keep)
            .then(|| Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0)));
        let mut size: u64 = 0;
        let mut buf = vec![0u8; HASH_BUFFER];
        // At most one byte past `stamp_bytes`: a file that grows while it is read is stamped by
        // its metadata instead, never read to its end.
        let mut reader = file.take(stamp_bytes.saturating_add(1));
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            };
            size += n as u64;
            if size > stamp_bytes {
                let meta = reader.get_ref().metadata().map_err(io)?;
                return Ok((Self::by_metadata(&meta, meta.len()), None));
            }
            hasher.update(&buf[..n]);
            if let Some(c) = &mut content {
                if size > keep {
                    content = None;
                } else {
                    c.extend_from_slice(&buf[..n]);
                }
            }
        }
        let stamp = FileStamp {
            mtime_ns: mtime_ns(&meta),
            size: i64::try_from(size).unwrap_or(i64::MAX),
            sha256: hex::encode(hasher.finalize()),
        };
        Ok((stamp, content))
    }

    /// [`FileStamp::with_content`] keeping what history keeps: the content of a file of at
    /// most 8 MiB (and at most `stamp_bytes`).
    pub fn for_history(
        path: &Path,
        stamp_bytes: u64,
    ) -> Result<(FileStamp, Option<Vec<u8>>), OpenError> {
        let keep = u64::try_from(super::MAX_HISTORY_CONTENT).unwrap_or(u64::MAX);
        Self::with_content(path, stamp_bytes, keep)
    }

    fn by_metadata(meta: &std::fs::Metadata, size: u64) -> FileStamp {
        use std::os::unix::fs::MetadataExt as _;
        let mtime = mtime_ns(meta);
        let ctime = meta
            .ctime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.ctime_nsec());
        FileStamp {
            mtime_ns: mtime,
            size: i64::try_from(size).unwrap_or(i64::MAX),
            sha256: format!("{META_PREFIX}{}:{}:{mtime}:{ctime}", meta.dev(), meta.ino()),
        }
    }

    /// Whether `sha256` is a hash of the content (the file was at most `stamp_bytes`), not a
    /// metadata stamp.
    pub fn is_content_hash(&self) -> bool {
        !self.sha256.starts_with(META_PREFIX)
    }

    /// Whether the content is the same. The hash decides: an mtime that moved without a change
    /// (a checkout, `touch`) is not a change, which avoids false "changed since read" errors.
    /// (For files over `stamp_bytes` the metadata decides, and a `touch` is a change.)
    pub fn same_content(&self, other: &FileStamp) -> bool {
        self.size == other.size && self.sha256 == other.sha256
    }
}

/// Whether a stored `sha256` is a metadata stamp (see [`FileStamp`]).
pub(crate) fn is_metadata_stamp(sha256: &str) -> bool {
    sha256.starts_with(META_PREFIX)
}

fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
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
        // Sent with this call's audit events (or the next flush): one writer wake-up and one
        // transaction per call instead of two. Until it is committed, `pending_reads` answers.
        self.unsent_reads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(row);
        Ok(())
    }

    /// Make [`StateDb::reads_shared`] wait for commits: for a server whose conversations may
    /// continue on another process serving the same workspace (stateless HTTP), which knows a
    /// read only once it is in the database.
    pub fn share_reads_at_once(&self) {
        self.reads_at_once
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// From now on share reads at once (see [`StateDb::share_reads_at_once`]), and commit
    /// every read record of this process not yet in the database, here and now: for a server
    /// that was alone and lets another in (`super::serving`). A call that had already asked
    /// whether to commit (and was told no) recorded its reads before it asked, so they are
    /// among those committed here; one that asks after this is told yes.
    pub fn share_reads_now(&self) {
        self.share_reads_at_once();
        self.commit_pending_reads(None);
    }

    /// Commit `session`'s read records that are not yet in the database, here and now, when
    /// this process shares them (see [`StateDb::share_reads_at_once`]): a call that read
    /// answers only once another process serving the conversation's next request can see
    /// the read. Written on the caller's connection, which never checkpoints, so the answer
    /// does not wait for the writer's batch or a checkpoint's fsync; the writer's later copy
    /// of the same read is older and changes nothing (see `read_rows::insert_reads`).
    /// Does nothing otherwise, or when the session has no read waiting.
    pub fn reads_shared(&self, session: &str) {
        if !self
            .reads_at_once
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        self.commit_pending_reads(Some(session));
    }

    /// Commit the read records of this process not yet in the database (only `session`'s,
    /// when given) on the calls' connection, now.
    fn commit_pending_reads(&self, session: Option<&str>) {
        let at_ms = now_ms();
        let rows: Vec<ReadRow> = self
            .pending_reads
            .lock()
            .iter()
            .filter(|((s, _), _)| session.is_none_or(|only| s == only))
            .map(|((s, path), stamp)| ReadRow {
                session: s.clone(),
                path: path.clone(),
                stamp: stamp.clone(),
                at_ms,
            })
            .collect();
        if !rows.is_empty() {
            self.write_reads_here(&rows);
        }
    }

    /// The read records not yet sent, taken.
    pub(super) fn take_unsent_reads(&self) -> Vec<ReadRow> {
        std::mem::take(&mut *self.unsent_reads.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Send the read records not yet sent to the writer (or, when it is gone, write them here).
    pub(super) fn send_unsent_reads(&self) {
        let reads = self.take_unsent_reads();
        if reads.is_empty() {
            return;
        }
        if let Err(super::audit::AuditMsg::Reads(reads)) = self
            .writer
            .send(super::audit::AuditMsg::Reads(reads), false)
        {
            self.write_reads_here(&reads);
        }
    }

    /// Store `reads` on this thread (the writer is gone: it failed to open the database).
    pub(super) fn write_reads_here(&self, reads: &[ReadRow]) {
        let mut conn = self.conn();
        match write_reads(&mut conn, reads) {
            Ok(()) => self.pending_reads.settle(reads),
            Err(e) => {
                tracing::error!(error = %self.err(e), reads = reads.len(), "read record write failed")
            }
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
