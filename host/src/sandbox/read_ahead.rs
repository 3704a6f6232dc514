//! The read-ahead (`toolgate:search/read-ahead@0.1.0`): `grep` asks the host to walk a
//! directory and read its files on a host thread, so that reading the next files (the system
//! calls and the copy out of the page cache) overlaps with the tool searching the current ones
//! in the guest. The call stays one guest instance with one output; the host adds a second
//! thread of plain I/O.
//!
//! The host decides what is read, the same way it decides what the walk lists
//! ([`super::walk`]): only below the call's own preopens, with the deny-list applied to real
//! paths, ignore files and default ignores honoured, nothing followed through a symlink. A file
//! is opened with `openat(O_NOFOLLOW)` on the descriptor of the directory the walk listed it in
//! (never by path), without blocking, and read only when what was opened is the regular file
//! the listing named (its inode); a name that now is another file (exchanged or renamed over by
//! a racing process) is skipped and counted as an error, and anything else (a symlink, a FIFO,
//! an open error) is handed back as `not-read`, and the tool opens it through
//! `wasi:filesystem`, where the filesystem guard decides as for any open.
//!
//! Bounded: one reader per call at a time, at most [`QUEUED`] batches of at most
//! [`BATCH_BYTES`] waiting, files over [`MAX_READ_AHEAD_FILE`] left to the tool; `next` waits
//! at most [`WAIT`] so the call's deadline and cancellation still apply; dropping the reader
//! (or the store, when the call ends in any way) stops the thread at its next file.

use super::fsguard::FsDeny;
use super::walk::{WalkOptions, Walker};
use crate::gate::scope::LinkSnapshot;
use rustix::fd::{AsFd as _, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::Resource;

/// The WIT bindings of `toolgate:search@0.1.0`.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/search/since_v0.1.0",
        world: "read-ahead-host",
        with: {
            "toolgate:search/read-ahead.reader": super::Reader,
        },
    });
}

use bindings::toolgate::search::read_ahead as ra;

/// The interfaces of the search package (any version).
pub const SEARCH_INTERFACE_PREFIX: &str = "toolgate:search/";

/// Most content bytes in one batch (a single larger file makes a batch of its own).
const BATCH_BYTES: usize = 4 << 20;
/// Most files in one batch.
const BATCH_FILES: usize = 1024;
/// Files in the first batch: small, so the tool starts searching early; each batch after it
/// may hold twice as many, up to [`BATCH_FILES`].
const FIRST_BATCH_FILES: usize = 16;
/// A batch is sent once it has been filling this long, full or not (a slow disk).
const BATCH_TIME: Duration = Duration::from_millis(50);
/// Batches read ahead and not yet taken by the tool.
const QUEUED: usize = 2;
/// Larger files are left to the tool (`not-read`): the read-ahead holds whole files.
const MAX_READ_AHEAD_FILE: u64 = 16 << 20;
/// Longest wait inside `next`: the guest's epoch deadline cannot interrupt a host call.
const WAIT: Duration = Duration::from_millis(100);

/// A walk being read ahead (the `reader` resource).
pub struct Reader {
    batches: mpsc::Receiver<ra::Batch>,
    stop: Arc<AtomicBool>,
    done: bool,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The `include` filter, as grep applies it: a glob on the file name, or on the path below the
/// start when it contains `/`.
struct Include {
    glob: globset::GlobMatcher,
    on_path: bool,
}

impl Include {
    fn new(glob: &str) -> Result<Self, String> {
        let on_path = glob.contains('/');
        let glob = glob.trim_start_matches("./");
        let matcher = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("`include` glob `{glob}` is invalid: {e}"))?
            .compile_matcher();
        Ok(Include {
            glob: matcher,
            on_path,
        })
    }

    fn matches(&self, sub: &str) -> bool {
        if self.on_path {
            self.glob.is_match(sub)
        } else {
            let name = sub.rsplit('/').next().unwrap_or(sub);
            self.glob.is_match(name)
        }
    }
}

