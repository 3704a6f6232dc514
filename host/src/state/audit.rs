//! Audit events: for every call its intent (redacted input and its hash), the decision with
//! its stage and source, when execution started, and how it completed.

use super::{now_ms, StateDb};
use crate::error::Result;
use serde::Serialize;
use serde_json::Value;

/// One audit event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditEvent {
    /// Row id, increasing.
    pub id: i64,
    /// The call this event belongs to (the observation's `audit_id`).
    pub call_id: String,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The session that made the call.
    pub session: String,
    /// The tool called.
    pub tool: String,
    /// `intent`, `decision`, `started` or `completed`.
    pub event: String,
    /// Event-specific detail.
    pub detail: Value,
}

/// A filter for [`StateDb::audit_events`].
#[derive(Clone, Debug, Default)]
pub struct AuditQuery {
    /// Only this tool.
    pub tool: Option<String>,
    /// Only calls whose decision event says this (`allow`, `deny`, ...).
    pub decision: Option<String>,
    /// Only events at or after this time (ms since the epoch).
    pub since_ms: Option<i64>,
    /// Only this call.
    pub call_id: Option<String>,
    /// At most this many events (newest kept).
    pub limit: Option<usize>,
}

impl StateDb {
    /// Append events for one call in one transaction.
    pub fn audit(
        &self,
        call_id: &str,
        session: &str,
        tool: &str,
        events: &[(&str, Value)],
    ) -> Result<()> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO audit (call_id, at_ms, session, tool, event, detail)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(|e| self.err(e))?;
            let at = now_ms();
            for (event, detail) in events {
                stmt.execute(rusqlite::params![
                    call_id,
                    at,
                    session,
                    tool,
                    event,
                    detail.to_string()
                ])
                .map_err(|e| self.err(e))?;
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// Audit events matching `query`, oldest first.
    pub fn audit_events(&self, query: &AuditQuery) -> Result<Vec<AuditEvent>> {
        let conn = self.conn();
        let mut sql = String::from(
            "SELECT id, call_id, at_ms, session, tool, event, detail FROM audit WHERE 1=1",
        );
        let mut params: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
        if let Some(tool) = &query.tool {
            sql.push_str(" AND tool = ?");
            params.push(Box::new(tool.clone()));
        }
        if let Some(since) = query.since_ms {
            sql.push_str(" AND at_ms >= ?");
            params.push(Box::new(since));
        }
        if let Some(call) = &query.call_id {
            sql.push_str(" AND call_id = ?");
            params.push(Box::new(call.clone()));
        }
        if let Some(decision) = &query.decision {
            sql.push_str(
                " AND call_id IN (SELECT call_id FROM audit WHERE event = 'decision'
                  AND json_extract(detail, '$.decision') = ?)",
            );
            params.push(Box::new(decision.clone()));
        }
        sql.push_str(" ORDER BY id DESC");
        if let Some(limit) = query.limit {
            sql.push_str(&format!(" LIMIT {limit}"));
        }
        let mut stmt = conn.prepare(&sql).map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(
                rusqlite::params_from_iter(params.iter().map(|p| p.as_ref())),
                |row| {
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
                },
            )
            .map_err(|e| self.err(e))?;
        let mut events = rows
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(|e| self.err(e))?;
        events.reverse();
        Ok(events)
    }
}

/// Input as stored in the audit log: values under secret-looking keys replaced, long strings
/// cut to a prefix with their length and hash.
pub fn redact(input: &Value) -> Value {
    const MAX: usize = 200;
    match input {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    let secret = [
                        "password",
                        "secret",
                        "token",
                        "apikey",
                        "api_key",
                        "authorization",
                        "credential",
                        "cookie",
                    ]
                    .iter()
                    .any(|s| lower.contains(s));
                    if secret {
                        (k.clone(), Value::String("[redacted]".into()))
                    } else {
                        (k.clone(), redact(v))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        Value::String(s) if s.len() > MAX => {
            use sha2::{Digest, Sha256};
            let mut cut = MAX;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            Value::String(format!(
                "{}… [{} bytes, sha256 {}]",
                &s[..cut],
                s.len(),
                &hex::encode(Sha256::digest(s.as_bytes()))[..16]
            ))
        }
        other => other.clone(),
    }
}
