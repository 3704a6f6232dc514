use super::*;

fn fresh() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    (dir, p)
}

#[test]
fn nothing_the_file_holds_runs_on_a_connection() {
    let (_dir, p) = fresh();
    Connection::open(&p)
        .unwrap()
        .execute_batch(
            "CREATE TABLE t (x); CREATE TABLE log (x);
             CREATE TRIGGER tr AFTER INSERT ON t BEGIN INSERT INTO log VALUES (1); END;
             CREATE VIEW v AS SELECT * FROM t;",
        )
        .unwrap();
    let c = connect(&p).unwrap();
    for (setting, want) in [
        (DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false),
        (DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false),
    ] {
        assert_eq!(c.db_config(setting).unwrap(), want);
    }
    let trusted: i64 = c
        .query_row("PRAGMA trusted_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(trusted, 0);
    c.execute("INSERT INTO t VALUES (1)", []).unwrap();
    let fired: i64 = c
        .query_row("SELECT COUNT(*) FROM log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fired, 0, "a trigger in the file ran");
    assert!(c
        .query_row("SELECT COUNT(*) FROM v", [], |r| r.get::<_, i64>(0))
        .is_err());
    let mut foreign = foreign_objects(&c).unwrap();
    foreign.sort();
    assert_eq!(
        foreign,
        [
            "table `log`",
            "table `t`",
            "trigger `tr` on `t`",
            "view `v`"
        ]
    );
}

#[test]
fn toolgates_own_schema_in_each_version_is_not_foreign() {
    let (_dir, p) = fresh();
    let c = connect(&p).unwrap();
    c.execute_batch(super::super::SCHEMA).unwrap();
    assert!(foreign_objects(&c).unwrap().is_empty(), "before `sig`");
    super::super::configure(&c).unwrap();
    assert!(foreign_objects(&c).unwrap().is_empty());
    c.execute_batch("CREATE INDEX audit_tool ON audit (tool)")
        .unwrap();
    assert_eq!(
        foreign_objects(&c).unwrap(),
        ["index `audit_tool` on `audit`"]
    );
}

#[test]
fn a_marker_verifies_with_its_key_and_workspace_only() {
    let (_dir, p) = fresh();
    let keys = tempfile::tempdir().unwrap();
    let mine = Keyring::new(&keys.path().join("mine"));
    let theirs = Keyring::new(&keys.path().join("theirs"));
    theirs.sign(&["make a key"]).unwrap();
    let c = connect(&p).unwrap();
    super::super::configure(&c).unwrap();
    assert_eq!(
        read_marker(&c, &mine, "/ws").unwrap(),
        Marker::Absent { empty: true }
    );
    let created = write_marker(&c, &mine, "/ws").unwrap().unwrap();
    assert_eq!(write_marker(&c, &mine, "/ws").unwrap(), None, "one marker");
    assert_eq!(
        read_marker(&c, &mine, "/ws").unwrap(),
        Marker::Valid {
            created_ms: created
        }
    );
    assert_eq!(read_marker(&c, &mine, "/other").unwrap(), Marker::Invalid);
    assert_eq!(read_marker(&c, &theirs, "/ws").unwrap(), Marker::Invalid);
    c.execute("UPDATE toolgate_db SET created_ms = 1", [])
        .unwrap();
    assert_eq!(read_marker(&c, &mine, "/ws").unwrap(), Marker::Invalid);
    c.execute("DELETE FROM toolgate_db", []).unwrap();
    c.execute("INSERT INTO sessions VALUES ('s', 0)", [])
        .unwrap();
    assert_eq!(
        read_marker(&c, &mine, "/ws").unwrap(),
        Marker::Absent { empty: false }
    );
}

#[test]
fn quarantine_moves_the_files_aside_and_never_over_another() {
    let (dir, p) = fresh();
    std::fs::write(&p, "db").unwrap();
    std::fs::write(dir.path().join("state.db-wal"), "wal").unwrap();
    let first = quarantine(&p).unwrap();
    assert!(!p.exists());
    assert_eq!(std::fs::read_to_string(&first).unwrap(), "db");
    let mut wal = first.as_os_str().to_owned();
    wal.push("-wal");
    assert_eq!(std::fs::read_to_string(PathBuf::from(wal)).unwrap(), "wal");
    std::fs::write(&p, "second").unwrap();
    let second = quarantine(&p).unwrap();
    assert_ne!(first, second);
    assert_eq!(std::fs::read_to_string(&first).unwrap(), "db");
    assert_eq!(std::fs::read_to_string(&second).unwrap(), "second");
}

#[test]
fn an_approval_nonce_carries_its_issue_time() {
    let before = u64::try_from(super::super::now_ms()).unwrap();
    let n = state_nonce("st-abc");
    let issued = issued_of(&n).unwrap();
    assert!(issued >= before && issued <= before + 60_000);
    assert_eq!(issued_of("st-abc"), None);
}
