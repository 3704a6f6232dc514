//! Per-call limits that stop a hostile or broken guest.

use std::time::Duration;

/// Limits applied to one call's store.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock deadline, enforced by epoch interruption: a guest that never yields (an
    /// infinite loop) is still stopped, which a host-side timer alone cannot do.
    pub timeout: Duration,
    /// Linear memory cap per store. Without it a guest really gets the 4 GiB it asks for.
    pub max_memory_bytes: usize,
    /// Largest result (content + data + summary) accepted from a guest; a bigger one is an
    /// error instead of an observation. It is checked once the result has been lifted out of
    /// the guest, so what the host copies is bounded by `max_memory_bytes`, not by this.
    pub max_result_bytes: usize,
    /// Content budget passed on to the model; the host cuts anything above it (head + tail)
    /// and keeps the whole under `.toolgate/outputs/`.
    pub max_output_bytes: usize,
    /// Host-side files bigger than this (staleness stamps, history) are stamped by size,
    /// mtime and inode instead of content, and history keeps only that stamp (no content).
    pub stamp_bytes: u64,
    /// Most ignore-file patterns (`.gitignore`, `.ignore`) one host walk compiles, across all
    /// the files it reads; the rest are cut and the cut files named (`data.ignore_files_cut`).
    pub ignore_patterns: usize,
    /// Most bytes of ignore-file patterns one host walk compiles (also at most the memory limit
    /// over what a compiled pattern byte costs).
    pub ignore_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            max_memory_bytes: 512 << 20,
            max_result_bytes: 16 << 20,
            max_output_bytes: 50 << 10,
            stamp_bytes: crate::state::DEFAULT_STAMP_BYTES,
            ignore_patterns: 20_000,
            ignore_bytes: 4 << 20,
        }
    }
}

impl Limits {
    pub(crate) fn deadline_ticks(&self, tick: Duration) -> u64 {
        let ticks = self.timeout.as_nanos() / tick.as_nanos().max(1);
        u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
    }
}
