//! The state database is the host's own: how every connection to it is opened, how a
//! database toolgate did not make is recognised, and how it is put aside.
//!
//! Threat model: `.toolgate/state.db` lives in the workspace, so a repository can ship one (or
//! a branch switch can replace it). SQLite keeps triggers, views and other schema objects in
//! the file itself, and runs them on the statements of whoever opens it; rows in it are what
//! the audit, the history (and so `toolgate undo`) and the single-use record of approval
//! states show. So:
//! - every connection is opened by [`connect`]: no symlink followed, defensive mode, triggers
//!   and views off, `trusted_schema` off (nothing in the file runs, whatever it holds);
//! - a database holding a schema object toolgate does not make (any trigger, view, virtual
//!   table, index or table, or a table of ours defined otherwise), or that is not a database
//!   at all, is quarantined when it is opened ([`foreign_objects`], [`quarantine`]);
//! - once the host knows the user's signing key (`StateDb::authenticate`, which the gate
//!   calls as it opens), a database must carry a marker signed with that key over a random
//!   database id, its creation time and the workspace; one without (a repository's, another
//!   user's, one copied from another workspace, or one from a toolgate before markers) is
//!   quarantined too, unless it is still empty;
//! - quarantine renames the files aside (`state.db.quarantined-<unix-time>`, with their
//!   `-wal`/`-shm`), never deletes, creates a fresh database and tells the user on stderr and
//!   in the fresh database's audit.

use super::keyring::Keyring;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The table holding the database's signed marker (one row).
pub(crate) const MARKER_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS toolgate_db (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    db_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    sig TEXT NOT NULL
);
";

/// What the marker's signature covers first.
const SIGNED_AS: &str = "toolgate-state-db-v1";

/// The tables that hold what the host recorded (a database with a row in one is not empty).
const DATA_TABLES: [&str; 6] = [
    "sessions",
    "reads",
    "session_grants",
    "file_versions",
    "audit",
    "used_states",
];

/// Open a connection to the state database at `path`: every connection the host makes to it
/// is opened here.
pub(crate) fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(path, super::open_flags())?;
    harden(&conn)?;
    Ok(conn)
}

/// Nothing the database file holds runs: defensive mode, no triggers, no views, no schema
/// functions with side effects, no writable schema. Each setting is read back.
pub(crate) fn harden(conn: &Connection) -> rusqlite::Result<()> {
    let settings = [
        (DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true, "defensive"),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false, "triggers"),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false, "views"),
        (
            DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA,
            false,
            "trusted_schema",
        ),
        (
            DbConfig::SQLITE_DBCONFIG_WRITABLE_SCHEMA,
            false,
            "writable_schema",
        ),
    ];
    for (setting, want, name) in settings {
        if conn.set_db_config(setting, want)? != want {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISUSE),
                Some(format!(
                    "SQLite did not accept {name} = {want} for the state database"
                )),
            ));
        }
    }
    conn.pragma_update(None, "trusted_schema", false)?;
    conn.pragma_update(None, "cell_size_check", true)?;
    Ok(())
}

/// Close a connection to a database about to be quarantined without checkpointing it or
/// removing its WAL (SQLite does that by name, and the name may be another database's by
/// then): the WAL goes aside with it.
pub(crate) fn close_untouched(conn: Connection) {
    let _ = conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true);
    if let Err((c, _)) = conn.close() {
        drop(c);
    }
}

/// A schema object: type, name, table, SQL.
type Object = (String, String, String, Option<String>);

fn objects(conn: &Connection) -> rusqlite::Result<Vec<Object>> {
    let mut stmt = conn.prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    rows.collect()
}

/// Every schema object toolgate makes, as each version of it reads (the session grants table
/// before and after its `sig` column).
fn expected() -> &'static HashSet<Object> {
    static EXPECTED: OnceLock<HashSet<Object>> = OnceLock::new();
    EXPECTED.get_or_init(|| {
        let mut set = HashSet::new();
        let mut steps = || -> rusqlite::Result<()> {
            let mem = Connection::open_in_memory()?;
            mem.execute_batch(super::SCHEMA)?;
            set.extend(objects(&mem)?);
            super::session_grants::migrate(&mem)?;
            set.extend(objects(&mem)?);
            mem.execute_batch(MARKER_SCHEMA)?;
            set.extend(objects(&mem)?);
            Ok(())
        };
        if let Err(e) = steps() {
            // Nothing is expected, so every database is quarantined: loud, never silent.
            tracing::error!(error = %e, "building the state database's expected schema failed");
        }
        set
    })
}

/// The schema objects in the database that toolgate does not make, described (empty: none).
pub(crate) fn foreign_objects(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let expected = expected();
    Ok(objects(conn)?
        .into_iter()
        .filter(|o| !expected.contains(o))
        .map(|(kind, name, table, _)| {
            let name = crate::text::escape_name(&name).into_owned();
            if kind == "table" || name == table {
                format!("{kind} `{name}`")
            } else {
                format!("{kind} `{name}` on `{}`", crate::text::escape_name(&table))
            }
        })
        .collect())
}

