//! Modification times for a page of walk entries, read on a second thread while the walk goes
//! on. `glob` asks for the time of every file it lists (it sorts by it); one `statat` per file
//! was ~40 % of a large walk's system time, done between the listings on the walk's own thread.
//! A small walk never starts the thread: its first [`INLINE`] times are read in place.
//!
//! The call is the walk's own (`statat` on the listed directory's descriptor, never following
//! a symlink), so what is read and where is unchanged; only the thread differs. The times come
//! back keyed by the entry's index in the page, so the page's order is the walk's.

use super::listing::DirFd;
use rustix::fs::AtFlags;
use std::sync::mpsc;
use std::thread::{Scope, ScopedJoinHandle};

/// Times read on the walk's thread before the second one starts.
const INLINE: usize = 512;
/// Entries handed over at once (one channel message each batch).
const BATCH: usize = 256;

type Request = (usize, DirFd, String);
type Answer = (usize, Option<u64>);
/// The thread reading the times, and where to send it work.
type Worker<'scope> = (
    mpsc::Sender<Vec<Request>>,
    ScopedJoinHandle<'scope, Vec<Answer>>,
);

/// The times of one page's entries.
pub(super) struct Mtimes<'scope, 'env> {
    scope: &'scope Scope<'scope, 'env>,
    done: Vec<Answer>,
    asked: usize,
    batch: Vec<Request>,
    worker: Option<Worker<'scope>>,
}

impl<'scope, 'env> Mtimes<'scope, 'env> {
    pub(super) fn new(scope: &'scope Scope<'scope, 'env>) -> Self {
        Mtimes {
            scope,
            done: Vec::new(),
            asked: 0,
            batch: Vec::new(),
            worker: None,
        }
    }

    /// Read the time of `name` in `dir` for the page's entry `index`.
    pub(super) fn ask(&mut self, index: usize, dir: &DirFd, name: &str) {
        self.asked += 1;
        if self.asked <= INLINE {
            self.done.push((index, mtime_at(dir, name)));
            return;
        }
        self.batch.push((index, dir.clone(), name.to_string()));
        if self.batch.len() >= BATCH {
            self.send();
        }
    }

    fn send(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        if batch.is_empty() {
            return;
        }
        if self.worker.is_none() {
            let (tx, rx) = mpsc::channel::<Vec<Request>>();
            let spawned = std::thread::Builder::new()
                .name("toolgate-walk-stat".into())
                .spawn_scoped(self.scope, move || {
                    rx.iter().flat_map(|b| times(&b)).collect()
                });
            if let Ok(handle) = spawned {
                self.worker = Some((tx, handle));
            }
        }
        // No thread to be had (or it is gone): read them here, as before.
        let unsent = match &self.worker {
            Some((tx, _)) => tx.send(batch).err().map(|mpsc::SendError(b)| b),
            None => Some(batch),
        };
        if let Some(batch) = unsent {
            self.done.extend(times(&batch));
        }
    }

    /// Every time asked for, by entry index (`None`: could not be read).
    pub(super) fn finish(mut self) -> Vec<Answer> {
        self.send();
        let mut done = std::mem::take(&mut self.done);
        if let Some((tx, handle)) = self.worker.take() {
            drop(tx);
            // A panic in the worker (none is expected) leaves those times unknown.
            if let Ok(more) = handle.join() {
                done.extend(more);
            }
        }
        done
    }
}

/// The times of a batch, read on the calling thread.
fn times(batch: &[Request]) -> Vec<Answer> {
    batch
        .iter()
        .map(|(i, dir, name)| (*i, mtime_at(dir, name)))
        .collect()
}

/// The modification time of `name` in `dir` (not following a symlink), in ns since the epoch.
pub(super) fn mtime_at(dir: &DirFd, name: &str) -> Option<u64> {
    rustix::fs::statat(&**dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .and_then(|s| {
            let secs = u64::try_from(s.st_mtime).ok()?;
            // `st_mtime_nsec`'s type differs between platforms.
            #[allow(clippy::unnecessary_cast)]
            let nanos = s.st_mtime_nsec as u64;
            secs.checked_mul(1_000_000_000)?.checked_add(nanos)
        })
}
