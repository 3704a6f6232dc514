//! Unit tests of `sandbox::read_ahead`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::file::{contains, read_plain, Fetched, Skip, Sort};
use super::pool::{Got, Job, Work, Worker};
use super::*;
use crate::cancel::CancelToken;
use crate::sandbox::walk::{WalkOptions, Walker};
use crate::workspace::LinkSnapshot;
use rustix::fd::AsFd as _;
use std::sync::Mutex;

#[test]
fn reads_regular_files_and_leaves_everything_else_to_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "hello\n").unwrap();
    std::fs::write(root.join("empty"), "").unwrap();
    std::fs::write(root.join("big"), vec![b'x'; 3000]).unwrap();
    std::os::unix::fs::symlink(root.join("a.txt"), root.join("link")).unwrap();
    let status = std::process::Command::new("mkfifo")
        .arg(root.join("fifo"))
        .status()
        .unwrap();
    assert!(status.success());
    let dir = rustix::fs::openat(
        rustix::fs::CWD,
        &root,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let listed = |p: &std::path::Path| {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::symlink_metadata(p).map_or((0, 0), |m| (m.dev(), m.ino()))
    };
    let read_plain = |p: &std::path::Path, max, room| {
        let name = p.file_name().unwrap().to_str().unwrap();
        let mut buf = Vec::new();
        let got = read_plain(
            dir.as_fd(),
            name,
            listed(p),
            max,
            room,
            &mut |_, _, _| panic!("asked about a file with one link"),
            &mut buf,
        )
        .unwrap();
        (got, buf)
    };
    let whole = |(got, buf): (Fetched, Vec<u8>)| (got == Fetched::Whole).then_some(buf);
    assert_eq!(
        whole(read_plain(&root.join("a.txt"), 100, u64::MAX)).unwrap(),
        b"hello\n"
    );
    assert_eq!(
        whole(read_plain(&root.join("empty"), 100, u64::MAX)).unwrap(),
        b""
    );
    assert_eq!(
        read_plain(&root.join("big"), 100, u64::MAX).0,
        Fetched::TooLarge(3000)
    );
    assert_eq!(
        whole(read_plain(&root.join("big"), 3000, u64::MAX))
            .unwrap()
            .len(),
        3000
    );
    // More than the chunk has room for: left to the tool.
    assert_eq!(
        read_plain(&root.join("big"), 3000, 2999).0,
        Fetched::NotRead
    );
    // A symlink (even to a file inside) and a FIFO are not read, and the FIFO does not
    // block the thread.
    for name in ["link", "fifo", "missing"] {
        assert_eq!(
            read_plain(&root.join(name), 100, u64::MAX).0,
            Fetched::NotRead,
            "{name}"
        );
    }
    // A file with several links is asked about once, and skipped when it is a secret's.
    std::fs::hard_link(root.join("a.txt"), root.join("b.txt")).unwrap();
    let mut asked = 0;
    let b = listed(&root.join("b.txt"));
    let mut buf = Vec::new();
    let got = super::file::read_plain(
        dir.as_fd(),
        "b.txt",
        b,
        100,
        u64::MAX,
        &mut |_, _, nlink| {
            asked += 1;
            nlink == 2
        },
        &mut buf,
    );
    assert_eq!(got.unwrap_err(), Skip::Secret);
    assert_eq!(asked, 1);
    // A name that is another file than the listing named is skipped, not read.
    std::fs::write(root.join("secret.txt"), "SECRET").unwrap();
    let plain = listed(&root.join("a.txt"));
    std::fs::rename(root.join("secret.txt"), root.join("a.txt")).unwrap();
    let got = super::file::read_plain(
        dir.as_fd(),
        "a.txt",
        plain,
        100,
        u64::MAX,
        &mut |_, _, _| false,
        &mut buf,
    );
    assert_eq!(got.unwrap_err(), Skip::Swapped);
}

#[test]
fn needles_are_found_anywhere() {
    assert!(contains(b"abc", b""));
    assert!(contains(b"xxabcxx", b"abc"));
    assert!(contains(b"abc", b"abc"));
    assert!(!contains(b"ab", b"abc"));
    assert!(!contains(b"xxabxcxx", b"abc"));
    assert!(contains("héllo".as_bytes(), "él".as_bytes()));
}

fn scope(root: &std::path::Path) -> super::super::walk::WalkScope {
    use super::super::walk::WalkScope;
    use super::super::wasi::Preopen;
    WalkScope {
        preopens: vec![Preopen {
            host: root.to_path_buf(),
            guest: "/workspace".into(),
            writable: false,
        }],
        deny: None,
        ..WalkScope::default()
    }
}

