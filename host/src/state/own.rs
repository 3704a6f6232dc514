//! Authenticating an open state database with the user's signing key (see `super::open`).

use super::open::{self, Marker, Quarantined};
use super::{audit, configure, open_checked, StateDb};
use crate::error::{Error, Result};
use crate::state::keyring::Keyring;
use std::path::Path;
use std::sync::atomic::Ordering;

impl StateDb {
    /// Check that this database is one the user's toolgate made for `workspace`: its marker is
    /// signed with `keyring` (an empty unmarked database is marked now). Any other is
    /// quarantined (moved aside, never deleted), replaced by a fresh marked database, and the
    /// user told on stderr and in the new database's audit. Until this succeeds no session
    /// grant is honoured and no approval state is accepted.
    pub fn authenticate(&self, keyring: &Keyring, workspace: &Path) -> Result<()> {
        let ws = workspace.to_string_lossy();
        for _ in 0..4 {
            let mut conn = self.conn();
            let reason = match open::read_marker(&conn, keyring, &ws).map_err(|e| self.err(e))? {
                Marker::Valid { created_ms } => {
                    self.created_ms.store(created_ms, Ordering::Release);
                    drop(conn);
                    self.audit_quarantines();
                    return Ok(());
                }
                Marker::Absent { empty: true } => {
                    match open::write_marker(&conn, keyring, &ws).map_err(|m| self.fail(m))? {
                        Some(created_ms) => {
                            self.created_ms.store(created_ms, Ordering::Release);
                            drop(conn);
                            self.audit_quarantines();
                            return Ok(());
                        }
                        // Another process marked it first: read that marker.
                        None => continue,
                    }
                }
                Marker::Absent { empty: false } => "it has records but no marker signed with your key (a repository's own database, or one from a toolgate before databases were signed)",
                Marker::Invalid => "its marker is not signed with your key for this workspace (another user's database, one copied from another workspace, or a forged one)",
            };
            // Nothing may use the database while it is replaced: the calls' connection is held,
            // the writer stopped first (it has its own connection).
            self.stop_writer();
            let old = std::mem::replace(
                &mut *conn,
                rusqlite::Connection::open_in_memory().map_err(|e| self.err(e))?,
            );
            open::close_untouched(old);
            let file = open::quarantine(&self.path).map_err(|e| {
                self.fail(format!(
                    "{reason}, and moving it aside failed: {}",
                    crate::fsutil::plain_error(&e)
                ))
            })?;
            let mut also = Vec::new();
            let fresh = open_checked(&self.path, &mut also)?;
            configure(&fresh).map_err(|e| self.err(e))?;
            *conn = fresh;
            self.pending_reads.lock().clear();
            self.unsent_reads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
            let (writer, handle) = audit::start_writer(&self.path, self.pending_reads.clone())
                .map_err(|e| Error::io(&self.path, e))?;
            *self.writer.0.write().unwrap_or_else(|p| p.into_inner()) = writer;
            *self.writer_thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
            drop(conn);
            self.tell_quarantined(Quarantined {
                file,
                reason: reason.into(),
            });
            for q in also {
                self.tell_quarantined(q);
            }
            // The fresh database is empty: the next round marks it (and then audits these).
        }
        Err(self.fail(
            "the state database was replaced again each time it was checked; remove .toolgate/state.db and retry".into(),
        ))
    }

    /// When the database was created (ms since the epoch, from its signed marker), once
    /// authenticated.
    pub fn created_ms(&self) -> Option<u64> {
        Some(self.created_ms.load(Ordering::Acquire)).filter(|&c| c != 0)
    }

    /// Close the writer's queue and wait for it to write what it has and end.
    fn stop_writer(&self) {
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

    /// Tell the user a database was put aside: on stderr now, and in this database's audit
    /// once it is authenticated (a row written before its marker would make it look like a
    /// database with records and no marker).
    pub(super) fn tell_quarantined(&self, q: Quarantined) {
        open::warn(&self.path, &q);
        self.untold
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(q);
    }

    /// Audit the quarantines told only on stderr so far.
    fn audit_quarantines(&self) {
        let told = std::mem::take(&mut *self.untold.lock().unwrap_or_else(|p| p.into_inner()));
        for q in &told {
            let detail = serde_json::json!({
                "status": "error",
                "error": format!(
                    "the state database was quarantined: {}; it is now {}",
                    q.reason,
                    q.file.display()
                ),
                "quarantined": q.file.to_string_lossy(),
                "reason": q.reason,
            });
            let id = format!("state-{}", super::now_ms());
            let events = [
                ("intent", serde_json::json!({})),
                (
                    "decision",
                    serde_json::json!({"decision": "deny", "stage": "state", "reason": q.reason}),
                ),
                ("completed", detail),
            ];
            if let Err(e) = self.audit(&id, "toolgate", "state-db", &events) {
                tracing::error!(error = %e, "auditing the quarantine failed");
            }
        }
        if !told.is_empty() {
            self.flush_audit();
        }
    }

    fn fail(&self, message: String) -> Error {
        Error::State {
            path: self.path.clone(),
            message,
        }
    }
}
