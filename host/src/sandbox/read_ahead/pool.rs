//! The read-ahead's threads: one walks and cuts the files into numbered jobs, the workers read
//! the jobs into chunks (each job by one worker, its files in order).

use super::file::{contains, read_plain, Fetched, Skip, Sort};
use super::{CHUNK_BYTES, CHUNK_FILES, CHUNK_TIME, FIRST_CHUNK_FILES, WAIT};
use crate::cancel::CancelToken;
use crate::sandbox::fsguard::FsDeny;
use crate::sandbox::walk::{Found, Walker};
use crate::workspace::LinkSnapshot;
use rustix::fd::AsFd as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;
use toolgate_walk_rules::Include;

/// A file's contents as a worker found them (both versions' `contents`).
#[derive(Debug)]
pub(super) enum Got {
    Bytes(Vec<u8>),
    TooLarge(u64),
    NotRead,
    Binary,
    NoNeedle,
}

/// One file of a chunk.
pub(super) struct Item {
    pub(super) path: String,
    pub(super) got: Got,
}

/// Files found by the walk, in walk order, for one worker to read.
pub(super) struct Job {
    seq: u64,
    files: Vec<Found>,
    /// Walk errors since the previous job.
    errors: u32,
    /// The walk's last job.
    last: bool,
}

/// A job read.
pub(super) struct Chunk {
    pub(super) seq: u64,
    pub(super) files: Vec<Item>,
    /// The job's walk errors and the files found swapped while reading it.
    pub(super) errors: u32,
    pub(super) last: bool,
}

fn stopped(stop: &AtomicBool, cancel: Option<&AtomicBool>) -> bool {
    stop.load(Ordering::Relaxed) || cancel.is_some_and(|c| c.load(Ordering::Relaxed))
}

/// The walking thread: cuts the walk's files into numbered jobs.
pub(super) struct Work {
    pub(super) walker: Walker,
    pub(super) include: Option<Include>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) cancel: CancelToken,
    /// One permit per job sent; the reader gives one back per chunk taken.
    pub(super) permits: mpsc::Receiver<()>,
    pub(super) jobs: mpsc::Sender<Job>,
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

    pub(super) fn run(mut self) {
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
pub(super) struct Worker {
    /// The deny-list, for the second names of secrets (hard links).
    pub(super) deny: Option<Arc<FsDeny>>,
    /// The secrets' inodes for this worker, looked up on the first file with several links.
    pub(super) links: LinkSnapshot,
    pub(super) max_file: u64,
    pub(super) sort: Sort,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) cancel: CancelToken,
    pub(super) jobs: Arc<Mutex<mpsc::Receiver<Job>>>,
    pub(super) chunks: mpsc::Sender<Chunk>,
    /// The read buffer, kept for the next file when a file's contents are not handed on.
    pub(super) buf: Vec<u8>,
}

impl Worker {
    pub(super) fn run(mut self) {
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
                found.name(),
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
