//! The read-ahead (`toolgate:search/read-ahead@0.1.0` and `@0.2.0`): `grep` asks the host to
//! walk a directory and read its files on host threads, so that reading the next files (the
//! system calls and the copy out of the page cache) overlaps with the tool searching the current
//! ones in the guest. The call stays one guest instance with one output; the host adds threads
//! of plain I/O: one walks and cuts the files into numbered chunks, [`workers`] read the chunks
//! (each chunk by one worker, its files in order), and `next` hands the chunks to the tool in
//! their walk order, so the order and the totals do not depend on the number of threads.
//! With 0.2.0 a worker also sorts out what the tool need not see: a binary file (a NUL byte in
//! its first `binary-prefix` bytes) or one holding none of the tool's `needles` comes back
//! without its contents.
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
//! Bounded: one reader per call at a time, at most [`OUTSTANDING`] chunks walked and not yet
//! taken by the tool, each holding at most [`CHUNK_BYTES`] of contents (or one file up to
//! [`MAX_READ_AHEAD_FILE`]); a file that would go over is left to the tool (`not-read`);
//! `next` waits at most [`WAIT`] so the call's deadline and cancellation still apply; dropping
//! the reader (or the store, when the call ends in any way) stops every thread at its next file.

use super::fsguard::FsDeny;
use super::walk::{Found, WalkOptions, Walker};
use crate::cancel::CancelToken;
use crate::workspace::LinkSnapshot;
use rustix::fd::{AsFd as _, BorrowedFd};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use toolgate_walk_rules::Include;
use wasmtime::component::Resource;

/// The WIT bindings of `toolgate:search@0.1.0` and `@0.2.0`.
pub(crate) mod bindings {
    /// `toolgate:search@0.1.0` (the files' contents only).
    pub(crate) mod v1 {
        wasmtime::component::bindgen!({
            path: "../tools-wit/wit/search/since_v0.1.0",
            world: "read-ahead-host",
            with: {
                "toolgate:search/read-ahead.reader": super::super::Reader,
            },
        });
    }

    /// `toolgate:search@0.2.0` (binary files and needles sorted out by the host).
    pub(crate) mod v2 {
        wasmtime::component::bindgen!({
            path: "../tools-wit/wit/search/since_v0.2.0",
            world: "read-ahead-host",
            with: {
                "toolgate:search/read-ahead.reader": super::super::Reader,
            },
        });
    }

    /// Both versions, linked together (one reader per call across them).
    pub(crate) struct ReadAheadHost;

    impl ReadAheadHost {
        /// Add both versions' imports to `linker`.
        pub(crate) fn add_to_linker<T, D>(
            linker: &mut wasmtime::component::Linker<T>,
            host_getter: fn(&mut T) -> D::Data<'_>,
        ) -> wasmtime::Result<()>
        where
            T: 'static,
            D: wasmtime::component::HasData,
            for<'a> D::Data<'a>:
                v1::toolgate::search::read_ahead::Host + v2::toolgate::search::read_ahead::Host,
        {
            v1::ReadAheadHost::add_to_linker::<T, D>(linker, host_getter)?;
            v2::ReadAheadHost::add_to_linker::<T, D>(linker, host_getter)
        }
    }
}

use bindings::v1::toolgate::search::read_ahead as ra1;
use bindings::v2::toolgate::search::read_ahead as ra2;

/// The interfaces of the search package (any version).
pub const SEARCH_INTERFACE_PREFIX: &str = "toolgate:search/";

/// Most content bytes one chunk holds; a file that would go over is left to the tool, unless
/// it is the chunk's first file kept whole.
const CHUNK_BYTES: usize = 8 << 20;
/// Most files in one chunk.
const CHUNK_FILES: usize = 512;
/// Files in the first chunk: small, so the tool starts searching early; each chunk after it
/// may hold twice as many, up to [`CHUNK_FILES`].
const FIRST_CHUNK_FILES: usize = 16;
/// A chunk is sent to the workers once it has been filling this long, full or not (a slow
/// disk).
const CHUNK_TIME: Duration = Duration::from_millis(50);
/// Chunks walked and not yet taken by the tool (being read, read, or waiting for an earlier
/// one).
const OUTSTANDING: usize = 4;
/// Larger files are left to the tool (`not-read`): the read-ahead holds whole files.
const MAX_READ_AHEAD_FILE: u64 = 16 << 20;
/// Longest wait inside `next`: the guest's epoch deadline cannot interrupt a host call.
const WAIT: Duration = Duration::from_millis(100);
/// Most reading threads per reader.
const MAX_WORKERS: usize = 4;
/// Most needles, and most needle bytes in all, a tool may pass.
const MAX_NEEDLES: usize = 64;
const MAX_NEEDLE_BYTES: usize = 64 << 10;
/// The environment variable that sets the number of reading threads per reader (1 to
/// [`MAX_WORKERS`]; default: the machine's cores, at most [`MAX_WORKERS`]).
pub const THREADS_ENV: &str = "TOOLGATE_READ_AHEAD_THREADS";

