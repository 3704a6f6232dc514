//! `job_output`: Read what a background shell job printed since the last job_output call, and whether it is still running (exit code when it ended).

use toolgate_guest::exec;
use toolgate_guest::{Context, Descriptor, Output, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        exec::job_tool_descriptor(
            "job_output",
            "Read what a background shell job printed since the last job_output call, and whether it is still running (exit code when it ended).",
        )
    }

    fn call(input: Value, _cx: &Context) -> Result<Output, ToolError> {
        exec::job_tool_call(&input, exec::job_output)
    }
}

toolgate_guest::register_tool!(T);
