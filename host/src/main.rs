//! The `toolgate` command: a thin face over the library.

/// mimalloc instead of glibc's malloc. Profiling `serve --http` under the load script (100
/// calls in flight) put ~16% of the server's CPU in glibc's malloc and free (its arena
/// locks, `malloc_consolidate`, `unlink_chunk`): with mimalloc 2 the same run serves ~5,800
/// calls/s instead of ~4,000 (`read` p99 ~35-44 ms instead of ~45-52). Version 3 serves ~5%
/// more but peaks at ~276-281 MB of RSS against version 2's ~267 MB (the target is 300 MB).
/// A one-shot call starts as fast or faster, and glibc's heap-growth tuning for it
/// (`M_TOP_PAD`) is no longer needed. docs/decisions.md, "The allocator".
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
