//! The audit read per call: every call's events together (what `toolgate audit` prints one
//! line for), the newest calls first when a limit applies, and the events written after a
//! given row id (what `toolgate audit --follow` polls for).

use super::audit::{AuditEvent, AuditQuery};
use super::StateDb;
use crate::error::Result;
use serde_json::Value;

/// One call's audit events, oldest first (see [`StateDb::audit_calls`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AuditCall {
    /// The call's id (the observation's `audit_id`).
    pub call_id: String,
    /// The session that made the call.
    pub session: String,
    /// The tool called.
    pub tool: String,
    /// Its events (`intent`, `decision`, `started`, `completed`), oldest first.
    pub events: Vec<AuditEvent>,
}

impl AuditCall {
    fn event(&self, name: &str) -> Option<&AuditEvent> {
        self.events.iter().find(|e| e.event == name)
    }

    fn decision_field(&self, field: &str) -> Option<&str> {
        self.event("decision")?.detail.get(field)?.as_str()
    }

    fn completed_field(&self, field: &str) -> Option<&Value> {
        self.event("completed")?.detail.get(field)
    }

    /// When the call began (its first event), ms since the epoch.
    pub fn started_ms(&self) -> i64 {
        self.events.first().map_or(0, |e| e.at_ms)
    }

    /// The row id of its first event (calls are listed in this order).
    pub fn first_id(&self) -> i64 {
        self.events.first().map_or(0, |e| e.id)
    }

    /// What the ladder decided: `allow`, `deny`, `error` or `cancelled`.
    pub fn decision(&self) -> Option<&str> {
        self.decision_field("decision")
    }

    /// The stage that decided (`scope`, `rules`, `session-allowlist`, ...).
    pub fn stage(&self) -> Option<&str> {
        self.decision_field("stage")
    }

    /// The call key the decision was about (`edit:src/a.rs`), once the ladder computed it.
    pub fn key(&self) -> Option<&str> {
        self.decision_field("permission")
    }

    /// Whether the call has completed (a refused call completes when it is refused).
    pub fn is_complete(&self) -> bool {
        self.event("completed").is_some()
    }

    /// How it ended: the observation's status (`ok`, `error`, `denied`, `needs_approval`);
    /// without a `completed` event, `running` once it started, or what its decision says.
    pub fn status(&self) -> String {
        if self.is_complete() {
            return self
                .completed_field("status")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_string();
        }
        match self.decision() {
            Some("deny") => "denied".into(),
            Some("error") => "error".into(),
            Some("cancelled") => "cancelled".into(),
            _ => "running".into(),
        }
    }

    /// The observation's error code when it ended in error (`not-found`, `cancelled`, ...).
    pub fn error_code(&self) -> Option<&str> {
        self.completed_field("error_code")?.as_str()
    }

    /// How long it took, in microseconds: what the gate measured, else the time between its
    /// first event and its `completed` event. `None` while it runs.
    pub fn duration_us(&self) -> Option<u64> {
        if let Some(us) = self.completed_field("duration_us").and_then(Value::as_u64) {
            return Some(us);
        }
        let done = self.event("completed")?;
        let ms = done.at_ms.saturating_sub(self.started_ms()).max(0);
        Some(u64::try_from(ms).unwrap_or(0).saturating_mul(1000))
    }
}

/// Group events (in row order) into calls, ordered by their first event.
fn group(events: Vec<AuditEvent>) -> Vec<AuditCall> {
    let mut calls: Vec<AuditCall> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for e in events {
        match index.get(&e.call_id) {
            Some(&i) => calls[i].events.push(e),
            None => {
                index.insert(e.call_id.clone(), calls.len());
                calls.push(AuditCall {
                    call_id: e.call_id.clone(),
                    session: e.session.clone(),
                    tool: e.tool.clone(),
                    events: vec![e],
                });
            }
        }
    }
    calls
}

const COLUMNS: &str = "id, call_id, at_ms, session, tool, event, detail";

