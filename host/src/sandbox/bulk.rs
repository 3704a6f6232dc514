//! Calls that scan the workspace (`grep`, `glob`, `ls`) run their guest on threads of their
//! own while the gate serves (MCP over stdio or HTTP), not on the runtime's workers.
//!
//! A scan can take milliseconds of CPU to seconds; on a worker it yields only at each epoch
//! tick (10 ms), so every quick call (a `read`, an `edit`) queued behind it on that worker
//! waits a tick per step, and a few scans in flight make every call as slow as a scan. On
//! their own threads the kernel shares the cores between scans and the workers, and the
//! workers, which sleep between calls, run first when a call arrives. There is one scan
//! thread fewer than the machine has cores (at least one), so scans never take every core;
//! a scan's own read-ahead threads still read its files in parallel.
//!
//! The trade, measured with the load script (2 cores, 100 calls in flight, 1 in 5 a `grep`,
//! docs/benchmarks.md): `read` p50 45-50 ms → 2.5-2.8 ms, p99 87-101 → 34-46 ms; `grep` p50
//! 50-56 → 218-237 ms (scans now queue behind each other instead of beside the reads); the
//! same calls per second.
//!
//! At most one scan more than there are scan threads runs at once; the others wait their turn
//! (in order of arrival, and a call cancelled while waiting never starts). With every queued
//! scan running at once, the load script's 20 scans in flight each held an instance, a
//! read-ahead and its threads, and the server peaked at 355-360 MB (the target is 300 MB);
//! with turns, 247-262 MB, `grep` p99 265-340 ms instead of 565-690 ms, the same calls per
//! second. The trade: a scan may wait behind long ones (two on two cores), each bounded by
//! its own deadline.

use super::CallReport;
use crate::cancel::CancelToken;
use crate::error::Error;
use std::future::Future;
use std::sync::OnceLock;

/// The scans' threads: one fewer than the machine's cores, at least one.
fn scan_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_sub(1).max(1)
}

/// The scans' runtime, started on first use.
fn runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(scan_threads())
                .thread_name("toolgate-scan")
                .enable_all()
                .build()
                .map_err(
                    |e| tracing::warn!(error = %e, "no threads for scans: they run on the workers"),
                )
                .ok()
        })
        .as_ref()
}

/// How many scans run at once: one more than the scans' threads, so that while one scan's
/// guest searches, another's host work (its walk, its read-ahead) goes on beside it. Every
/// scan running holds a guest instance, its read-ahead threads and up to four chunks of file
/// contents; more at once would only share the same thread, each scan taking as long as all
/// of them together. The others wait their turn in order of arrival.
fn turns() -> &'static tokio::sync::Semaphore {
    static TURNS: OnceLock<tokio::sync::Semaphore> = OnceLock::new();
    TURNS.get_or_init(|| tokio::sync::Semaphore::new(scan_threads() + 1))
}

/// Wait for a turn to scan; `None` if the call is cancelled first (it then never starts).
async fn turn(cancel: &CancelToken) -> Option<tokio::sync::SemaphorePermit<'static>> {
    let acquire = turns().acquire();
    if !cancel.can_cancel() {
        return acquire.await.ok();
    }
    tokio::pin!(acquire);
    loop {
        if cancel.is_cancelled() {
            return None;
        }
        // The token is a flag: look at it again every 20 ms while waiting.
        tokio::select! {
            permit = &mut acquire => return permit.ok(),
            () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
        }
    }
}

/// Run `call` on the scans' threads, when its turn comes, and wait for its report. If this
/// future is dropped before the call ends (its caller went away), `cancel` is cancelled, so
/// the guest stops at its next epoch tick instead of running on unobserved. Without the
/// threads it runs here.
pub(crate) async fn run(
    call: impl Future<Output = CallReport> + Send + 'static,
    cancel: &CancelToken,
) -> CallReport {
    let Some(_turn) = turn(cancel).await else {
        return CallReport {
            result: Err(Error::Cancelled {
                message: "the call was cancelled while it waited for other searches to end; nothing was run".into(),
            }),
            net_refusals: Vec::new(),
        };
    };
    match runtime() {
        Some(rt) => run_on(rt, call, cancel).await,
        None => call.await,
    }
}

async fn run_on(
    rt: &tokio::runtime::Runtime,
    call: impl Future<Output = CallReport> + Send + 'static,
    cancel: &CancelToken,
) -> CallReport {
    /// Cancels the call unless disarmed (the call ended).
    struct CancelOnDrop<'a>(Option<&'a CancelToken>);
    impl Drop for CancelOnDrop<'_> {
        fn drop(&mut self) {
            if let Some(cancel) = self.0 {
                cancel.cancel();
            }
        }
    }
    let mut guard = CancelOnDrop(Some(cancel));
    // The call keeps its span (its logs still name the call).
    let joined = rt.spawn(tracing::Instrument::in_current_span(call)).await;
    guard.0 = None;
    joined.unwrap_or_else(|e| CallReport {
        result: Err(Error::Sandbox(format!(
            "the tool's call stopped unexpectedly on the scan thread ({e}); the call did nothing more, and it can be retried"
        ))),
        net_refusals: Vec::new(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "bulk_tests.rs"]
mod tests;
