//! Session grants from prompt answers: they last for the session (separate `toolgate call`
//! processes with the same `--session` share them), optionally until an expiry.
//!
//! The database lives in the workspace, so a repository can ship one with grants in it. Each
//! row carries an HMAC made with the user's own key over the workspace, the session and the
//! key ([`crate::state::keyring::Keyring`]); a row without a valid one grants nothing.

use super::{now_ms, StateDb};
use crate::error::Result;
use crate::state::keyring::Keyring;
use std::sync::{Arc, OnceLock};

const SIGNED_AS: &str = "toolgate-session-grant-v1";

/// The key and workspace session grants are signed for.
#[derive(Default)]
pub(crate) struct Signer(OnceLock<(Arc<Keyring>, String)>);

/// Add the `sig` column to a database made before it existed.
pub(crate) fn migrate(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let has_sig = conn
        .prepare("SELECT 1 FROM pragma_table_info('session_grants') WHERE name = 'sig'")?
        .exists([])?;
    if !has_sig {
        conn.execute_batch("ALTER TABLE session_grants ADD COLUMN sig TEXT")?;
    }
    Ok(())
}

impl StateDb {
    /// Authenticate the database with `keyring` for `workspace` ([`StateDb::authenticate`]:
    /// one the user's toolgate did not make is quarantined and replaced), then sign session
    /// grants with that key from now on. Until this succeeds no session grant is honoured
    /// (and no approval state accepted); a failure is told on stderr.
    pub fn sign_session_grants(&self, keyring: Arc<Keyring>, workspace: &std::path::Path) {
        if let Err(e) = self.authenticate(&keyring, workspace) {
            eprintln!("toolgate: WARNING: the state database could not be authenticated, so no session grant or approval state is honoured: {e}");
            tracing::error!(error = %e, "state database not authenticated");
            return;
        }
        let _ = self
            .grant_signer
            .0
            .set((keyring, workspace.to_string_lossy().into_owned()));
    }

    /// Grant `key` to `session`, until `expires_ms` if given.
    pub fn add_session_grant(
        &self,
        session: &str,
        key: &str,
        expires_ms: Option<i64>,
    ) -> Result<()> {
        let expiry = expires_ms.map(|e| e.to_string()).unwrap_or_default();
        let sig = match self.grant_signer.0.get() {
            Some((k, ws)) => Some(
                k.sign(&[SIGNED_AS, ws, session, key, &expiry])
                    .map_err(crate::error::Error::Policy)?,
            ),
            None => None,
        };
        self.conn()
            .execute(
                "INSERT INTO session_grants (session, key, expires_ms, at_ms, sig) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (session, key) DO UPDATE SET expires_ms = excluded.expires_ms, at_ms = excluded.at_ms, sig = excluded.sig",
                rusqlite::params![session, key, expires_ms, now_ms(), sig],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The session's unexpired grant keys that this user's toolgate wrote.
    pub fn session_grants(&self, session: &str) -> Result<Vec<String>> {
        Ok(self
            .signed_session_grants(Some(session))?
            .into_iter()
            .map(|(_, key)| key)
            .collect())
    }

    /// Every session's unexpired grants that this user's toolgate wrote, as (session, key),
    /// oldest first (what the console lists).
    pub fn all_session_grants(&self) -> Result<Vec<(String, String)>> {
        self.signed_session_grants(None)
    }

    /// Revoke `key` from `session`: how many grants were removed (0 or 1).
    pub fn revoke_session_grant(&self, session: &str, key: &str) -> Result<usize> {
        self.conn()
            .execute(
                "DELETE FROM session_grants WHERE session = ?1 AND key = ?2",
                rusqlite::params![session, key],
            )
            .map_err(|e| self.err(e))
    }

    /// The unexpired, validly signed grants of `session` (of every session: `None`).
    fn signed_session_grants(&self, session: Option<&str>) -> Result<Vec<(String, String)>> {
        let Some((keyring, ws)) = self.grant_signer.0.get() else {
            return Ok(Vec::new());
        };
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT session, key, expires_ms, sig FROM session_grants
                 WHERE (?1 IS NULL OR session = ?1)
                 AND (expires_ms IS NULL OR expires_ms > ?2) ORDER BY at_ms",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(rusqlite::params![session, now_ms()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<i64>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })
            .map_err(|e| self.err(e))?;
        let rows = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        Ok(rows
            .into_iter()
            .filter(|(session, key, expires, sig)| {
                let expiry = expires.map(|e| e.to_string()).unwrap_or_default();
                sig.as_deref()
                    .is_some_and(|s| keyring.verify(&[SIGNED_AS, ws, session, key, &expiry], s))
            })
            .map(|(session, key, _, _)| (session, key))
            .collect())
    }
}
