//! The `toolgate` command: a thin face over the library.

fn main() -> std::process::ExitCode {
    toolgate_cli::main()
}

#[path = "cli/mod.rs"]
mod toolgate_cli;
