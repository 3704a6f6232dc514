//! The audit writer's queue. A call hands its events over without waking the writer, except
//! when the writer sleeps with nothing to do; a woken writer then lingers a moment to gather
//! what the next calls send before it writes them in one transaction.
//!
//! With a plain channel every call woke the writer (a futex wake of a sleeping thread on the
//! call's own path) and paid one transaction. Here a stream of calls costs one wake-up and one
//! commit per `LINGER`: measured on the 2-core VM, an in-process `read` ~66-105 → ~45-57 µs,
//! the writer's CPU per call roughly halved, the HTTP load run +5-8% calls/s. The linger is
//! kept short because a longer one writes a bigger batch at once, and a call that runs beside
//! it waits longer (a single stdio connection's p99 went ~650 → ~870 µs at 2 ms and ~1150 µs
//! at 5 ms). A flush, a full queue or closing the queue ends the linger at once, so nothing
//! that waits for the audit waits longer.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a woken writer waits for more before writing.
pub(super) const LINGER: Duration = Duration::from_millis(1);

/// A queue this long is written at once (memory stays bounded under any load).
const FULL: usize = 1024;

struct Inner<T> {
    items: Vec<T>,
    /// The writer sleeps until something arrives: the next send wakes it.
    idle: bool,
    /// Something waits for the writer (a flush): no lingering.
    urgent: bool,
    /// No more sends: write what is left and end.
    closed: bool,
    /// The writer ended (or never started): sends come back to the caller.
    gone: bool,
}

struct Shared<T> {
    inner: Mutex<Inner<T>>,
    wake: Condvar,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The calls' end. Dropping it closes the queue.
pub(crate) struct Sender<T>(Arc<Shared<T>>);

/// The writer's end. Dropping it makes every later send fail (the caller writes itself).
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

pub(crate) fn queue<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner {
            items: Vec::new(),
            idle: false,
            urgent: false,
            closed: false,
            gone: false,
        }),
        wake: Condvar::new(),
    });
    (Sender(shared.clone()), Receiver(shared))
}

impl<T> Sender<T> {
    /// Queue `item`; `urgent` ends the writer's linger (someone waits for it). The item comes
    /// back when the writer is gone.
    pub(crate) fn send(&self, item: T, urgent: bool) -> Result<(), T> {
        let mut q = self.0.lock();
        if q.gone || q.closed {
            return Err(item);
        }
        q.items.push(item);
        let was_urgent = q.urgent;
        q.urgent |= urgent || q.items.len() >= FULL;
        // A lingering writer is told once that it should stop lingering.
        let wake = q.idle || (q.urgent && !was_urgent);
        q.idle = false;
        drop(q);
        if wake {
            self.0.wake.notify_one();
        }
        Ok(())
    }

    /// No more sends: the writer writes what is queued and ends.
    pub(crate) fn close(&self) {
        self.0.lock().closed = true;
        self.0.wake.notify_one();
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<T> Receiver<T> {
    /// The next batch: waits until something is queued, then lingers up to `linger` for more
    /// (less when the queue becomes urgent or is closed). `None` once the queue is closed and
    /// empty.
    pub(crate) fn next_batch(&self, linger: Duration) -> Option<Vec<T>> {
        let mut q = self.0.lock();
        while q.items.is_empty() {
            if q.closed {
                return None;
            }
            q.idle = true;
            q = self.0.wake.wait(q).unwrap_or_else(|p| p.into_inner());
        }
        q.idle = false;
        let until = Instant::now() + linger;
        while !q.urgent && !q.closed {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = self
                .0
                .wake
                .wait_timeout(q, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        q.urgent = false;
        Some(std::mem::take(&mut q.items))
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // What is still queued is dropped here (a flush waiting on it sees its reply end).
        let left = {
            let mut q = self.0.lock();
            q.gone = true;
            std::mem::take(&mut q.items)
        };
        drop(left);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "audit_queue_tests.rs"]
mod tests;
