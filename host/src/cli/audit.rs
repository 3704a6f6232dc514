//! `toolgate audit`: the audit trail of this workspace's calls, one line per call (or every
//! event as a JSON line with `--json`), and with `--follow` each new call as it completes.
//!
//! Everything shown comes from `.toolgate/state.db`, whose strings come from tools, models and
//! possibly a hand-edited database: every one is escaped (`text::escape_name`) so a
//! name holding a newline or an ANSI escape stays on its line and recolours nothing.

use anyhow::Result;
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use toolgate::state::{AuditCall, AuditEvent, AuditQuery, StateDb};
use toolgate::text::escape_name;

/// Show the audit: one line per call, oldest first (time, session, tool, key,
/// decision@stage, status, duration, call id).
#[derive(clap::Args)]
pub struct AuditArgs {
    /// Only calls of this tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only calls with this decision (`allow`, `deny`, `error`, `cancelled`).
    #[arg(long)]
    decision: Option<String>,
    /// Only calls with an event in the last SECONDS seconds (with --json: only such events).
    #[arg(long, value_name = "SECONDS")]
    since: Option<i64>,
    /// Only this call (an observation's `audit_id`, the last column); exit code 2 when the
    /// audit has no such call.
    #[arg(long)]
    call: Option<String>,
    /// Only the newest N calls (with --json: the newest N events).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Print every event as a JSON line instead.
    #[arg(long)]
    json: bool,
    /// Keep running: print each new call's line when it completes (with --json: each new
    /// event), until interrupted or stdout is closed.
    #[arg(long)]
    follow: bool,
}

/// How often `--follow` looks for new rows.
const POLL: Duration = Duration::from_millis(200);

/// Most rows read per look (more are read at once, without waiting, when there are).
const BATCH: usize = 256;

/// Exit code when `--call` names no call in the audit (as for other wrong arguments).
const EXIT_NO_SUCH_CALL: u8 = 2;

/// Run `toolgate audit` on the workspace at `root`.
pub fn run(root: &Path, args: AuditArgs) -> Result<ExitCode> {
    match run_inner(root, args) {
        // The reader went away (`toolgate audit | head`): that is the end, not an error.
        Err(e) if super::exit::is_broken_pipe(&e) => Ok(ExitCode::SUCCESS),
        other => other,
    }
}