impl ra::Host for super::CallState {
    fn open(&mut self, start: String, options: ra::Options) -> Result<Resource<Reader>, String> {
        if self.read_ahead_open {
            return Err(format!(
                "cannot read `{start}` ahead: another reader of this call is still open (drop it first)"
            ));
        }
        let include = options
            .include_glob
            .as_deref()
            .map(Include::new)
            .transpose()?;
        // The start is resolved and its first directory listed here, so a refused start is an
        // error of this call and not of the thread.
        let cancel = super::current_cancel_flag();
        let walker = Walker::new_cancellable(
            self.walk.clone(),
            &start,
            WalkOptions::default(),
            cancel.as_deref(),
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::sync_channel(QUEUED);
        let work = Work {
            deny: self.walk.deny.clone(),
            links: LinkSnapshot::default(),
            swapped: 0,
            walker,
            include,
            max_file: options.max_file_bytes,
            stop: stop.clone(),
            cancel,
            batches: tx,
        };
        std::thread::Builder::new()
            .name("toolgate-read-ahead".into())
            .spawn(move || work.run())
            .map_err(|e| format!("cannot read `{start}` ahead: no thread: {e}"))?;
        let reader = self
            .table
            .push(Reader {
                batches: rx,
                stop,
                done: false,
            })
            .map_err(|e| format!("cannot read `{start}` ahead: {e}"))?;
        self.read_ahead_open = true;
        Ok(reader)
    }
}

impl ra::HostReader for super::CallState {
    fn next(&mut self, reader: Resource<Reader>) -> ra::Batch {
        let empty = |done| ra::Batch {
            files: Vec::new(),
            errors: 0,
            done,
        };
        let Ok(reader) = self.table.get_mut(&reader) else {
            return empty(true);
        };
        if reader.done {
            return empty(true);
        }
        match reader.batches.recv_timeout(WAIT) {
            Ok(batch) => {
                reader.done = batch.done;
                batch
            }
            Err(mpsc::RecvTimeoutError::Timeout) => empty(false),
            // The thread ended without its last batch: it was stopped (the call is being
            // cancelled) or could not go on.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                reader.done = true;
                ra::Batch {
                    files: Vec::new(),
                    errors: 1,
                    done: true,
                }
            }
        }
    }

    fn drop(&mut self, reader: Resource<Reader>) -> wasmtime::Result<()> {
        self.table.delete(reader)?;
        self.read_ahead_open = false;
        Ok(())
    }
}

/// The thread's side.
struct Work {
    walker: Walker,
    /// The deny-list, for the second names of secrets (hard links).
    deny: Option<Arc<FsDeny>>,
    /// The secrets' inodes for this reader, looked up on the first file with several links.
    links: LinkSnapshot,
    /// Files that were no longer what the listing named when opened (counted as errors).
    swapped: u32,
    include: Option<Include>,
    max_file: u64,
    stop: Arc<AtomicBool>,
    cancel: Option<Arc<AtomicBool>>,
    batches: mpsc::SyncSender<ra::Batch>,
}