/// Reading threads per reader: [`THREADS_ENV`] or the available cores, 1 to [`MAX_WORKERS`].
fn workers() -> usize {
    static WORKERS: OnceLock<usize> = OnceLock::new();
    *WORKERS.get_or_init(|| {
        std::env::var(THREADS_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, MAX_WORKERS)
    })
}

/// A file's contents as a worker found them (both versions' `contents`).
#[derive(Debug)]
enum Got {
    Bytes(Vec<u8>),
    TooLarge(u64),
    NotRead,
    Binary,
    NoNeedle,
}

/// One file of a chunk.
struct Item {
    path: String,
    got: Got,
}

/// Files found by the walk, in walk order, for one worker to read.
struct Job {
    seq: u64,
    files: Vec<Found>,
    /// Walk errors since the previous job.
    errors: u32,
    /// The walk's last job.
    last: bool,
}

/// A job read.
struct Chunk {
    seq: u64,
    files: Vec<Item>,
    /// The job's walk errors and the files found swapped while reading it.
    errors: u32,
    last: bool,
}

/// A walk being read ahead (the `reader` resource of both versions).
pub struct Reader {
    chunks: mpsc::Receiver<Chunk>,
    /// Chunks that came before their turn, by number.
    early: BTreeMap<u64, Chunk>,
    /// The number of the chunk the tool gets next.
    next_seq: u64,
    /// A permit back to the walking thread per chunk taken (it walks at most
    /// [`OUTSTANDING`] chunks ahead).
    permits: mpsc::SyncSender<()>,
    stop: Arc<AtomicBool>,
    done: bool,
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Reader {
    /// The next chunk in walk order: its files, errors and whether it is the last; waits at
    /// most [`WAIT`] (no files, not done: ask again).
    fn take(&mut self) -> (Vec<Item>, u32, bool) {
        if self.done {
            return (Vec::new(), 0, true);
        }
        let until = Instant::now() + WAIT;
        loop {
            if let Some(chunk) = self.early.remove(&self.next_seq) {
                self.next_seq += 1;
                let _ = self.permits.try_send(());
                self.done = chunk.last;
                return (chunk.files, chunk.errors, chunk.last);
            }
            match self
                .chunks
                .recv_timeout(until.saturating_duration_since(Instant::now()))
            {
                Ok(chunk) => {
                    self.early.insert(chunk.seq, chunk);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return (Vec::new(), 0, false),
                // Every thread ended without the last chunk: they were stopped (the call is
                // being cancelled) or could not go on.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.done = true;
                    return (Vec::new(), 1, true);
                }
            }
        }
    }
}

/// What a reader sorts out (0.2.0's options beyond 0.1.0's).
#[derive(Default, Clone)]
struct Sort {
    binary_prefix: usize,
    needles: Vec<Vec<u8>>,
}

impl super::CallState {
    fn open_reader(
        &mut self,
        start: String,
        include_glob: Option<String>,
        max_file: u64,
        sort: Sort,
    ) -> Result<Resource<Reader>, String> {
        if self.read_ahead_open {
            return Err(format!(
                "cannot read `{start}` ahead: another reader of this call is still open (drop it first)"
            ));
        }
        if sort.needles.len() > MAX_NEEDLES
            || sort.needles.iter().map(Vec::len).sum::<usize>() > MAX_NEEDLE_BYTES
        {
            return Err(format!(
                "cannot read `{start}` ahead: at most {MAX_NEEDLES} needles of {MAX_NEEDLE_BYTES} bytes in all are accepted; pass fewer"
            ));
        }
        let include = include_glob.as_deref().map(Include::new).transpose()?;
        // The start is resolved and its first directory listed here, so a refused start is an
        // error of this call and not of a thread.
        let walker = Walker::new_cancellable(
            self.walk.clone(),
            &start,
            WalkOptions::default(),
            self.cancel.flag(),
        )?;
        let stop = Arc::new(AtomicBool::new(false));
        let (permits, permit_rx) = mpsc::sync_channel(OUTSTANDING);
        for _ in 0..OUTSTANDING {
            let _ = permits.try_send(());
        }
        let (job_tx, job_rx) = mpsc::channel::<Job>();
        let (chunk_tx, chunk_rx) = mpsc::channel::<Chunk>();
        let jobs = Arc::new(Mutex::new(job_rx));
        let mut spawned = 0;
        for _ in 0..workers() {
            let worker = Worker {
                deny: self.walk.deny.clone(),
                links: LinkSnapshot::default(),
                max_file,
                sort: sort.clone(),
                stop: stop.clone(),
                cancel: self.cancel.clone(),
                jobs: jobs.clone(),
                chunks: chunk_tx.clone(),
                buf: Vec::new(),
            };
            if std::thread::Builder::new()
                .name("toolgate-read-ahead".into())
                .spawn(move || worker.run())
                .is_ok()
            {
                spawned += 1;
            }
        }
        drop(chunk_tx);
        if spawned == 0 {
            return Err(format!(
                "cannot read `{start}` ahead: no thread could be started"
            ));
        }
        let work = Work {
            walker,
            include,
            stop: stop.clone(),
            cancel: self.cancel.clone(),
            permits: permit_rx,
            jobs: job_tx,
        };
        std::thread::Builder::new()
            .name("toolgate-read-ahead-walk".into())
            .spawn(move || work.run())
            .map_err(|e| format!("cannot read `{start}` ahead: no thread: {e}"))?;
        let reader = self
            .table
            .push(Reader {
                chunks: chunk_rx,
                early: BTreeMap::new(),
                next_seq: 0,
                permits,
                stop,
                done: false,
            })
            .map_err(|e| format!("cannot read `{start}` ahead: {e}"))?;
        self.read_ahead_open = true;
        Ok(reader)
    }

