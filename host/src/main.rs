//! The `toolgate` command: a thin face over the library.

/// mimalloc instead of glibc's malloc. Profiling `serve --http` under the load script (100
/// calls in flight) put ~16% of the server's CPU in glibc's malloc and free (its arena
/// locks, `malloc_consolidate`, `unlink_chunk`): with mimalloc the same run served
/// ~6,000 calls/s instead of ~4,100 (`read` p99 ~36 ms instead of ~50). Its version 2 keeps the
/// server's peak RSS at ~267 MB against version 3's ~276-281 MB (the target is 300 MB) for ~5%
/// of that throughput. A one-shot call starts as fast or faster (glibc's heap-growth tuning,
/// `M_TOP_PAD`, is no longer needed). docs/decisions.md, "The allocator".
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
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

#[path = "cli/mod.rs"]
mod toolgate_cli;