impl Work {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self
                .cancel
                .as_deref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    fn run(mut self) {
        let mut files = Vec::new();
        let mut bytes = 0usize;
        let mut limit = FIRST_BATCH_FILES;
        let mut reported = 0u32;
        let mut began = Instant::now();
        loop {
            if self.stopped() {
                return;
            }
            let found = match self.walker.next(Some(&self.stop)) {
                Ok(found) => found,
                Err(_) => return,
            };
            let Some(found) = found else { break };
            if found.is_dir
                || self
                    .include
                    .as_ref()
                    .is_some_and(|i| !i.matches(&found.sub))
            {
                continue;
            }
            let (deny, links) = (&self.deny, &mut self.links);
            let mut linked = |dev, ino, nlink| {
                deny.as_ref()
                    .is_some_and(|d| d.linked_secret(links, dev, ino, nlink))
            };
            // A hard link to a secret is skipped like the secret itself; a name swapped since
            // the listing is skipped and counted.
            let contents = match read_plain(
                found.dir.as_fd(),
                &found.name,
                (found.dev, found.ino),
                self.max_file,
                &mut linked,
            ) {
                Ok(contents) => contents,
                Err(Skip::Secret) => continue,
                Err(Skip::Swapped) => {
                    self.swapped += 1;
                    continue;
                }
            };
            if let ra::Contents::Bytes(b) = &contents {
                bytes += b.len();
            }
            bytes += found.sub.len() + 32;
            files.push(ra::File {
                path: found.sub,
                contents,
            });
            if files.len() >= limit || bytes >= BATCH_BYTES || began.elapsed() >= BATCH_TIME {
                let errors = self.walker.errors + self.swapped - reported;
                reported = self.walker.errors + self.swapped;
                let batch = ra::Batch {
                    files: std::mem::take(&mut files),
                    errors,
                    done: false,
                };
                // The reader was dropped: the tool does not want the rest.
                if self.batches.send(batch).is_err() {
                    return;
                }
                bytes = 0;
                limit = (limit * 2).min(BATCH_FILES);
                began = Instant::now();
            }
        }
        let _ = self.batches.send(ra::Batch {
            files,
            errors: self.walker.errors + self.swapped - reported,
            done: true,
        });
    }
}

/// Why a file found by the walk is not handed to the tool at all.
#[derive(Debug, PartialEq, Eq)]
enum Skip {
    /// A second name of a secret (a hard link).
    Secret,
    /// No longer the file the listing named (exchanged or renamed over since).
    Swapped,
}

