//! The `toolgate` command: a thin face over the library.

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