    fn drop_reader(&mut self, reader: Resource<Reader>) -> wasmtime::Result<()> {
        self.table.delete(reader)?;
        self.read_ahead_open = false;
        Ok(())
    }
}

impl ra1::Host for super::CallState {
    fn open(&mut self, start: String, options: ra1::Options) -> Result<Resource<Reader>, String> {
        self.open_reader(
            start,
            options.include_glob,
            options.max_file_bytes,
            Sort::default(),
        )
    }
}

impl ra1::HostReader for super::CallState {
    fn next(&mut self, reader: Resource<Reader>) -> ra1::Batch {
        let Ok(reader) = self.table.get_mut(&reader) else {
            return ra1::Batch {
                files: Vec::new(),
                errors: 0,
                done: true,
            };
        };
        let (files, errors, done) = reader.take();
        ra1::Batch {
            files: files
                .into_iter()
                .map(|f| ra1::File {
                    path: f.path,
                    contents: match f.got {
                        Got::Bytes(b) => ra1::Contents::Bytes(b),
                        Got::TooLarge(n) => ra1::Contents::TooLarge(n),
                        // Not asked for in 0.1.0, so never found: the tool reads it itself.
                        Got::NotRead | Got::Binary | Got::NoNeedle => ra1::Contents::NotRead,
                    },
                })
                .collect(),
            errors,
            done,
        }
    }

    fn drop(&mut self, reader: Resource<Reader>) -> wasmtime::Result<()> {
        self.drop_reader(reader)
    }
}

impl ra2::Host for super::CallState {
    fn open(&mut self, start: String, options: ra2::Options) -> Result<Resource<Reader>, String> {
        let sort = Sort {
            binary_prefix: options.binary_prefix as usize,
            needles: options.needles,
        };
        self.open_reader(start, options.include_glob, options.max_file_bytes, sort)
    }
}

impl ra2::HostReader for super::CallState {
    fn next(&mut self, reader: Resource<Reader>) -> ra2::Batch {
        let Ok(reader) = self.table.get_mut(&reader) else {
            return ra2::Batch {
                files: Vec::new(),
                errors: 0,
                done: true,
            };
        };
        let (files, errors, done) = reader.take();
        ra2::Batch {
            files: files
                .into_iter()
                .map(|f| ra2::File {
                    path: f.path,
                    contents: match f.got {
                        Got::Bytes(b) => ra2::Contents::Bytes(b),
                        Got::TooLarge(n) => ra2::Contents::TooLarge(n),
                        Got::NotRead => ra2::Contents::NotRead,
                        Got::Binary => ra2::Contents::Binary,
                        Got::NoNeedle => ra2::Contents::NoNeedle,
                    },
                })
                .collect(),
            errors,
            done,
        }
    }

