//! `job_kill`: Stop a background shell job: kill its whole process group and show its last output.
//! Killing a running job is `ok` (the caller asked for its end); a job that had already ended
//! on its own is reported as `job_output` would (non-zero: an `error`).

use toolgate_guest::exec;
use toolgate_guest::{Context, Descriptor, Output, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        exec::job_tool_descriptor("job_kill", include_str!("../description.md"))
    }

    fn call(input: Value, _cx: &Context) -> Result<Output, ToolError> {
        exec::job_tool_call(&input, exec::JobAction::Kill)
    }
}

toolgate_guest::register_tool!(T);
