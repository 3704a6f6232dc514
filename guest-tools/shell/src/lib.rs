//! `shell`: run a command on the host through the `toolgate:host/exec` capability. The host
//! keys, approves and confines the command; this guest only passes the approved text through
//! and turns the outcome into an observation. Importing exec caps the tool at session scope.
//!
//! Error codes: `refused` (the host would not run it); and, with the command's whole output
//! still shown: `exit-status` (it exited non-zero, `data.exit_code`), `signal` (a signal ended
//! it, `data.signal`), `timeout` (its timeout killed its process group). A command that
//! becomes a background job is `ok`; `job_output` reports how it ended.

use toolgate_guest::exec::{self, Command};
use toolgate_guest::{json, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value};

struct Shell;

impl Tool for Shell {
    fn describe() -> Descriptor {
        Descriptor::new(
            "shell",
            include_str!("../description.md"),
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "description": "The command to run."},
                    "description": {"type": "string", "description": "What the command does, in a few words, for the person approving it."},
                    "cwd": {"type": "string", "description": "Working directory inside the workspace (default: the workspace root)."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 3600000, "description": "Kill the command (its whole process group) after this long. Default 30 minutes."},
                    "auto_background_ms": {"type": "integer", "minimum": 1, "description": "Turn the command into a background job after this long (default 60000)."},
                    "run_in_background": {"type": "boolean", "description": "Start as a background job; returns its id after about a second."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            Risk::Exec,
        )
        .path("cwd", PathAccess::Read)
    }

    fn call(input: Value, _cx: &Context) -> Result<Output, ToolError> {
        let text = input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let label = exec::command_label(&text);
        let cmd = Command {
            text,
            cwd: input.get("cwd").and_then(Value::as_str).map(str::to_string),
            timeout_ms: input.get("timeout_ms").and_then(Value::as_u64),
            background: input
                .get("run_in_background")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        let outcome = exec::run(&cmd).map_err(|m| ToolError::new("refused", m))?;
        exec::to_result(outcome, &label)
    }
}

toolgate_guest::register_tool!(Shell);
