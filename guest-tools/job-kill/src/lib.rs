//! `job_kill`: Stop a background shell job: kill its whole process group and show its last output.

use toolgate_guest::exec;
use toolgate_guest::{Context, Descriptor, Output, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        exec::job_tool_descriptor(
            "job_kill",
            "Stop a background shell job: kill its whole process group and show its last output.",
        )
    }

    fn call(input: Value, _cx: &Context) -> Result<Output, ToolError> {
        exec::job_tool_call(&input, exec::job_kill)
    }
}

toolgate_guest::register_tool!(T);
