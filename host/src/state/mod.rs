//! The workspace's state database, `.toolgate/state.db` (SQLite, WAL): audit events, read
//! records for read-before-write, and file history.

mod audit;
mod audit_calls;
mod audit_queue;
mod history;
pub mod keyring;
mod open;
mod own;
mod read_rows;
mod reads;
pub mod redact;
pub mod secrets;
pub mod serving;
mod session_grants;

pub use audit::{redact, AuditEvent, AuditQuery};
pub use audit_calls::AuditCall;
pub use history::FileVersion;
pub use open::state_nonce;

/// Files larger than this keep only their hash in history, not their content (nor do files
/// over `[limits] stamp_bytes`, whichever is smaller).
pub const MAX_HISTORY_CONTENT: usize = 8 << 20;
pub use reads::{FileStamp, DEFAULT_STAMP_BYTES};

use crate::error::{Error, Result};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    name TEXT PRIMARY KEY,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS reads (
    session TEXT NOT NULL,
    path TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (session, path)
);
CREATE TABLE IF NOT EXISTS session_grants (
    session TEXT NOT NULL,
    key TEXT NOT NULL,
    expires_ms INTEGER,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (session, key)
);
CREATE TABLE IF NOT EXISTS file_versions (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    origin TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB,
    call_id TEXT,
    at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS file_versions_path ON file_versions (path, id);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY,
    call_id TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    event TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS used_states (
    nonce TEXT PRIMARY KEY,
    expires_s INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_call ON audit (call_id);
CREATE INDEX IF NOT EXISTS audit_time ON audit (at_ms);
";

/// The state database of one workspace.
pub struct StateDb {
    path: PathBuf,
    conn: Mutex<Connection>,
    /// Audit events go to a writer thread so calls do not wait for SQLite.
    writer: WriterSlot,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Read records of this process not yet in the database, by (session, path): the writer
    /// thread removes each once its row is committed, so the database stays the authority
    /// (a newer read or a `session forget` by another process is seen at once).
    pending_reads: read_rows::PendingReads,
    /// Read records not yet sent to the writer: they go with the call's audit events (one
    /// message, one transaction), or with the next flush, or when the database closes.
    unsent_reads: Mutex<Vec<read_rows::ReadRow>>,
    /// Other processes may need this process's read records soon (see
    /// [`StateDb::share_reads_at_once`]).
    reads_at_once: std::sync::atomic::AtomicBool,
    /// Signs and verifies session grants (a shipped `state.db` grants nothing).
    grant_signer: session_grants::Signer,
    /// When the database was created, from its marker signed with the user's key (unix
    /// seconds); 0 until [`StateDb::authenticate`] checked it.
    created_ms: std::sync::atomic::AtomicU64,
    /// Databases quarantined but not yet in this one's audit (see `own.rs`).
    untold: Mutex<Vec<open::Quarantined>>,
}

/// The audit writer's queue, replaced when the database is (see [`StateDb::authenticate`]).
pub(crate) struct WriterSlot(std::sync::RwLock<audit_queue::Sender<audit::AuditMsg>>);

impl WriterSlot {
    fn get(&self) -> std::sync::RwLockReadGuard<'_, audit_queue::Sender<audit::AuditMsg>> {
        self.0.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `item` for the writer (see [`audit_queue::Sender::send`]): it comes back, whole,
    /// when the writer is gone, so the caller writes it itself.
    #[allow(clippy::result_large_err)]
    pub(crate) fn send(&self, item: audit::AuditMsg, urgent: bool) -> Result<(), audit::AuditMsg> {
        self.get().send(item, urgent)
    }

    fn close(&self) {
        self.get().close();
    }
}

impl Drop for StateDb {
    fn drop(&mut self) {
        // Nothing audited is lost at exit: send what waits, close the queue and wait for the
        // writer to drain.
        self.send_unsent_reads();
        self.writer.close();
        let handle = self
            .writer_thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl StateDb {
    /// Open (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        // A repository may ship `.toolgate` as a symlink, or `state.db` (or its `-wal`/`-shm`)
        // as a link, FIFO or directory: refuse them by name instead of writing through them.
        let refuse = |e: std::io::Error| Error::State {
            path: path.to_path_buf(),
            message: crate::fsutil::plain_error(&e),
        };
        let created_dir = path
            .parent()
            .filter(|dir| std::fs::symlink_metadata(dir).is_err());
        if let Some(dir) = path.parent() {
            crate::workspace::layout::ensure_state_dir(dir).map_err(refuse)?;
        }
        for companion in companions(path) {
            crate::workspace::layout::check_state_file(&companion).map_err(refuse)?;
        }
        let mut quarantined = Vec::new();
        let conn = open_checked(path, &mut quarantined)?;
        configure(&conn).map_err(|e| state_err(path, e))?;
        if let Some(dir) = path.parent() {
            crate::workspace::layout::ensure_gitignore(dir, created_dir.is_some());
        }
        let pending_reads = read_rows::PendingReads::default();
        let (writer, handle) =
            audit::start_writer(path, pending_reads.clone()).map_err(|e| Error::io(path, e))?;
        let db = StateDb {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
            writer: WriterSlot(std::sync::RwLock::new(writer)),
            writer_thread: Mutex::new(Some(handle)),
            pending_reads,
            unsent_reads: Mutex::new(Vec::new()),
            reads_at_once: std::sync::atomic::AtomicBool::new(false),
            grant_signer: Default::default(),
            created_ms: std::sync::atomic::AtomicU64::new(0),
            untold: Mutex::new(Vec::new()),
        };
        for q in quarantined {
            db.tell_quarantined(q);
        }
        Ok(db)
    }

    /// Where the database is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (every write is one
        // statement or transaction), so a poisoned lock is still usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        state_err(&self.path, e)
    }

    /// Record that a signed approval state (MCP 2026-07-28 `requestState`) with `nonce` was
    /// used, valid until `expires_s` (ms since the epoch). `false` when it was used before, by this
    /// process or any other serving this workspace: every process behind a balancer shares
    /// this database, so an approval given once runs once. Expired nonces are dropped.
    ///
    /// A state issued before this database was created (by its signed marker; the issue time
    /// is in the nonce, see [`state_nonce`]) is refused with an error: the record of its use
    /// may have been in a database since removed or quarantined. So is every state while the
    /// database is not authenticated ([`StateDb::authenticate`]).
    pub fn use_state_once(&self, nonce: &str, expires_s: u64, now_s: u64) -> Result<bool> {
        let created = self.created_ms.load(std::sync::atomic::Ordering::Acquire);
        if created == 0 {
            return Err(Error::State {
                path: self.path.clone(),
                message: "the state database is not authenticated with your signing key, so whether this approval was already used cannot be known; ask again".into(),
            });
        }
        match open::issued_of(nonce) {
            Some(issued) if issued > created => {}
            _ => {
                return Err(Error::State {
                    path: self.path.clone(),
                    message: format!("this approval was issued before the state database was created (at {created}, ms since the epoch), so whether it was already used cannot be known; retry the call without requestState and inputResponses to be asked again"),
                })
            }
        }
        let conn = self.conn();
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        conn.execute(
            "DELETE FROM used_states WHERE expires_s <= ?1",
            rusqlite::params![clamp(now_s)],
        )
        .map_err(|e| self.err(e))?;
        let added = conn
            .execute(
                "INSERT OR IGNORE INTO used_states (nonce, expires_s) VALUES (?1, ?2)",
                rusqlite::params![nonce, clamp(expires_s)],
            )
            .map_err(|e| self.err(e))?;
        Ok(added == 1)
    }

    /// Forget a session: its read records and session grants. Returns how many read records
    /// were dropped.
    pub fn forget_session(&self, session: &str) -> Result<usize> {
        // Records still on their way to the database would come back after the delete.
        self.flush_audit();
        self.pending_reads.lock().retain(|(s, _), _| s != session);
        let conn = self.conn();
        let n = conn
            .execute("DELETE FROM reads WHERE session = ?1", [session])
            .map_err(|e| self.err(e))?;
        conn.execute("DELETE FROM session_grants WHERE session = ?1", [session])
            .map_err(|e| self.err(e))?;
        conn.execute("DELETE FROM sessions WHERE name = ?1", [session])
            .map_err(|e| self.err(e))?;
        Ok(n)
    }

    /// Everything a process that exits now without closing the database must wait for: the
    /// audit written, and its export (if one is configured) delivered.
    pub fn flush_for_exit(&self) {
        self.flush_audit();
        crate::telemetry::flush();
    }

    /// Record that a session exists (first use).
    pub fn touch_session(&self, session: &str) -> Result<()> {
        self.conn()
            .execute(
                "INSERT OR IGNORE INTO sessions (name, created_ms) VALUES (?1, ?2)",
                rusqlite::params![session, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }
}

/// Open the database at `path` through [`open::connect`], quarantining (and replacing) one
/// that holds schema objects toolgate does not make or is not a database; each quarantine is
/// added to `quarantined`.
fn open_checked(path: &Path, quarantined: &mut Vec<open::Quarantined>) -> Result<Connection> {
    let identity = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(p)
            .ok()
            .map(|m| (m.dev(), m.ino()))
    };
    for _ in 0..4 {
        let before = identity(path);
        let conn = open::connect(path).map_err(|e| state_err(path, e))?;
        // The calls' connection retries a locked database every 100 µs at first: the writer
        // thread holds the lock for a batch of ~0.1 ms, and SQLite's own timeout first sleeps
        // a whole millisecond (a shared read's record, written here, paid it at p99).
        conn.busy_handler(Some(retry_locked))
            .map_err(|e| state_err(path, e))?;
        let reason = match open::foreign_objects(&conn) {
            Ok(foreign) if foreign.is_empty() => return Ok(conn),
            Ok(foreign) => format!(
                "it holds schema objects toolgate does not make ({})",
                foreign.join(", ")
            ),
            Err(e) if open::is_not_a_database(&e) => {
                format!("it is not a sound SQLite database ({e})")
            }
            Err(e) => return Err(state_err(path, e)),
        };
        open::close_untouched(conn);
        // Another process may have put it aside (and made a fresh one) meanwhile.
        if before.is_some() && identity(path) == before {
            let file = open::quarantine(path).map_err(|e| Error::State {
                path: path.to_path_buf(),
                message: format!(
                    "{reason}, and moving it aside failed: {}",
                    crate::fsutil::plain_error(&e)
                ),
            })?;
            quarantined.push(open::Quarantined { file, reason });
        }
    }
    Err(Error::State {
        path: path.to_path_buf(),
        message: "the state database was replaced again each time it was opened; remove .toolgate/state.db and retry".into(),
    })
}

/// The settings and schema of the calls' connection.
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Checkpoints (which fsync) are left to the writer thread's connection, so a call never
    // waits for one.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    conn.execute_batch(SCHEMA)?;
    session_grants::migrate(conn)?;
    conn.execute_batch(open::MARKER_SCHEMA)
}

/// How the state database is opened: SQLite's defaults, and never through a symlink.
pub(crate) fn open_flags() -> rusqlite::OpenFlags {
    rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW
}

/// The database file and the two files SQLite keeps beside it in WAL mode.
fn companions(path: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| {
        let mut s = path.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    [path.to_path_buf(), with("-wal"), with("-shm")]
}

fn state_err(path: &Path, e: rusqlite::Error) -> Error {
    Error::State {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Busy handler of the calls' connection: whether to try the locked database again (`tries`
/// made so far), after a pause of 100 µs for the first 20 tries (2 ms), then 1 ms for 40
/// (40 ms), then 10 ms, giving up after ~10 s like the `busy_timeout` it replaces.
fn retry_locked(tries: i32) -> bool {
    let pause = match tries {
        0..20 => std::time::Duration::from_micros(100),
        20..60 => std::time::Duration::from_millis(1),
        60..1056 => std::time::Duration::from_millis(10),
        _ => return false,
    };
    std::thread::sleep(pause);
    true
}
