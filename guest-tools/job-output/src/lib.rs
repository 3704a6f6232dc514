//! `job_output`: Read what a background shell job printed since the last job_output call, and whether it is still running (exit code when it ended).

use toolgate_guest::exec;
use toolgate_guest::{json, Context, Descriptor, Output, Risk, Tool, ToolError, Value};

struct T;

impl Tool for T {
    fn describe() -> Descriptor {
        Descriptor::new(
            "job_output",
            "Read what a background shell job printed since the last job_output call, and whether it is still running (exit code when it ended).",
            json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string", "minLength": 1, "description": "The job id the shell tool returned."}
                },
                "required": ["job_id"],
                "additionalProperties": false
            }),
            Risk::Exec,
        )
    }

    fn call(input: Value, _cx: &Context) -> Result<Output, ToolError> {
        let id = input
            .get("job_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let outcome = exec::job_output(id).map_err(|m| ToolError::new("no-such-job", m))?;
        Ok(exec::to_output(outcome, id))
    }
}

toolgate_guest::register_tool!(T);
