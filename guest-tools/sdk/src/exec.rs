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

/// What a job tool does to its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobAction {
    /// Read its new output (`job_output`).
    Output,
    /// Kill its process group (`job_kill`).
    Kill,
}

/// One call of a job tool: `action` on the input's `job_id`, shown like a command's outcome
/// (see [`to_result`]). A job that `job_kill` killed is `ok`: the caller asked for its end.
pub fn job_tool_call(input: &Value, action: JobAction) -> Result<Output, ToolError> {
    let id = input
        .get("job_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let outcome = match action {
        JobAction::Output => job_output(id),
        JobAction::Kill => job_kill(id),
    }
    .map_err(|m| ToolError::new("no-such-job", m))?;
    let what = format!("job {id}");
    if action == JobAction::Kill && outcome.state == State::Killed {
        return Ok(to_output(outcome, &what));
    }
    to_result(outcome, &what)
}

/// How a command's outcome ends the call: `ok` when it exited with status 0 or is still
/// running (a background job); otherwise an error that still shows the whole outcome (output,
/// totals, `data`): `exit-status` for a non-zero exit (`data.exit_code`), `signal` when a
/// signal ended it (`data.signal`; also a command the host killed without being asked),
/// `timeout` when its timeout killed it. `what` names it in the summary (`` `false` ``).
pub fn to_result(o: Outcome, what: &str) -> Result<Output, ToolError> {
    let code = match (o.state, o.exit_code, o.signal) {
        (State::Running, _, _) | (State::Exited, Some(0), _) => return Ok(to_output(o, what)),
        (State::TimedOut, _, _) => "timeout",
        (State::Exited, None, Some(_)) | (State::Killed, _, _) => "signal",
        (State::Exited, _, _) => "exit-status",
    };
    let message = summary(&o, what);
    Err(ToolError::with_output(code, message, to_output(o, what)))
}

/// The conventional name of a signal number, when it has a common one.
fn signal_name(s: i32) -> Option<&'static str> {
    Some(match s {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return None,
    })
}

/// `what` for a command: its text in backticks, cut to its first line and 80 characters.
pub fn command_label(text: &str) -> String {
    let text = text.trim();
    let first = text.lines().next().unwrap_or_default();
    let mut label: String = first.chars().take(80).collect();
    if label.len() < text.len() {
        label.push('…');
    }
    format!("`{label}`")
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
    let summary = summary(&o, what);
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

/// The one-line summary of an outcome; `what` names the command or job.
fn summary(o: &Outcome, what: &str) -> String {
    let ms = o.duration_ms;
    match o.state {
        State::Exited => match (o.exit_code, o.signal) {
            (Some(c), _) => format!("{what} exited with status {c} after {ms} ms"),
            (None, Some(s)) => match signal_name(s) {
                Some(name) => {
                    format!("{what} was killed by signal {s} ({name}) after {ms} ms")
                }
                None => format!("{what} was killed by signal {s} after {ms} ms"),
            },
            _ => format!(
                "{what} ended without an exit status after {ms} ms (the host lost it; its \
                 process group was killed)"
            ),
        },
        State::Running => format!(
            "{what} is still running as background job {} ({ms} ms so far); read it with \
             job_output",
            o.job_id.as_deref().unwrap_or("?"),
        ),
        State::TimedOut => {
            format!("{what} timed out after {ms} ms; its whole process group was killed")
        }
        State::Killed => format!("{what} was killed after {ms} ms"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::output::ERROR_OUTPUT_KEY;

    fn stream(text: &str) -> StreamOutput {
        StreamOutput {
            preview: text.to_string(),
            truncated: false,
            total_bytes: text.len() as u64,
            total_lines: text.lines().count() as u64,
        }
    }

    fn outcome(state: State, exit_code: Option<i32>, signal: Option<i32>) -> Outcome {
        Outcome {
            state,
            exit_code,
            signal,
            stdout: stream("out\n"),
            stderr: stream("err\n"),
            duration_ms: 7,
            job_id: None,
            full_output_ref: None,
            data: r#"{"confinement": {"landlock": true}}"#.to_string(),
        }
    }

    /// The error's wire form: code, message, and the output it carries.
    fn wire(e: ToolError) -> (String, String, Value) {
        let w = e.into_wit();
        let data: Value = serde_json::from_str(&w.data).unwrap();
        (w.code, w.message, data)
    }

    #[test]
    fn exit_zero_and_running_are_ok() {
        let ok = to_result(outcome(State::Exited, Some(0), None), "`true`").unwrap();
        assert_eq!(
            ok.into_wit().summary,
            "`true` exited with status 0 after 7 ms"
        );
        let mut running = outcome(State::Running, None, None);
        running.job_id = Some("job-1".into());
        let summary = to_result(running, "`sleep 9`").unwrap().into_wit().summary;
        assert!(summary.contains("background job job-1"), "{summary}");
    }

    #[test]
    fn a_non_zero_exit_is_an_error_that_keeps_the_whole_output() {
        let o = outcome(State::Exited, Some(3), None);
        let shown = to_output(o.clone(), "`x`").to_json();
        let e = to_result(o, "`x`").unwrap_err();
        let (code, message, data) = wire(e);
        assert_eq!(code, "exit-status");
        assert_eq!(message, "`x` exited with status 3 after 7 ms");
        // Exactly what the ok observation would have shown.
        assert_eq!(data[ERROR_OUTPUT_KEY], shown);
        assert_eq!(shown["content"], "out\n[stderr]\nerr\n");
        assert_eq!(shown["data"]["exit_code"], 3);
        assert_eq!(shown["data"]["confinement"]["landlock"], true);
        assert_eq!(
            shown["totals"][0],
            json!({"unit": "stdout_bytes", "seen": 4, "returned": 4})
        );
    }

    #[test]
    fn signals_timeouts_and_lost_commands_are_errors() {
        let cases = [
            (
                outcome(State::Exited, None, Some(9)),
                "signal",
                "signal 9 (SIGKILL)",
            ),
            (
                outcome(State::TimedOut, None, Some(9)),
                "timeout",
                "timed out",
            ),
            (
                outcome(State::Killed, None, Some(9)),
                "signal",
                "was killed",
            ),
            (
                outcome(State::Exited, None, None),
                "exit-status",
                "without an exit status",
            ),
        ];
        for (o, want, says) in cases {
            let (code, message, data) = wire(to_result(o, "`c`").unwrap_err());
            assert_eq!(code, want, "{message}");
            assert!(message.contains(says), "{message}");
            assert_eq!(data[ERROR_OUTPUT_KEY]["content"], "out\n[stderr]\nerr\n");
        }
    }

    #[test]
    fn command_labels_are_one_short_line() {
        assert_eq!(command_label("false"), "`false`");
        assert_eq!(command_label("echo a\nexit 3"), "`echo a…`");
        let long = "x".repeat(100);
        assert_eq!(command_label(&long), format!("`{}…`", "x".repeat(80)));
    }
}