    fn drop(&mut self, reader: Resource<Reader>) -> wasmtime::Result<()> {
        self.drop_reader(reader)
    }
}

fn stopped(stop: &AtomicBool, cancel: Option<&AtomicBool>) -> bool {
    stop.load(Ordering::Relaxed) || cancel.is_some_and(|c| c.load(Ordering::Relaxed))
}

/// The walking thread: cuts the walk's files into numbered jobs.
struct Work {
    walker: Walker,
    include: Option<Include>,
    stop: Arc<AtomicBool>,
    cancel: CancelToken,
    /// One permit per job sent; the reader gives one back per chunk taken.
    permits: mpsc::Receiver<()>,
    jobs: mpsc::Sender<Job>,
}

impl Work {
    fn stopped(&self) -> bool {
        stopped(&self.stop, self.cancel.flag())
    }

    /// Wait for a permit to send another job; false when the reader is gone or stopped.
    fn permit(&self) -> bool {
        loop {
            if self.stopped() {
                return false;
            }
            match self.permits.recv_timeout(WAIT) {
                Ok(()) => return true,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    fn run(mut self) {
        let mut files = Vec::new();
        let mut limit = FIRST_CHUNK_FILES;
        let mut reported = 0u32;
        let mut seq = 0u64;
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
            files.push(found);
            if files.len() >= limit || began.elapsed() >= CHUNK_TIME {
                if !self.permit() {
                    return;
                }
                let job = Job {
                    seq,
                    files: std::mem::take(&mut files),
                    errors: self.walker.errors - reported,
                    last: false,
                };
                reported = self.walker.errors;
                // Every worker is gone: nobody wants the rest.
                if self.jobs.send(job).is_err() {
                    return;
                }
                seq += 1;
                limit = (limit * 2).min(CHUNK_FILES);
                began = Instant::now();
            }
        }
        if self.permit() {
            let _ = self.jobs.send(Job {
                seq,
                files,
                errors: self.walker.errors - reported,
                last: true,
            });
        }
    }
}

/// A reading thread: reads whole jobs, one at a time.
struct Worker {
    /// The deny-list, for the second names of secrets (hard links).
    deny: Option<Arc<FsDeny>>,
    /// The secrets' inodes for this worker, looked up on the first file with several links.
    links: LinkSnapshot,
    max_file: u64,
    sort: Sort,
    stop: Arc<AtomicBool>,
    cancel: CancelToken,
    jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
    chunks: mpsc::Sender<Chunk>,
    /// The read buffer, kept for the next file when a file's contents are not handed on.
    buf: Vec<u8>,
}

impl Worker {
    fn run(mut self) {
        loop {
            let job = {
                let Ok(jobs) = self.jobs.lock() else { return };
                match jobs.recv() {
                    Ok(job) => job,
                    // The walk is over (or stopped) and every job was taken.
                    Err(_) => return,
                }
            };
            let Some(chunk) = self.read(job) else { return };
            // The reader was dropped: the tool does not want the rest.
            if self.chunks.send(chunk).is_err() {
                return;
            }
        }
    }

    /// Read a job's files in order; `None` when stopped.
    fn read(&mut self, job: Job) -> Option<Chunk> {
        let mut files = Vec::with_capacity(job.files.len());
        let mut held = 0usize;
        let mut swapped = 0u32;
        for found in job.files {
            if stopped(&self.stop, self.cancel.flag()) {
                return None;
            }
            let (deny, links) = (&self.deny, &mut self.links);
            let mut linked = |dev, ino, nlink| {
                deny.as_ref()
                    .is_some_and(|d| d.linked_secret(links, dev, ino, nlink))
            };
            // What the chunk may still hold: a file that would go over is left to the tool,
            // unless nothing is held yet.
            let room = if held == 0 {
                usize::MAX
            } else {
                CHUNK_BYTES.saturating_sub(held)
            };
            // A hard link to a secret is skipped like the secret itself; a name swapped since
            // the listing is skipped and counted.
            let got = match read_plain(
                found.dir.as_fd(),
                &found.name,
                (found.dev, found.ino),
                self.max_file,
                room as u64,
                &mut linked,
                &mut self.buf,
            ) {
                Ok(Fetched::Whole) => self.sort(),
                Ok(Fetched::TooLarge(n)) => Got::TooLarge(n),
                Ok(Fetched::NotRead) => Got::NotRead,
                Err(Skip::Secret) => continue,
                Err(Skip::Swapped) => {
                    swapped += 1;
                    continue;
                }
            };
            if let Got::Bytes(b) = &got {
                held += b.len();
            }
            files.push(Item {
                path: found.sub,
                got,
            });
        }
        Some(Chunk {
            seq: job.seq,
            files,
            errors: job.errors + swapped,
            last: job.last,
        })
    }

    /// The file just read into the buffer: sorted out, or its bytes.
    fn sort(&mut self) -> Got {
        let b = &self.buf;
        if self.sort.binary_prefix > 0 && b[..b.len().min(self.sort.binary_prefix)].contains(&0) {
            return Got::Binary;
        }
        if !self.sort.needles.is_empty() && !self.sort.needles.iter().any(|n| contains(b, n)) {
            return Got::NoNeedle;
        }
        Got::Bytes(std::mem::take(&mut self.buf))
    }
}

/// Whether `needle` occurs in `hay` (glibc's `memmem`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    if needle.len() > hay.len() {
        return false;
    }
    // SAFETY: both pointers and lengths come from live slices borrowed for the whole call;
    // memmem only reads inside them and returns a pointer into `hay` or null.
    let at = unsafe {
        libc::memmem(
            hay.as_ptr().cast(),
            hay.len(),
            needle.as_ptr().cast(),
            needle.len(),
        )
    };
    !at.is_null()
}

/// Whether `needle` occurs in `hay`.
#[cfg(not(target_os = "linux"))]
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// How [`read_plain`] ended.
#[derive(Debug, PartialEq, Eq)]
enum Fetched {
    /// The whole file is in the buffer.
    Whole,
    TooLarge(u64),
    NotRead,
}

/// Why a file found by the walk is not handed to the tool at all.
#[derive(Debug, PartialEq, Eq)]
enum Skip {
    /// A second name of a secret (a hard link).
    Secret,
    /// No longer the file the listing named (exchanged or renamed over since).
    Swapped,
}

/// Read the file `name` of the directory open as `dir` into `buf` when it is plainly the
/// regular file the listing named (`listed`: the directory's filesystem and the listed inode):
/// opened through the directory's descriptor, never following a symlink and without blocking,
/// judged by what was opened. One `openat`, one `fstat`, and for a file that does not change
/// while it is read, one `read`. [`Skip::Secret`] when `linked(dev, ino, nlink)` says the file
/// is a second name of a secret (asked only of files with several links; no system call of its
/// own). A file larger than `room` is not read (`NotRead`: the tool reads it).
#[allow(clippy::unnecessary_cast, clippy::too_many_arguments)]
fn read_plain(
    dir: BorrowedFd<'_>,
    name: &str,
    listed: (u64, u64),
    max_file: u64,
    room: u64,
    linked: &mut dyn FnMut(u64, u64, u64) -> bool,
    buf: &mut Vec<u8>,
) -> Result<Fetched, Skip> {
    use rustix::fs::{FileType, Mode, OFlags};
    let Ok(fd) = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW,
        Mode::empty(),
    ) else {
        return Ok(Fetched::NotRead);
    };
    let Ok(stat) = rustix::fs::fstat(&fd) else {
        return Ok(Fetched::NotRead);
    };
    if stat.st_dev as u64 == listed.0 && stat.st_ino as u64 != listed.1 {
        return Err(Skip::Swapped);
    }
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Ok(Fetched::NotRead);
    }
    if stat.st_nlink > 1 && linked(stat.st_dev as u64, stat.st_ino as u64, stat.st_nlink as u64) {
        return Err(Skip::Secret);
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > max_file {
        return Ok(Fetched::TooLarge(size));
    }
    let cap = MAX_READ_AHEAD_FILE.min(room);
    if size > cap {
        return Ok(Fetched::NotRead);
    }
    // One byte more than the size: a read that fills less than asked is at the end.
    buf.clear();
    buf.reserve(size as usize + 1);
    loop {
        let asked = buf.capacity() - buf.len();
        match rustix::io::read(&fd, rustix::buffer::spare_capacity(&mut *buf)) {
            Ok(0) => break,
            Ok(got) if got < asked => break,
            Ok(_) => {
                // The file grew while it was read.
                let len = buf.len() as u64;
                if len > max_file {
                    return Ok(Fetched::TooLarge(len));
                }
                if len > cap {
                    return Ok(Fetched::NotRead);
                }
                buf.reserve(64 << 10);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Ok(Fetched::NotRead),
        }
    }
    Ok(Fetched::Whole)
}

#[cfg(test)]
#[path = "read_ahead_tests.rs"]
mod tests;