fn run_inner(root: &Path, args: AuditArgs) -> Result<ExitCode> {
    let ws = toolgate::workspace::Workspace::new(root, &[])?;
    let db = super::open_state(&ws)?;
    let query = AuditQuery {
        tool: args.tool,
        decision: args.decision,
        since_ms: args
            .since
            .map(|s| toolgate::state::now_ms().saturating_sub(s.saturating_mul(1000))),
        call_id: args.call,
        limit: args.limit,
    };
    if let Some(id) = &query.call_id {
        if db.audit_call(id)?.is_none() {
            eprintln!(
                "toolgate: the audit of this workspace has no call {}; `toolgate audit` lists the calls, each with its id last",
                quoted(id)
            );
            return Ok(ExitCode::from(EXIT_NO_SUCH_CALL));
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        json(&db, &query, args.follow, &mut out)?;
    } else {
        let header = std::io::stdout().is_terminal();
        table(&db, &query, args.follow, header, &mut out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The table: one line per call. Followed, a call still running is printed once it
/// completes (each call is printed once), and `--call` ends once that call has completed.
fn table(
    db: &StateDb,
    query: &AuditQuery,
    follow: bool,
    header: bool,
    out: &mut impl Write,
) -> Result<()> {
    let up_to = db.audit_max_id()?;
    let calls = db.audit_calls(query, up_to)?;
    let lines: Vec<Line> = calls
        .iter()
        .filter(|c| !follow || c.is_complete())
        .map(Line::of)
        .collect();
    let widths = Widths::fit(&lines);
    if header {
        widths.write(out, &Line::header())?;
    }
    for line in &lines {
        widths.write(out, line)?;
    }
    out.flush()?;
    if !follow || call_done(db, query, up_to)? {
        return Ok(());
    }
    let mut last = up_to;
    loop {
        if stdout_closed() {
            return Ok(());
        }
        let batch = db.audit_completions_after(last, BATCH)?;
        for (id, call_id) in &batch {
            last = *id;
            let Some(call) = db.audit_call(call_id)? else {
                continue;
            };
            if matches(&call, query) {
                widths.write(out, &Line::of(&call))?;
                out.flush()?;
            }
            if query.call_id.as_ref() == Some(call_id) {
                return Ok(());
            }
        }
        if batch.len() < BATCH {
            std::thread::sleep(POLL);
        }
    }
}

/// Whether `--call` names a call that completed at or before row `up_to` (what was listed):
/// following it, nothing more will come.
fn call_done(db: &StateDb, query: &AuditQuery, up_to: i64) -> Result<bool> {
    let Some(id) = &query.call_id else {
        return Ok(false);
    };
    Ok(db.audit_call(id)?.is_some_and(|c| {
        c.events
            .iter()
            .any(|e| e.event == "completed" && e.id <= up_to)
    }))
}

/// Whether a call that just completed passes the per-call filters (`--since` and `--limit`
/// shape only the first listing: a call completing now is new).
fn matches(call: &AuditCall, query: &AuditQuery) -> bool {
    query.tool.as_ref().is_none_or(|t| *t == call.tool)
        && query.call_id.as_ref().is_none_or(|c| *c == call.call_id)
        && query
            .decision
            .as_ref()
            .is_none_or(|d| Some(d.as_str()) == call.decision())
}

/// `--json`: every matching event as it is stored, one JSON object per line; followed, each
/// new event of a matching call as it is written (`--call` ends at that call's `completed`).
fn json(db: &StateDb, query: &AuditQuery, follow: bool, out: &mut impl Write) -> Result<()> {
    let before = db.audit_max_id()?;
    let events = db.audit_events(query)?;
    for e in &events {
        writeln!(out, "{}", serde_json::to_string(e)?)?;
    }
    out.flush()?;
    if !follow {
        return Ok(());
    }
    // Anything newer that matches is either listed already or has a higher id than both.
    let mut last = events.last().map_or(before, |e| e.id.max(before));
    if call_done(db, query, last)? {
        return Ok(());
    }
    // Each call's decision, once known (a call's intent and decision are written together).
    let mut decisions: HashMap<String, String> = HashMap::new();
    loop {
        if stdout_closed() {
            return Ok(());
        }
        let batch =
            db.audit_events_after(last, query.tool.as_deref(), query.call_id.as_deref(), BATCH)?;
        for e in &batch {
            last = e.id;
            let wanted = match &query.decision {
                Some(d) => decision_of(db, e, &mut decisions)?.as_deref() == Some(d.as_str()),
                None => true,
            };
            if wanted {
                writeln!(out, "{}", serde_json::to_string(e)?)?;
            }
            if query.call_id.is_some() && e.event == "completed" {
                out.flush()?;
                return Ok(());
            }
        }
        out.flush()?;
        if batch.len() < BATCH {
            std::thread::sleep(POLL);
        }
    }
}

/// The decision of the call `e` belongs to, from `known` or the database.
fn decision_of(
    db: &StateDb,
    e: &AuditEvent,
    known: &mut HashMap<String, String>,
) -> Result<Option<String>> {
    if let Some(d) = known.get(&e.call_id) {
        return Ok(Some(d.clone()));
    }
    let found = if e.event == "decision" {
        e.detail
            .get("decision")
            .and_then(|d| d.as_str())
            .map(str::to_string)
    } else {
        db.audit_call(&e.call_id)?
            .and_then(|c| c.decision().map(str::to_string))
    };
    if let Some(d) = &found {
        // A long follow does not keep every call it saw.
        if known.len() >= 4096 {
            known.clear();
        }
        known.insert(e.call_id.clone(), d.clone());
    }
    Ok(found)
}

/// One call's line, every field already escaped.
pub struct Line {
    cells: [String; 8],
}

/// Columns: time, session, tool, key, decision@stage, status, duration, call id.
const HEADER: [&str; 8] = [
    "TIME", "SESSION", "TOOL", "KEY", "DECISION", "STATUS", "DURATION", "CALL",
];

/// The duration column is right-aligned.
const DURATION: usize = 6;

/// A column is padded to at most this many characters: a longer value (a long key) pushes
/// the rest of its line instead of widening every line.
const MAX_WIDTH: usize = 40;

impl Line {
    /// The line of `call`.
    pub fn of(call: &AuditCall) -> Line {
        let text = |s: Option<&str>| s.map_or_else(|| "-".to_string(), shown);
        let decision = match (call.decision(), call.stage()) {
            (Some(d), Some(s)) => format!("{}@{}", shown(d), shown(s)),
            (Some(d), None) => shown(d),
            (None, _) => "-".into(),
        };
        let status = match (call.status(), call.error_code()) {
            (s, Some(code)) if s == "error" => format!("error:{}", shown(code)),
            (s, _) => shown(&s),
        };
        Line {
            cells: [
                local_time(call.started_ms()),
                shown(&call.session),
                shown(&call.tool),
                text(call.key()),
                decision,
                status,
                call.duration_us().map_or_else(|| "-".into(), duration),
                shown(&call.call_id),
            ],
        }
    }

    fn header() -> Line {
        Line {
            cells: HEADER.map(str::to_string),
        }
    }
}

/// Column widths, fitted once to the first listing (and the header): lines printed later by
/// `--follow` keep them.
struct Widths([usize; 8]);

impl Widths {
    fn fit(lines: &[Line]) -> Widths {
        let mut w = HEADER.map(|h| h.chars().count());
        for line in lines {
            for (w, cell) in w.iter_mut().zip(&line.cells) {
                *w = (*w).max(cell.chars().count().min(MAX_WIDTH));
            }
        }
        Widths(w)
    }

    fn write(&self, out: &mut impl Write, line: &Line) -> std::io::Result<()> {
        let last = line.cells.len() - 1;
        let mut text = String::new();
        for (i, (cell, width)) in line.cells.iter().zip(self.0).enumerate() {
            if i == last {
                text.push_str(cell);
            } else if i == DURATION {
                text.push_str(&format!("{cell:>width$}  "));
            } else {
                text.push_str(&format!("{cell:<width$}  "));
            }
        }
        writeln!(out, "{text}")
    }
}

/// A stored string as the table shows it: unchanged when plain, else quoted and escaped
/// (a space-free placeholder when empty, so columns stay countable).
fn shown(s: &str) -> String {
    if s.is_empty() {
        return "\"\"".into();
    }
    escape_name(s).into_owned()
}

/// A name in a sentence: in backquotes when plain, escaped and quoted otherwise.
fn quoted(s: &str) -> Cow<'_, str> {
    match escape_name(s) {
        Cow::Borrowed(plain) => Cow::Owned(format!("`{plain}`")),
        escaped => escaped,
    }
}

/// `12 ms`, `4.2 ms`, `1.4 s`, `2 min 05 s`.
pub fn duration(us: u64) -> String {
    match us {
        0..10_000 => format!("{:.1} ms", us as f64 / 1000.0),
        10_000..1_000_000 => format!("{} ms", us / 1000),
        1_000_000..60_000_000 => format!("{:.1} s", us as f64 / 1e6),
        _ => {
            let s = us / 1_000_000;
            format!("{} min {:02} s", s / 60, s % 60)
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS` in the machine's local time zone (`TZ`, else `/etc/localtime`).
#[cfg(target_os = "linux")]
pub fn local_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000) as libc::time_t;
    let mut tm = std::mem::MaybeUninit::<libc::tm>::uninit();
    // SAFETY: both pointers are valid for the call; localtime_r is the thread-safe form and
    // fills `tm` whenever it returns non-null.
    #[allow(unsafe_code)]
    let tm = unsafe {
        if libc::localtime_r(&secs, tm.as_mut_ptr()).is_null() {
            return utc_time(ms);
        }
        tm.assume_init()
    };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// `YYYY-MM-DD HH:MM:SS` in UTC where the local time zone is not read (not Linux).
#[cfg(not(target_os = "linux"))]
pub fn local_time(ms: i64) -> String {
    utc_time(ms)
}

/// `YYYY-MM-DD HH:MM:SS` in UTC (days to a civil date: Howard Hinnant's `civil_from_days`).
fn utc_time(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Whether nobody reads stdout any more (the reading end of a pipe closed, a terminal hung
/// up): `--follow` then ends quietly even while nothing new is written.
#[cfg(target_os = "linux")]
fn stdout_closed() -> bool {
    let mut fd = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call; a zero timeout never blocks.
    #[allow(unsafe_code)]
    let n = unsafe { libc::poll(&mut fd, 1, 0) };
    n > 0 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}

/// Elsewhere a closed stdout is noticed at the next write (a broken pipe).
#[cfg(not(target_os = "linux"))]
fn stdout_closed() -> bool {
    false
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
