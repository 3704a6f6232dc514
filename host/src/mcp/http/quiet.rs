//! When the HTTP server may do a finished call's leftover work between requests.
//!
//! After an answer, the sandbox can drop the call's store and instantiate the next call's
//! component ahead ([`Gate::idle`], as the stdio server does while its client reads): on one
//! connection this takes ~50 µs off the next call. Under load the same work only moves
//! between calls and competes with them (measured: ~12% fewer calls a second with 100 in
//! flight), so it is done only when the server is quiet: the request that just answered a
//! call is the only one being handled, and no two requests have been handled at once for
//! [`QUIET_FOR`]. One agent calling tools one after another is quiet; a crowd is not.

use crate::gate::Gate;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long no two requests may have overlapped before the server counts as quiet.
pub(super) const QUIET_FOR: Duration = Duration::from_millis(50);

/// The requests being handled, and when two last were at once.
pub(super) struct Quiet {
    /// How long no two requests may have overlapped.
    window: Duration,
    active: AtomicUsize,
    since: Instant,
    /// Microseconds from `since` to the last moment two requests were handled at once.
    overlap_at: AtomicU64,
}

/// A request being handled; counted until dropped.
pub(super) struct Active<'a>(&'a Quiet);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Quiet {
    pub(super) fn new(window: Duration) -> Self {
        Quiet {
            window,
            active: AtomicUsize::new(0),
            since: Instant::now(),
            overlap_at: AtomicU64::new(0),
        }
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// A request is being handled until the guard is dropped.
    pub(super) fn enter(&self) -> Active<'_> {
        if self.active.fetch_add(1, Ordering::AcqRel) >= 1 {
            self.overlap_at.store(self.now_us(), Ordering::Relaxed);
        }
        Active(self)
    }

    /// Whether the server is quiet, asked by a request still being handled.
    pub(super) fn is_quiet(&self) -> bool {
        let since_overlap = self
            .now_us()
            .saturating_sub(self.overlap_at.load(Ordering::Relaxed));
        self.active.load(Ordering::Acquire) <= 1
            && since_overlap >= u64::try_from(self.window.as_micros()).unwrap_or(u64::MAX)
    }

    /// A request answered a call of `gate`: if the server is quiet, the call's leftover work
    /// is done beside the answer being written; if not, nothing is kept for later.
    pub(super) fn answered_call(&self, gate: &Arc<Gate>) {
        if self.is_quiet() {
            let gate = gate.clone();
            tokio::spawn(async move { gate.idle().await });
        } else {
            gate.under_load();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "quiet_tests.rs"]
mod tests;
