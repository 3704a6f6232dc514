//! Read records on their way to the database: the rows the audit writer thread stores, and
//! the records still in memory until it has.

use super::FileStamp;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

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
    pub(crate) session: String,
    pub(crate) path: String,
    pub(crate) stamp: FileStamp,
    pub(crate) at_ms: i64,
}

/// Store read records in one transaction (the writer thread, or the caller when it is gone).
pub(crate) fn write_reads(
    conn: &mut rusqlite::Connection,
    rows: &[ReadRow],
) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    insert_reads(&tx, rows)?;
    tx.commit()
}

/// Insert (or update) read records inside `tx`. A record never replaces a later one: the
/// same read may be written twice (at once by a sharing server, then with its call's audit
/// batch), and another process may have stored a newer read in between.
pub(crate) fn insert_reads(
    tx: &rusqlite::Transaction<'_>,
    rows: &[ReadRow],
) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO reads (session, path, mtime_ns, size, sha256, at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (session, path) DO UPDATE SET
           mtime_ns = excluded.mtime_ns, size = excluded.size,
           sha256 = excluded.sha256, at_ms = excluded.at_ms
         WHERE excluded.at_ms >= reads.at_ms",
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
    Ok(())
}
