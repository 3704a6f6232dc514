//! Session grants from prompt answers: they last for the session (separate `toolgate call`
//! processes with the same `--session` share them), optionally until an expiry.

use super::{now_ms, StateDb};
use crate::error::Result;

impl StateDb {
    /// Grant `key` to `session`, until `expires_ms` if given.
    pub fn add_session_grant(
        &self,
        session: &str,
        key: &str,
        expires_ms: Option<i64>,
    ) -> Result<()> {
        self.conn()
            .execute(
                "INSERT INTO session_grants (session, key, expires_ms, at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (session, key) DO UPDATE SET expires_ms = excluded.expires_ms, at_ms = excluded.at_ms",
                rusqlite::params![session, key, expires_ms, now_ms()],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The session's unexpired grant keys.
    pub fn session_grants(&self, session: &str) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT key FROM session_grants WHERE session = ?1
                 AND (expires_ms IS NULL OR expires_ms > ?2) ORDER BY at_ms",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(rusqlite::params![session, now_ms()], |r| {
                r.get::<_, String>(0)
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))
    }
}
