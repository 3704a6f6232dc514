//! A connection's task polled again in place when it wakes itself while being polled.
//!
//! hyper hands a request's body to the handler through a channel whose receiving end wakes
//! the sending end, the connection's own task, each time it takes a piece. That wake comes
//! while the task is being polled, so tokio puts the task at the back of the worker's queue
//! when the poll returns and wakes the other worker to look for work. On one connection
//! (an agent's calls one after another) that woke the idle worker on every request: it took
//! the connection over or parked on the I/O driver, so consecutive requests ran on
//! alternate workers, each with the other core's caches. Measured on a 2-core VM: the same
//! `read` through the gate took ~110 µs in the HTTP server against ~55 µs in the stdio one,
//! whose calls stay on one worker, and each call cost ~2 more context switches
//! (docs/benchmarks.md).
//!
//! [`Repoll`] gives the future a waker of its own. A wake that comes while the future is
//! being polled (from its own code or another thread) is noted, and the future is polled
//! again at once, on the same thread, up to [`MAX_REPOLLS`] times in a row; after that,
//! or for any wake that comes between polls, the wake goes to the runtime's waker as
//! before. No wake is lost: a wake either finds the future being polled and is seen when
//! that poll ends, or finds it idle and goes to the runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Not being polled: a wake goes to the runtime.
const IDLE: u8 = 0;
/// Being polled, not woken yet.
const POLLING: u8 = 1;
/// Woken while being polled: polled again when the poll ends.
const WOKEN: u8 = 2;

/// The most polls in a row done in place for wakes during a poll; then the runtime gets the
/// wake, so a future that keeps waking itself still lets the worker's other tasks run.
pub(super) const MAX_REPOLLS: u32 = 4;

/// `F`, polled again in place when woken during its own poll while `now` says so (see the
/// module's note).
pub(super) struct Repoll<F, N> {
    inner: Pin<Box<F>>,
    now: N,
    signal: Arc<Signal>,
    waker: Waker,
}

/// Where wakes of the wrapped future land.
struct Signal {
    state: AtomicU8,
    /// The runtime's waker of the task, from its latest poll.
    runtime: Mutex<Option<Waker>>,
}

impl<F: Future, N: Fn() -> bool> Repoll<F, N> {
    /// `inner`, polled again in place for its own wakes during the polls at which `now()` is
    /// true; at the others it is polled as it would be unwrapped.
    pub(super) fn new(inner: F, now: N) -> Self {
        let signal = Arc::new(Signal {
            state: AtomicU8::new(IDLE),
            runtime: Mutex::new(None),
        });
        Repoll {
            inner: Box::pin(inner),
            now,
            waker: Waker::from(signal.clone()),
            signal,
        }
    }
}

impl<F: Future, N: Fn() -> bool + Unpin> Future for Repoll<F, N> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        if !(this.now)() {
            return this.inner.as_mut().poll(cx);
        }
        this.signal.runtime_waker_is(cx.waker());
        let mut own = Context::from_waker(&this.waker);
        for _ in 0..=MAX_REPOLLS {
            this.signal.state.store(POLLING, Ordering::Release);
            let out = this.inner.as_mut().poll(&mut own);
            let state = this.signal.state.swap(IDLE, Ordering::AcqRel);
            if out.is_ready() {
                return out;
            }
            if state != WOKEN {
                return Poll::Pending;
            }
        }
        // Still waking itself: polled again in the runtime's turn.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Signal {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Waker>> {
        self.runtime.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn runtime_waker_is(&self, waker: &Waker) {
        let mut runtime = self.lock();
        if !runtime.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *runtime = Some(waker.clone());
        }
    }
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match self
            .state
            .compare_exchange(POLLING, WOKEN, Ordering::AcqRel, Ordering::Acquire)
        {
            // Seen when the poll ends.
            Ok(_) => {}
            // Already woken during this poll: the poll that follows covers this wake too.
            Err(WOKEN) => {}
            Err(_) => {
                if let Some(waker) = self.lock().as_ref() {
                    waker.wake_by_ref();
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "repoll_tests.rs"]
mod tests;
