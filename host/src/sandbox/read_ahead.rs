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

pub(crate) mod bindings;
mod file;
mod host;
mod pool;

use pool::{Chunk, Item};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

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

#[cfg(test)]
#[path = "read_ahead_tests.rs"]
mod tests;
