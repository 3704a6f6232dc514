//! The `toolgate` command: a thin face over the library.

fn main() -> std::process::ExitCode {
    keep_heap_slack();
    // The shell's spawner is this binary started again by the host (see `exec::spawner`);
    // it must not parse arguments or touch anything else.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == toolgate::exec::spawner::ARG)
    {
        return toolgate::exec::spawner::serve();
    }
    toolgate_cli::main()
}

/// Let glibc's malloc grow a heap 8 MiB past what is asked, before any thread exists. By
/// default it grows the heap by exactly what each allocation needs, which on the threads of
/// a one-shot call (the schema warm-up, the audit writer, the runtime's workers) was 440-1500
/// `mprotect` calls of one page each: a one-shot `toolgate call read` measured 15.9-17.3 ms
/// wall before and 13.4-14.2 ms after (`perf stat -r 40`, alternating). The slack is address
/// space, not memory: pages count once they are touched, and a trim keeps at most this much.
fn keep_heap_slack() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` only sets a tunable of the allocator; called before any other thread.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, 8 << 20);
    }
}

#[path = "cli/mod.rs"]
mod toolgate_cli;