/// Read the file `name` of the directory open as `dir` when it is plainly the regular file the
/// listing named (`listed`: the directory's filesystem and the listed inode): opened through
/// the directory's descriptor, never following a symlink and without blocking, judged by what
/// was opened. One `openat`, one `fstat`, and for a file that does not change while it is read,
/// one `read`. [`Skip::Secret`] when `linked(dev, ino, nlink)` says the file is a second name
/// of a secret (asked only of files with several links; no system call of its own).
#[allow(clippy::unnecessary_cast)]
fn read_plain(
    dir: BorrowedFd<'_>,
    name: &str,
    listed: (u64, u64),
    max_file: u64,
    linked: &mut dyn FnMut(u64, u64, u64) -> bool,
) -> Result<ra::Contents, Skip> {
    use rustix::fs::{FileType, Mode, OFlags};
    let Ok(fd) = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW,
        Mode::empty(),
    ) else {
        return Ok(ra::Contents::NotRead);
    };
    let Ok(stat) = rustix::fs::fstat(&fd) else {
        return Ok(ra::Contents::NotRead);
    };
    if stat.st_dev as u64 == listed.0 && stat.st_ino as u64 != listed.1 {
        return Err(Skip::Swapped);
    }
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Ok(ra::Contents::NotRead);
    }
    if stat.st_nlink > 1 && linked(stat.st_dev as u64, stat.st_ino as u64, stat.st_nlink as u64) {
        return Err(Skip::Secret);
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > max_file {
        return Ok(ra::Contents::TooLarge(size));
    }
    if size > MAX_READ_AHEAD_FILE {
        return Ok(ra::Contents::NotRead);
    }
    // One byte more than the size: a read that fills less than asked is at the end.
    let mut buf: Vec<u8> = Vec::with_capacity(size as usize + 1);
    loop {
        let asked = buf.capacity() - buf.len();
        match rustix::io::read(&fd, rustix::buffer::spare_capacity(&mut buf)) {
            Ok(0) => break,
            Ok(got) if got < asked => break,
            Ok(_) => {
                // The file grew while it was read.
                let len = buf.len() as u64;
                if len > max_file {
                    return Ok(ra::Contents::TooLarge(len));
                }
                if len > MAX_READ_AHEAD_FILE {
                    return Ok(ra::Contents::NotRead);
                }
                buf.reserve(64 << 10);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Ok(ra::Contents::NotRead),
        }
    }
    Ok(ra::Contents::Bytes(buf))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

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
        let read_plain = |p: &std::path::Path, max| {
            let name = p.file_name().unwrap().to_str().unwrap();
            read_plain(dir.as_fd(), name, listed(p), max, &mut |_, _, _| {
                panic!("asked about a file with one link")
            })
            .unwrap()
        };
        let bytes = |c: ra::Contents| match c {
            ra::Contents::Bytes(b) => Some(b),
            _ => None,
        };
        assert_eq!(
            bytes(read_plain(&root.join("a.txt"), 100)).unwrap(),
            b"hello\n"
        );
        assert_eq!(bytes(read_plain(&root.join("empty"), 100)).unwrap(), b"");
        assert!(matches!(
            read_plain(&root.join("big"), 100),
            ra::Contents::TooLarge(3000)
        ));
        assert_eq!(
            bytes(read_plain(&root.join("big"), 3000)).unwrap().len(),
            3000
        );
        // A symlink (even to a file inside) and a FIFO are not read, and the FIFO does not
        // block the thread.
        assert!(matches!(
            read_plain(&root.join("link"), 100),
            ra::Contents::NotRead
        ));
        assert!(matches!(
            read_plain(&root.join("fifo"), 100),
            ra::Contents::NotRead
        ));
        assert!(matches!(
            read_plain(&root.join("missing"), 100),
            ra::Contents::NotRead
        ));
        // A file with several links is asked about once, and skipped when it is a secret's.
        std::fs::hard_link(root.join("a.txt"), root.join("b.txt")).unwrap();
        let mut asked = 0;
        let b = listed(&root.join("b.txt"));
        let got = super::read_plain(dir.as_fd(), "b.txt", b, 100, &mut |_, _, nlink| {
            asked += 1;
            nlink == 2
        });
        assert_eq!(got.unwrap_err(), Skip::Secret);
        assert_eq!(asked, 1);
        // A name that is another file than the listing named is skipped, not read.
        std::fs::write(root.join("secret.txt"), "SECRET").unwrap();
        let plain = listed(&root.join("a.txt"));
        std::fs::rename(root.join("secret.txt"), root.join("a.txt")).unwrap();
        let got = super::read_plain(dir.as_fd(), "a.txt", plain, 100, &mut |_, _, _| false);
        assert_eq!(got.unwrap_err(), Skip::Swapped);
    }

    /// The thread ends soon after the reader is dropped, whatever is left to read.
    #[test]
    fn dropping_the_reader_stops_the_thread() {
        use super::super::walk::WalkScope;
        use super::super::wasi::Preopen;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for i in 0..3000 {
            let sub = root.join(format!("d{}", i % 10));
            std::fs::create_dir_all(&sub).unwrap();
            std::fs::write(sub.join(format!("f{i}")), "x").unwrap();
        }
        let scope = WalkScope {
            preopens: vec![Preopen {
                host: root.clone(),
                guest: "/workspace".into(),
                writable: false,
            }],
            deny: None,
            ..WalkScope::default()
        };
        let (tx, rx) = mpsc::sync_channel(QUEUED);
        let work = Work {
            walker: Walker::new(scope, "/workspace", WalkOptions::default()).unwrap(),
            deny: None,
            links: LinkSnapshot::default(),
            swapped: 0,
            include: None,
            max_file: 100,
            stop: Arc::new(AtomicBool::new(false)),
            cancel: None,
            batches: tx,
        };
        let (ended_tx, ended) = mpsc::channel();
        std::thread::spawn(move || {
            work.run();
            ended_tx.send(()).unwrap();
        });
        let first = rx.recv().unwrap();
        assert!(!first.files.is_empty() && first.files.len() <= FIRST_BATCH_FILES);
        assert!(!first.done);
        drop(rx);
        ended
            .recv_timeout(Duration::from_secs(10))
            .expect("the read-ahead thread must stop once its reader is gone");
    }
}