fn event_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AuditEvent> {
    let detail: String = row.get(6)?;
    Ok(AuditEvent {
        id: row.get(0)?,
        call_id: row.get(1)?,
        at_ms: row.get(2)?,
        session: row.get(3)?,
        tool: row.get(4)?,
        event: row.get(5)?,
        detail: serde_json::from_str(&detail).unwrap_or(Value::String(detail)),
    })
}

impl StateDb {
    /// The highest audit row id so far (0 when the audit is empty): rows written later have
    /// higher ids, whichever process writes them.
    pub fn audit_max_id(&self) -> Result<i64> {
        self.flush_audit();
        self.conn()
            .query_row("SELECT COALESCE(MAX(id), 0) FROM audit", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    /// The calls matching `query`, oldest first, among rows up to `up_to` (ids, see
    /// [`StateDb::audit_max_id`]). Every filter applies to the call: `tool` its tool, `decision`
    /// its decision event, `since_ms` calls with an event at or after it, `call_id` that call,
    /// `limit` the newest calls (by their first event). Each call comes with all its events up
    /// to `up_to`.
    pub fn audit_calls(&self, query: &AuditQuery, up_to: i64) -> Result<Vec<AuditCall>> {
        self.flush_audit();
        let conn = self.conn();
        let mut sql = String::from("SELECT call_id, MIN(id) AS first FROM audit WHERE id <= ?");
        let mut params: Vec<Box<dyn rusqlite::ToSql>> = vec![Box::new(up_to)];
        if let Some(since) = query.since_ms {
            sql.push_str(" AND call_id IN (SELECT call_id FROM audit WHERE at_ms >= ?)");
            params.push(Box::new(since));
        }
        super::audit::push_call_filters(query, &mut sql, &mut params);
        sql.push_str(" GROUP BY call_id ORDER BY first DESC");
        if let Some(limit) = query.limit {
            sql.push_str(&format!(" LIMIT {limit}"));
        }
        // Every event of the chosen calls, in one pass over the call index.
        let sql = format!(
            "SELECT {COLUMNS} FROM audit WHERE id <= ? AND call_id IN
             (SELECT call_id FROM ({sql})) ORDER BY id"
        );
        params.insert(0, Box::new(up_to));
        let mut stmt = conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                rusqlite::params_from_iter(params.iter().map(|p| p.as_ref())),
                event_from_row,
            )
            .map_err(|e| self.err(e))?;
        let events = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        let mut calls = group(events);
        calls.sort_by_key(AuditCall::first_id);
        Ok(calls)
    }

    /// One call with all its events, or `None` when the audit has no such call.
    pub fn audit_call(&self, call_id: &str) -> Result<Option<AuditCall>> {
        self.flush_audit();
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM audit WHERE call_id = ?1 ORDER BY id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([call_id], event_from_row)
            .map_err(|e| self.err(e))?;
        let events = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        Ok(group(events).into_iter().next())
    }

    /// The `completed` events with a row id above `after`, oldest first, at most `max`: as
    /// (row id, call id).
    pub fn audit_completions_after(&self, after: i64, max: usize) -> Result<Vec<(i64, String)>> {
        self.flush_audit();
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT id, call_id FROM audit WHERE id > ?1 AND event = 'completed'
                 ORDER BY id LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(rusqlite::params![after, max], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }

    /// Audit events with a row id above `after`, oldest first, at most `max`, of `tool` and
    /// `call_id` when given.
    pub fn audit_events_after(
        &self,
        after: i64,
        tool: Option<&str>,
        call_id: Option<&str>,
        max: usize,
    ) -> Result<Vec<AuditEvent>> {
        self.flush_audit();
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM audit WHERE id > ?1
                 AND (?2 IS NULL OR tool = ?2) AND (?3 IS NULL OR call_id = ?3)
                 ORDER BY id LIMIT ?4"
            ))
            .map_err(|e| self.err(e))?;
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = stmt
            .query_map(rusqlite::params![after, tool, call_id, max], event_from_row)
            .map_err(|e| self.err(e))?;
        rows.collect::<rusqlite::Result<_>>()
            .map_err(|e| self.err(e))
    }
}
