//! `job_output`: Read what a background shell job printed since the last job_output call, and whether it is still running (exit code when it ended).
//! A job still running is `ok`; one that ended non-zero, by a signal or at its timeout is an
//! `error` (`exit-status`, `signal`, `timeout`) that still shows its output.

use toolgate_guest::exec;
use toolgate_guest::{Context, Descriptor, Output, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        exec::job_tool_descriptor("job_output", include_str!("../description.md"))
    }

    fn call(input: Value, _cx: &Context) -> Result<Output, ToolError> {
        exec::job_tool_call(&input, exec::JobAction::Output)
    }
}

toolgate_guest::register_tool!(T);
