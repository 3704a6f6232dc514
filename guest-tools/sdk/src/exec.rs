//! The host exec capability (`toolgate:host/exec@0.1.0`), for tools built with the SDK's `exec`
//! feature. Importing it caps the tool at session scope. The host runs only the command its
//! gate approved for the current call; everything else is refused.

#[doc(hidden)]
pub mod __wit {
    wit_bindgen::generate!({
        path: "../../tools-wit/wit/host/since_v0.1.0",
        world: "exec-host",
    });
}

use crate::{json, Descriptor, Output, Risk, ToolError, Value};
pub use __wit::toolgate::host::exec::{Command, Outcome, State, StreamOutput};

/// Run the approved command.
pub fn run(cmd: &Command) -> Result<Outcome, String> {
    __wit::toolgate::host::exec::run(cmd)
}

/// New output of a background job of this session, and its state.
pub fn job_output(job_id: &str) -> Result<Outcome, String> {
    __wit::toolgate::host::exec::job_output(job_id)
}

/// Kill a background job's process group.
pub fn job_kill(job_id: &str) -> Result<Outcome, String> {
    __wit::toolgate::host::exec::job_kill(job_id)
}

/// The descriptor of a tool that acts on one background job: input `{ "job_id": "..." }`.
pub fn job_tool_descriptor(name: &str, description: &str) -> Descriptor {
    Descriptor::new(
        name,
        description,
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

/// One call of a job tool: `action` on the input's `job_id`, shown like a command's outcome.
pub fn job_tool_call(
    input: &Value,
    action: fn(&str) -> Result<Outcome, String>,
) -> Result<Output, ToolError> {
    let id = input
        .get("job_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let outcome = action(id).map_err(|m| ToolError::new("no-such-job", m))?;
    Ok(to_output(outcome, id))
}

/// The state's name.
pub fn state_name(s: State) -> &'static str {
    match s {
        State::Exited => "exited",
        State::Running => "running",
        State::TimedOut => "timed-out",
        State::Killed => "killed",
    }
}

/// An outcome as an observation: stdout, then stderr under a marker; honest totals; every host
/// fact in `data`.
pub fn to_output(o: Outcome, what: &str) -> Output {
    let mut content = o.stdout.preview.clone();
    if !o.stderr.preview.is_empty() {
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str("[stderr]\n");
        content.push_str(&o.stderr.preview);
    }
    let summary = match o.state {
        State::Exited => match (o.exit_code, o.signal) {
            (Some(c), _) => format!("{what}: exit {c} in {} ms", o.duration_ms),
            (None, Some(s)) => format!("{what}: killed by signal {s} after {} ms", o.duration_ms),
            _ => format!("{what}: ended after {} ms", o.duration_ms),
        },
        State::Running => format!(
            "{what}: still running as background job {} ({} ms so far); read it with job_output",
            o.job_id.as_deref().unwrap_or("?"),
            o.duration_ms
        ),
        State::TimedOut => format!(
            "{what}: timed out after {} ms; its process group was killed",
            o.duration_ms
        ),
        State::Killed => format!("{what}: killed after {} ms", o.duration_ms),
    };
    let mut data: Value = serde_json::from_str(&o.data).unwrap_or(Value::Null);
    if !data.is_object() {
        data = json!({});
    }
    if let Some(map) = data.as_object_mut() {
        map.insert("state".into(), json!(state_name(o.state)));
        map.insert("exit_code".into(), json!(o.exit_code));
        map.insert("signal".into(), json!(o.signal));
        map.insert("duration_ms".into(), json!(o.duration_ms));
        map.insert("job_id".into(), json!(o.job_id));
        map.insert("full_output_ref".into(), json!(o.full_output_ref));
        map.insert(
            "stdout".into(),
            json!({"bytes": o.stdout.total_bytes, "lines": o.stdout.total_lines, "truncated": o.stdout.truncated}),
        );
        map.insert(
            "stderr".into(),
            json!({"bytes": o.stderr.total_bytes, "lines": o.stderr.total_lines, "truncated": o.stderr.truncated}),
        );
    }
    let (summary, content) = (summary, content);
    let shown_out = o.stdout.preview.len() as u64;
    let shown_err = o.stderr.preview.len() as u64;
    Output::new(summary, content)
        .truncated(o.stdout.truncated || o.stderr.truncated)
        .total(
            "stdout_bytes",
            o.stdout.total_bytes,
            shown_out.min(o.stdout.total_bytes),
        )
        .total(
            "stderr_bytes",
            o.stderr.total_bytes,
            shown_err.min(o.stderr.total_bytes),
        )
        .total(
            "stdout_lines",
            o.stdout.total_lines,
            if o.stdout.truncated {
                0
            } else {
                o.stdout.total_lines
            },
        )
        .total(
            "stderr_lines",
            o.stderr.total_lines,
            if o.stderr.truncated {
                0
            } else {
                o.stderr.total_lines
            },
        )
        .data(data)
}

/// A timed-out outcome as a tool error (`timed-out`), with the output it printed.
pub fn timed_out(o: Outcome, what: &str) -> ToolError {
    let data = serde_json::from_str::<Value>(&o.data).unwrap_or(Value::Null);
    let mut message = format!(
        "{what}: timed out after {} ms; its whole process group was killed",
        o.duration_ms
    );
    for (name, s) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        if !s.preview.is_empty() {
            message.push_str(&format!("\n[{name}]\n{}", s.preview));
        }
    }
    ToolError::new("timed-out", message).data(json!({
        "state": "timed-out",
        "duration_ms": o.duration_ms,
        "signal": o.signal,
        "full_output_ref": o.full_output_ref,
        "host": data,
    }))
}