/// Whether `e` says the file is not a (sound) SQLite database, rather than that it could not
/// be read now.
pub(crate) fn is_not_a_database(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

/// The database's marker, as checked with the user's key.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Marker {
    /// Signed with this user's key for this workspace: created then (ms since the epoch).
    Valid { created_ms: u64 },
    /// No marker; `empty` when no table holds a row.
    Absent { empty: bool },
    /// A marker this user's key did not sign for this workspace.
    Invalid,
}

/// Read and check the marker.
pub(crate) fn read_marker(
    conn: &Connection,
    keyring: &Keyring,
    workspace: &str,
) -> rusqlite::Result<Marker> {
    let row = conn
        .query_row(
            "SELECT db_id, created_ms, sig FROM toolgate_db WHERE one = 1",
            [],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        )
        .optional()?;
    let Some((db_id, created_ms, sig)) = row else {
        let mut empty = true;
        for table in DATA_TABLES {
            let any: bool =
                conn.query_row(&format!("SELECT EXISTS (SELECT 1 FROM {table})"), [], |r| {
                    r.get(0)
                })?;
            empty &= !any;
        }
        return Ok(Marker::Absent { empty });
    };
    let created = created_ms.to_string();
    match u64::try_from(created_ms) {
        Ok(created_ms) if keyring.verify(&[SIGNED_AS, &db_id, &created, workspace], &sig) => {
            Ok(Marker::Valid { created_ms })
        }
        _ => Ok(Marker::Invalid),
    }
}

/// Sign and write the marker of an unmarked database: its creation time (ms; `None` when another
/// process marked it first; read it again).
pub(crate) fn write_marker(
    conn: &Connection,
    keyring: &Keyring,
    workspace: &str,
) -> Result<Option<u64>, String> {
    let created_ms = u64::try_from(super::now_ms()).unwrap_or(0);
    let mut id = [0u8; 16];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").map_err(|e| e.to_string())?,
        &mut id,
    )
    .map_err(|e| format!("cannot read random bytes for the database id: {e}"))?;
    let db_id = hex::encode(id);
    let created = created_ms.to_string();
    let sig = keyring.sign(&[SIGNED_AS, &db_id, &created, workspace])?;
    let added = conn
        .execute(
            "INSERT OR IGNORE INTO toolgate_db (one, db_id, created_ms, sig) VALUES (1, ?1, ?2, ?3)",
            rusqlite::params![db_id, i64::try_from(created_ms).unwrap_or(i64::MAX), sig],
        )
        .map_err(|e| e.to_string())?;
    Ok((added == 1).then_some(created_ms))
}

/// A database put aside, and why.
#[derive(Clone, Debug)]
pub(crate) struct Quarantined {
    /// Where it is now.
    pub file: PathBuf,
    /// Why it was not used.
    pub reason: String,
}

/// Move the database at `path` (and its `-wal`/`-shm`) aside to
/// `<name>.quarantined-<unix-time>[-n]`, never over another file: the new name.
pub(crate) fn quarantine(path: &Path) -> std::io::Result<PathBuf> {
    let secs = now_s();
    let with = |p: &Path, suffix: &str| {
        let mut s = p.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    let mut n = 0u32;
    let aside = loop {
        let suffix = match n {
            0 => format!(".quarantined-{secs}"),
            n => format!(".quarantined-{secs}-{n}"),
        };
        let aside = with(path, &suffix);
        // A hard link never replaces an existing file: two processes never pick one name.
        match std::fs::hard_link(path, &aside) {
            Ok(()) => break aside,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(e),
        }
    };
    // SQLite finds a database's WAL and shared memory by its name: they go with it.
    for companion in ["-wal", "-shm"] {
        let from = with(path, companion);
        if std::fs::symlink_metadata(&from).is_ok() {
            std::fs::rename(&from, with(&aside, companion))?;
        }
    }
    std::fs::remove_file(path)?;
    Ok(aside)
}

/// Tell the user, loudly, that a database was put aside.
pub(crate) fn warn(path: &Path, q: &Quarantined) {
    eprintln!(
        "toolgate: WARNING: the state database {} was not made by your toolgate: {}.\n  It was moved aside to {} (nothing was deleted) and is not used; a fresh state database was created, so earlier audit, history and approvals are not in it.\n  If you expected it to be yours, look at it with `sqlite3 {}`; a repository should never ship .toolgate/state.db.",
        crate::text::escape_name(&path.to_string_lossy()),
        q.reason,
        crate::text::escape_name(&q.file.to_string_lossy()),
        crate::text::escape_name(&q.file.to_string_lossy()),
    );
    tracing::warn!(path = %path.display(), aside = %q.file.display(), reason = %q.reason, "state database quarantined");
}

/// The nonce of an approval state issued now: `<issued ms since the epoch>.<random>`. The issue time
/// travels inside the sealed state, so the database can refuse a state issued before it was
/// created (the record of its use may have been in a database since replaced).
pub fn state_nonce(random: &str) -> String {
    format!("{}.{random}", super::now_ms())
}

/// When the approval state with `nonce` was issued (ms since the epoch), if it says.
pub(crate) fn issued_of(nonce: &str) -> Option<u64> {
    nonce.split_once('.')?.0.parse().ok()
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "open_tests.rs"]
mod tests;
