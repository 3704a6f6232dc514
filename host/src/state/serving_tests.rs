use super::*;
use crate::state::StateDb;
use std::sync::atomic::AtomicUsize;

fn db_in(dir: &Path) -> PathBuf {
    let state = dir.join(".toolgate");
    std::fs::create_dir_all(&state).unwrap();
    state.join("state.db")
}

/// The first server is alone; the next one waits until the first has made room, and both
/// then have company. (Locks taken through separate opens conflict within one process as
/// between two: flock(2) locks belong to the open file.)
#[test]
fn a_newcomer_comes_in_only_after_the_server_alone_made_room() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    let mut first = Servers::join(&db, Duration::from_secs(5)).unwrap();
    let company = first.company();
    assert_eq!(company, Company::Alone);
    let made = Arc::new(AtomicUsize::new(0));
    let seen = made.clone();
    first.on_knock(&db, move || {
        // Slow on purpose: the newcomer must not get in before this ends.
        std::thread::sleep(Duration::from_millis(150));
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let began = Instant::now();
    let mut second = Servers::join(&db, Duration::from_secs(5)).unwrap();
    let company = second.company();
    assert_eq!(company, Company::Others);
    // One with company has nobody to make room for: it keeps its shared lock, no watcher.
    second.on_knock(&db, || panic!("a server with company made room"));
    assert!(second.watcher.is_none() && second.serving.is_some());
    assert_eq!(
        made.load(Ordering::SeqCst),
        1,
        "let in before the room was made"
    );
    assert!(began.elapsed() >= Duration::from_millis(150));
    // A third comes straight in beside the two, and the room is not made twice.
    let third = Servers::join(&db, Duration::from_secs(5)).unwrap();
    let company = third.company();
    assert_eq!(company, Company::Others);
    drop(second);
    drop(first);
    assert_eq!(made.load(Ordering::SeqCst), 1);
}

/// A server that ended gives its place up: the next one is alone again.
#[test]
fn a_server_that_ended_leaves_the_next_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    let mut first = Servers::join(&db, Duration::from_secs(5)).unwrap();
    first.on_knock(&db, || {});
    drop(first);
    let next = Servers::join(&db, Duration::from_secs(5)).unwrap();
    let company = next.company();
    assert_eq!(company, Company::Alone);
}

/// A server alone that never makes room (here: one that never watches the door) keeps a
/// newcomer out, and the newcomer says so by name after its patience, instead of serving
/// beside a server that keeps reads to itself.
#[test]
fn a_newcomer_never_comes_in_beside_a_server_that_made_no_room() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_in(dir.path());
    let first = Servers::join(&db, Duration::from_secs(5)).unwrap();
    let company = first.company();
    assert_eq!(company, Company::Alone);
    let Err(err) = Servers::join(&db, Duration::from_millis(300)) else {
        panic!("came in beside a server alone");
    };
    let text = err.to_string();
    assert!(text.contains("state.db-serving"), "{text}");
    assert!(text.contains("stop it"), "{text}");
}

/// Planted lock files (a symlink to a file elsewhere, a FIFO, a hard link) are never opened
/// through: the server counts as having company, and the planted targets stay as they were.
#[test]
fn planted_lock_files_are_refused_and_mean_company() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("victim");
    std::fs::write(&target, b"keep me").unwrap();
    let mode = std::fs::metadata(&target).unwrap().mode() & 0o777;
    type Plant<'a> = &'a dyn Fn(&Path);
    let cases: [(&str, Plant); 3] = [
        ("symlink", &|p| {
            std::os::unix::fs::symlink(&target, p).unwrap()
        }),
        ("hard link", &|p| std::fs::hard_link(&target, p).unwrap()),
        ("fifo", &|p| {
            let status = std::process::Command::new("mkfifo")
                .arg(p)
                .status()
                .unwrap();
            assert!(status.success());
        }),
    ];
    for (what, plant) in cases {
        for suffix in ["-door", "-serving"] {
            let ws = dir.path().join(format!("{what}{suffix}"));
            let db = db_in(&ws);
            plant(&lock_path(&db, suffix));
            let s = Servers::join(&db, Duration::from_secs(2)).unwrap();
            let company = s.company();
            assert_eq!(company, Company::Others, "{what} at {suffix}");
        }
        // A planted knock: the server alone cannot be told of a newcomer, so it makes room
        // at once (it commits everything and every call's reads from then on).
        let ws = dir.path().join(format!("{what}-knock"));
        let db = db_in(&ws);
        plant(&lock_path(&db, "-knock"));
        let mut alone = Servers::join(&db, Duration::from_secs(2)).unwrap();
        let company = alone.company();
        assert_eq!(company, Company::Alone, "{what} at -knock");
        let made = Arc::new(AtomicBool::new(false));
        let seen = made.clone();
        alone.on_knock(&db, move || seen.store(true, Ordering::SeqCst));
        assert!(
            made.load(Ordering::SeqCst),
            "{what} at -knock: no room made"
        );
        assert_eq!(alone.company(), Company::Others, "{what} at -knock");
        let next = Servers::join(&db, Duration::from_secs(2)).unwrap();
        let company = next.company();
        assert_eq!(company, Company::Others, "{what} at -knock");
    }
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, mode);
}

/// The room a server makes: every read record it had kept for its writer is in the database
/// when it lets the newcomer in, and each later call's reads are committed before it answers.
#[test]
fn making_room_commits_every_read_kept_back() {
    let dir = tempfile::tempdir().unwrap();
    let db_path = db_in(dir.path());
    let file = dir.path().join("a.txt");
    std::fs::write(&file, b"hello").unwrap();
    let stamp = crate::state::FileStamp::stamp(&file, 1 << 20).unwrap();
    let db = StateDb::open(&db_path).unwrap();
    // Alone: reads stay with this process (not sent, not committed).
    db.record_read("conv-a", &file, &stamp).unwrap();
    db.record_read("conv-b", &file, &stamp).unwrap();
    db.reads_shared("conv-a");
    let other = StateDb::open(&db_path).unwrap();
    assert!(other.last_read("conv-a", &file).unwrap().is_none());
    db.share_reads_now();
    for conv in ["conv-a", "conv-b"] {
        assert_eq!(
            other.last_read(conv, &file).unwrap(),
            Some(stamp.clone()),
            "{conv}"
        );
    }
    // From now on a call's reads are committed when it answers.
    db.record_read("conv-c", &file, &stamp).unwrap();
    db.reads_shared("conv-c");
    assert_eq!(other.last_read("conv-c", &file).unwrap(), Some(stamp));
}