/// A reader as `open` makes it, with `workers` reading threads, over `/workspace`.
fn reader(root: &std::path::Path, workers: usize, sort: Sort) -> Reader {
    let stop = Arc::new(AtomicBool::new(false));
    let (permits, permit_rx) = mpsc::sync_channel(OUTSTANDING);
    for _ in 0..OUTSTANDING {
        permits.try_send(()).unwrap();
    }
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let (chunk_tx, chunk_rx) = mpsc::channel::<Chunk>();
    let jobs = Arc::new(Mutex::new(job_rx));
    for _ in 0..workers {
        let worker = Worker {
            deny: None,
            links: LinkSnapshot::default(),
            max_file: 1 << 20,
            sort: sort.clone(),
            stop: stop.clone(),
            cancel: CancelToken::never(),
            jobs: jobs.clone(),
            chunks: chunk_tx.clone(),
            buf: Vec::new(),
        };
        std::thread::spawn(move || worker.run());
    }
    let work = Work {
        walker: Walker::new(scope(root), "/workspace", WalkOptions::default()).unwrap(),
        include: None,
        stop: stop.clone(),
        cancel: CancelToken::never(),
        permits: permit_rx,
        jobs: job_tx,
    };
    std::thread::spawn(move || work.run());
    Reader {
        chunks: chunk_rx,
        early: BTreeMap::new(),
        next_seq: 0,
        permits,
        stop,
        done: false,
    }
}

fn everything(mut reader: Reader) -> (Vec<String>, u32) {
    let mut out = Vec::new();
    let mut errors = 0;
    loop {
        let (files, e, done) = reader.take();
        errors += e;
        out.extend(files.into_iter().map(|f| {
            let what = match f.got {
                Got::Bytes(b) => format!("bytes:{}", b.len()),
                Got::TooLarge(n) => format!("too-large:{n}"),
                Got::NotRead => "not-read".into(),
                Got::Binary => "binary".into(),
                Got::NoNeedle => "no-needle".into(),
            };
            format!("{}={what}", f.path)
        }));
        if done {
            return (out, errors);
        }
    }
}

/// Several threads give the same files in the same order as one, and sort out binary
/// files and files without a needle.
#[test]
fn any_number_of_threads_gives_the_walk_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for i in 0..2500 {
        let sub = root.join(format!("d{}/e{}", i % 7, i % 3));
        std::fs::create_dir_all(&sub).unwrap();
        let body = match i % 5 {
            0 => format!("has NEEDLE {i}\n").into_bytes(),
            1 => b"bin\0ary NEEDLE".to_vec(),
            _ => format!("plain {i}\n").into_bytes(),
        };
        std::fs::write(sub.join(format!("f{i}")), body).unwrap();
    }
    let sort = Sort {
        binary_prefix: 8192,
        needles: vec![b"NEEDLE".to_vec()],
    };
    let (one, e1) = everything(reader(&root, 1, sort.clone()));
    assert_eq!(one.len(), 2500);
    assert_eq!(e1, 0);
    assert_eq!(one.iter().filter(|f| f.ends_with("=binary")).count(), 500);
    assert_eq!(
        one.iter().filter(|f| f.ends_with("=no-needle")).count(),
        1500
    );
    let mut sorted = one.clone();
    sorted.sort();
    assert_ne!(
        sorted, one,
        "walk order is by path component, not plain sort"
    );
    for _ in 0..5 {
        let (four, e4) = everything(reader(&root, 4, sort.clone()));
        assert_eq!(four, one);
        assert_eq!(e4, e1);
    }
    let (plain, _) = everything(reader(&root, 2, Sort::default()));
    assert_eq!(plain.len(), 2500);
    assert!(plain.iter().all(|f| f.contains("=bytes:")));
}

/// The threads end soon after the reader is dropped, whatever is left to read.
#[test]
fn dropping_the_reader_stops_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for i in 0..3000 {
        let sub = root.join(format!("d{}", i % 10));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{i}")), "x").unwrap();
    }
    let mut r = reader(&root, 2, Sort::default());
    let (files, _, done) = loop {
        let got = r.take();
        if !got.0.is_empty() {
            break got;
        }
    };
    assert!(!files.is_empty() && files.len() <= FIRST_CHUNK_FILES);
    assert!(!done);
    // Every thread holds a clone of the stop flag until it ends.
    let stop = r.stop.clone();
    drop(r);
    assert!(stop.load(Ordering::Relaxed));
    let t = Instant::now();
    while Arc::strong_count(&stop) > 1 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the read-ahead threads must stop once their reader is gone"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
