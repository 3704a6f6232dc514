//! Audit events: for every call its intent (redacted input and its hash), the decision with
//! its stage and source, when execution started, and how it completed. No secret is stored by
//! value: every detail is scanned on its way in (see `super::redact`).

use super::audit_queue::Sender;
use super::redact::{scan, secret_name_kind};
use super::{now_ms, StateDb};
use crate::error::Result;
use rusqlite::Connection;
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::path::Path;
use std::sync::mpsc;

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
    /// Append events for one call. Every string in each detail is scanned for secrets first
    /// (see [`scrub`]), so nothing stored depends on the caller having redacted it. They are
    /// written by the audit writer thread (batched, one transaction per batch) so the call
    /// does not wait for SQLite; [`StateDb::flush_audit`], every audit query and dropping the
    /// database wait until they are on disk.
    pub fn audit(
        &self,
        call_id: &str,
        session: &str,
        tool: &str,
        events: &[(&str, Value)],
    ) -> Result<()> {
        // Scrubbing, the OTLP export and the rows are the writer's work, off the call's path.
        let call = AuditCall {
            call_id: call_id.to_string(),
            at_ms: now_ms(),
            session: session.to_string(),
            tool: tool.to_string(),
            events: events
                .iter()
                .map(|(event, detail)| ((*event).to_string(), detail.clone()))
                .collect(),
        };
        // The call's read records go in the same message (see `StateDb::record_read`).
        let reads = self.take_unsent_reads();
        let (call, reads) = match self.writer.send(AuditMsg::Call(call, reads), false) {
            Ok(()) => return Ok(()),
            Err(AuditMsg::Call(call, reads)) => (call, reads),
            Err(_) => return Ok(()),
        };
        // The writer is gone (it failed to open the database): write here instead.
        if !reads.is_empty() {
            self.write_reads_here(&reads);
        }
        let mut conn = self.conn();
        write_rows(&mut conn, &call.into_rows()).map_err(|e| self.err(e))
    }

    /// This process serves many calls for long (`serve --http`): its audit writer checkpoints
    /// the WAL less often (see [`SERVER_CHECKPOINT_FRAMES`]).
    pub fn serve_many(&self) {
        let _ = self.writer.send(AuditMsg::Serving, false);
    }

    /// Wait until every audit event sent so far is written.
    pub fn flush_audit(&self) {
        self.send_unsent_reads();
        let (tx, rx) = mpsc::channel();
        if self.writer.send(AuditMsg::Flush(tx), true).is_ok() {
            let _ = rx.recv();
        }
    }

    /// Audit events matching `query`, oldest first.
    pub fn audit_events(&self, query: &AuditQuery) -> Result<Vec<AuditEvent>> {
        self.flush_audit();
        let conn = self.conn();
        let mut sql = String::from(
            "SELECT id, call_id, at_ms, session, tool, event, detail FROM audit WHERE 1=1",
        );
        let mut params: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
        if let Some(since) = query.since_ms {
            sql.push_str(" AND at_ms >= ?");
            params.push(Box::new(since));
        }
        push_call_filters(query, &mut sql, &mut params);
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

/// The `AND ...` clauses of `query`'s tool, call and decision filters, with their values: the
/// same for a listing of events and one of calls (`since_ms` differs and is each one's own).
pub(super) fn push_call_filters(
    query: &AuditQuery,
    sql: &mut String,
    params: &mut Vec<Box<dyn rusqlite::ToSql>>,
) {
    if let Some(tool) = &query.tool {
        sql.push_str(" AND tool = ?");
        params.push(Box::new(tool.clone()));
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
}

/// Fields whose value is file text (write's `content`, edit's `old_string` / `new_string`,
/// the same inside multiedit's `edits`): the audit keeps their size, hash and a redacted
/// excerpt, never the text, which is history's to keep.
const TEXT_FIELDS: &[&str] = &["content", "old_string", "new_string"];

/// Keys the host itself writes with a sha256 hex digest as value: never scanned (a digest is
/// not a secret, and it is how two calls are compared).
const HOST_DIGEST_KEYS: &[&str] = &["input_sha256", "sha256"];

/// Strings longer than this are stored as a prefix with their length and hash, and text
/// fields keep an excerpt this long.
const MAX_STORED: usize = 200;

/// How much of a long string is scanned before it is cut: a secret that starts inside the
/// kept prefix is seen whole (a PEM key block is about 3 kB), and a 64 MiB write is not
/// scanned to its end for 200 bytes of excerpt.
const SCAN_WINDOW: usize = 16 << 10;

/// Input as stored in the audit log: values under secret-looking keys replaced by
/// `[redacted]`, every string scanned for secret values (see [`super::redact`]), file text
/// stored as `{bytes, sha256, excerpt}`, other long strings cut to a prefix with their length
/// and hash.
pub fn redact(input: &Value) -> Value {
    match input {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::String(s) if TEXT_FIELDS.contains(&k.as_str()) => json!({
                            "bytes": s.len(),
                            "sha256": hex::encode(Sha256::digest(s.as_bytes())),
                            "excerpt": excerpt(s).0,
                        }),
                        _ if is_host_digest(k, v) => v.clone(),
                        _ if secret_name_kind(k).is_some() => Value::String(REDACTED.into()),
                        _ => redact(v),
                    };
                    (scan(k).into_owned(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        Value::String(s) if s.len() > MAX_STORED => match excerpt(s) {
            // Short enough once its secrets are markers.
            (whole, true) => Value::String(whole),
            (cut, false) => Value::String(format!(
                "{cut}… [{} bytes, sha256 {}]",
                s.len(),
                &hex::encode(Sha256::digest(s.as_bytes()))[..16]
            )),
        },
        Value::String(s) => Value::String(scan(s).into_owned()),
        other => other.clone(),
    }
}

/// What replaces a value under a secret-looking key: nothing of it is shown, not even its
/// kind, since the key only says it is secret.
const REDACTED: &str = "[redacted]";

/// The first [`MAX_STORED`] bytes of `s` after scanning, and whether that is all of it; a
/// marker is never cut in half (the cut moves before it).
fn excerpt(s: &str) -> (String, bool) {
    let window = prefix(s, MAX_STORED + SCAN_WINDOW);
    // Known values (see `super::secrets`) before the cut, so none is kept in half.
    let known = super::secrets::scrub_known(window);
    let scanned = scan(known.as_deref().unwrap_or(window));
    let mut cut = prefix(&scanned, MAX_STORED).len();
    if let Some(open) = scanned[..cut].rfind("[redacted") {
        if !scanned[open..cut].contains("…]") && scanned[open..].contains("…]") {
            cut = open;
        }
    }
    if let Some(open) = scanned[..cut].rfind("[secret value from ") {
        if !scanned[open..cut].contains(']') {
            cut = open;
        }
    }
    let whole = cut == scanned.len() && window.len() == s.len();
    (scanned[..cut].to_string(), whole)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
fn prefix(s: &str, max: usize) -> &str {
    let mut cut = max.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

fn is_host_digest(key: &str, v: &Value) -> bool {
    HOST_DIGEST_KEYS.contains(&key)
        && v.as_str().is_some_and(|s| {
            s.len() == 64
                && s.bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        })
}

/// What the audit writer does to every event detail, whoever built it: every string value and
/// key is scanned for secrets and values under secret-looking keys are replaced, so a caller
/// that forgot [`redact`] (or a reason, summary or error that quotes the input) stores no
/// secret by value. Idempotent: markers are not matched again.
fn scrub(v: &mut Value) {
    match v {
        Value::String(s) => {
            // Known values first, so the placeholder names what was removed.
            if let Some(clean) = super::secrets::scrub_known(s) {
                *s = clean;
            }
            if let Cow::Owned(clean) = scan(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(scrub),
        Value::Object(map) => {
            if map.keys().any(|k| matches!(scan(k), Cow::Owned(_))) {
                let old = std::mem::take(map);
                *map = old
                    .into_iter()
                    .map(|(k, v)| (scan(&k).into_owned(), v))
                    .collect();
            }
            for (k, v) in map.iter_mut() {
                if is_host_digest(k, v) {
                    continue;
                }
                if secret_name_kind(k).is_some() {
                    if v.as_str() != Some(REDACTED) {
                        *v = Value::String(REDACTED.into());
                    }
                } else {
                    scrub(v);
                }
            }
        }
        _ => {}
    }
}

/// One call's audit events on their way to the writer, as the gate gave them.
pub(crate) struct AuditCall {
    call_id: String,
    at_ms: i64,
    session: String,
    tool: String,
    events: Vec<(String, Value)>,
}

impl AuditCall {
    /// The rows to store: every string in each detail scanned for secrets first (see
    /// [`scrub`]), so nothing stored depends on the caller having redacted it; the OTLP
    /// export sees exactly what is stored (a no-op when none is configured).
    fn into_rows(mut self) -> Vec<AuditRow> {
        for (_, detail) in &mut self.events {
            scrub(detail);
        }
        crate::telemetry::record(&self.call_id, &self.session, &self.tool, &self.events);
        self.events
            .into_iter()
            .map(|(event, detail)| AuditRow {
                call_id: self.call_id.clone(),
                at_ms: self.at_ms,
                session: self.session.clone(),
                tool: self.tool.clone(),
                event,
                detail: detail.to_string(),
            })
            .collect()
    }
}

/// One audit row on its way to the database.
pub(crate) struct AuditRow {
    call_id: String,
    at_ms: i64,
    session: String,
    tool: String,
    event: String,
    detail: String,
}

/// A message to the audit writer thread.
pub(crate) enum AuditMsg {
    /// One call's events to append, with the read records made since the last message.
    Call(AuditCall, Vec<super::read_rows::ReadRow>),
    /// Read records to store (see `StateDb::record_read`).
    Reads(Vec<super::read_rows::ReadRow>),
    /// Reply once everything before this is written.
    Flush(mpsc::Sender<()>),
    /// The process serves many calls for long: checkpoint the WAL every
    /// [`SERVER_CHECKPOINT_FRAMES`] frames instead of [`CHECKPOINT_FRAMES`].
    Serving,
}

/// Frames between the writer's WAL checkpoints: every new process that finds no other
/// connection open rebuilds SQLite's WAL index by reading the WAL's valid frames (a one-shot
/// `toolgate call` read 4 MB, ~1 ms, at SQLite's 1000), and the few calls a checkpoint lands
/// on pay its fsyncs.
const CHECKPOINT_FRAMES: i64 = 256;

/// Frames between checkpoints in a server (`StateDb::serve_many`): ~28% of the writer's time
/// under the load script went to checkpoints at 256 (copying the same hot pages back again and
/// again, with two fsyncs each); at 2000 the load's calls a second rose 3-8% and its p99 fell
/// ~1.5-4 ms. While the server runs, other processes map its WAL index instead of rebuilding
/// it, and a server that closes normally checkpoints and removes the WAL.
const SERVER_CHECKPOINT_FRAMES: i64 = 2000;

/// Most rows written in one transaction.
const BATCH: usize = 512;

/// Start the writer thread for the database at `path`. It owns its own connection and ends
/// when the queue is closed, after writing what it was sent. Calls do not wake it one by one
/// (see `super::audit_queue`): it writes what arrived within `LINGER` of
/// waking, in one transaction.
pub(crate) fn start_writer(
    path: &Path,
    pending_reads: super::read_rows::PendingReads,
) -> std::io::Result<(Sender<AuditMsg>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = super::audit_queue::queue::<AuditMsg>();
    let path = path.to_path_buf();
    let handle = std::thread::Builder::new()
        .name("toolgate-audit".into())
        .spawn(move || {
            let conn = super::open::connect(&path).and_then(|c| {
                c.busy_timeout(std::time::Duration::from_secs(10))?;
                c.pragma_update(None, "synchronous", "NORMAL")?;
                c.pragma_update(None, "wal_autocheckpoint", CHECKPOINT_FRAMES)?;
                Ok(c)
            });
            let mut conn = match conn {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, path = %path.display(), "audit writer cannot open the state database");
                    return;
                }
            };
            while let Some(batch) = rx.next_batch(super::audit_queue::LINGER) {
                let mut rows = Vec::new();
                let mut reads = Vec::new();
                let mut flushes = Vec::new();
                for msg in batch {
                    match msg {
                        AuditMsg::Call(c, r) => {
                            rows.extend(c.into_rows());
                            reads.extend(r);
                        }
                        AuditMsg::Reads(r) => reads.extend(r),
                        AuditMsg::Flush(reply) => flushes.push(reply),
                        AuditMsg::Serving => {
                            let frames = SERVER_CHECKPOINT_FRAMES;
                            if let Err(e) = conn.pragma_update(None, "wal_autocheckpoint", frames)
                            {
                                tracing::warn!(error = %e, "setting the server's WAL checkpoint interval failed");
                            }
                        }
                    }
                    if rows.len() + reads.len() >= BATCH {
                        write_batch(&mut conn, &rows, &reads, &pending_reads);
                        rows.clear();
                        reads.clear();
                    }
                }
                write_batch(&mut conn, &rows, &reads, &pending_reads);
                for reply in flushes {
                    let _ = reply.send(());
                }
            }
            // The database is closing (the process is done with it): what was exported over
            // OTLP is sent before it goes, within a bound (nothing when none is configured).
            crate::telemetry::flush();
        })?;
    Ok((tx, handle))
}

/// Store `rows` and `reads` in one transaction (one WAL commit); if that fails, each on its
/// own, so a failing part does not take the other with it. Read records stay pending until
/// committed.
fn write_batch(
    conn: &mut Connection,
    rows: &[AuditRow],
    reads: &[super::read_rows::ReadRow],
    pending_reads: &super::read_rows::PendingReads,
) {
    if rows.is_empty() && reads.is_empty() {
        return;
    }
    let together = conn.transaction().and_then(|tx| {
        insert_rows(&tx, rows)?;
        super::read_rows::insert_reads(&tx, reads)?;
        tx.commit()
    });
    if together.is_ok() {
        pending_reads.settle(reads);
        return;
    }
    if !rows.is_empty() {
        if let Err(e) = write_rows(conn, rows) {
            tracing::error!(error = %e, rows = rows.len(), "audit write failed");
        }
    }
    if !reads.is_empty() {
        match super::read_rows::write_reads(conn, reads) {
            Ok(()) => pending_reads.settle(reads),
            // They stay pending: this process keeps seeing them.
            Err(e) => {
                tracing::error!(error = %e, reads = reads.len(), "read record write failed")
            }
        }
    }
}

fn write_rows(conn: &mut Connection, rows: &[AuditRow]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    insert_rows(&tx, rows)?;
    tx.commit()
}

fn insert_rows(tx: &rusqlite::Transaction<'_>, rows: &[AuditRow]) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT INTO audit (call_id, at_ms, session, tool, event, detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for r in rows {
        stmt.execute(rusqlite::params![
            r.call_id, r.at_ms, r.session, r.tool, r.event, r.detail
        ])?;
    }
    Ok(())
}
