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

use super::CallReport;
use crate::cancel::CancelToken;
use crate::error::Error;
use std::future::Future;
use std::sync::OnceLock;

/// The scans' runtime, started on first use.
fn runtime() -> Option<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cores.saturating_sub(1).max(1))
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

/// Run `call` on the scans' threads and wait for its report. If this future is dropped
/// before the call ends (its caller went away), `cancel` is cancelled, so the guest stops at
/// its next epoch tick instead of running on unobserved. Without the threads it runs here.
pub(crate) async fn run(
    call: impl Future<Output = CallReport> + Send + 'static,
    cancel: &CancelToken,
) -> CallReport {
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
