//! The hook runner behind the ladder's hooks stage: PreToolUse hooks.
//!
//! A hook is an external command the policy configures. Before a call runs, every hook that
//! applies to the tool runs once (identical commands are deduplicated), all of them in parallel,
//! each in its own process group with a scrubbed environment, the event as JSON on stdin and the
//! workspace root as its working directory. It answers with its exit code:
//!
//! - `0`: no opinion, or a JSON object on stdout: `{"decision": "allow" | "deny" | "ask",
//!   "reason": "...", "updated_input": {...}}` (every field optional; `ask` is no opinion).
//! - `2`: deny this call; stderr (trimmed) is the reason.
//! - `49`: deny this call and halt the turn; stderr is the reason.
//!
//! Unlike Crush, anything else fails closed: a hook that cannot be started, exits with another
//! code, dies from a signal, times out or prints something other than a JSON object on exit 0
//! (a key repeated in any object, at any depth, makes it invalid) denies the call, unless that
//! hook is configured with `fail_open = true` (then it has no opinion). Verdicts merge
//! deny > allow > none; halt is sticky; `updated_input` objects from the hooks that did not deny
//! are shallow-merged in configuration order (later keys win).
//!
//! A hook `allow` only skips the prompt: the caller still applies stages 2–4 (and re-validates
//! the merged input from stage 1); an allow that came with an `updated_input` applies to the
//! patched input once that has passed stages 1–4 again.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// The only event there is.
pub const PRE_TOOL_USE: &str = "PreToolUse";

/// Exit code that denies the call: stderr is the reason.
pub const DENY_EXIT_CODE: i32 = 2;

/// Exit code that denies the call and halts the turn (chosen to avoid the generic error range
/// 1–30, sysexits 64–78 and signal exits 128+).
pub const HALT_EXIT_CODE: i32 = 49;

/// At most this much of a hook's stdout and of its stderr is kept (the rest is drained).
pub const OUTPUT_CAP: usize = 64 * 1024;

/// Parent environment variables a hook inherits; everything else is scrubbed.
pub use crate::exec::process::HOOK_ENV_ALLOWLIST as ENV_ALLOWLIST;

/// The variable that tells a hook which event it runs for.
pub const EVENT_ENV: &str = "TOOLGATE_HOOK_EVENT";

/// How long to wait for a killed hook to be reaped before giving up on it.
const REAP_GRACE: Duration = Duration::from_secs(1);

pub use crate::policy::hooks::{HookSpec, DEFAULT_TIMEOUT_MS};

/// What the hooks are told about the call.
pub struct HookEvent<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The call's permission key.
    pub key: &'a str,
    /// The session id.
    pub session: &'a str,
    /// The call's (validated) input.
    pub input: &'a Value,
    /// The workspace root (the hooks' working directory).
    pub workspace: &'a Path,
}

/// The merged verdict of all hooks.
#[derive(Debug, Clone, PartialEq)]
pub enum HookVerdict {
    /// No hook had an opinion (or none ran).
    None,
    /// At least one hook allowed and none denied: skip the prompt.
    Allow {
        /// The first allowing hook.
        by: String,
    },
    /// At least one hook denied.
    Deny {
        /// The first denying hook.
        by: String,
        /// The reasons of all denying hooks, joined with "; ".
        reason: String,
        /// Whether any denying hook asked to halt the turn.
        halt: bool,
    },
}

/// Everything the hooks decided for one call.
#[derive(Debug, Clone, PartialEq)]
pub struct HookOutcome {
    /// The merged verdict.
    pub verdict: HookVerdict,
    /// The merged `updated_input` patch (shallow, later hooks win), if any hook gave one.
    pub updated_input: Option<Value>,
    /// The hooks that ran (by name, in configuration order, deduplicated), for the audit.
    pub ran: Vec<String>,
}

/// What one hook said.
#[derive(Debug, Clone, PartialEq)]
enum Single {
    None { patch: Option<Map<String, Value>> },
    Allow { patch: Option<Map<String, Value>> },
    Deny { reason: String, halt: bool },
}

/// What a hook prints on stdout when it exits 0.
#[derive(Deserialize)]
struct HookOutput {
    #[serde(default)]
    decision: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    updated_input: Option<Value>,
}

/// How one hook's process ended.
enum Ended {
    Exited {
        status: ExitStatus,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    SpawnFailed(std::io::Error),
    /// Not started: a file it names is not what the user trusted (whatever `fail_open`).
    Refused(String),
    WaitFailed(std::io::Error),
    /// `exited`: the hook itself had exited, but its output pipes were still held open.
    TimedOut {
        exited: bool,
    },
}

/// Run every PreToolUse hook that applies to `event.tool` and merge their verdicts.
pub async fn run_pre_tool_use(hooks: &[HookSpec], event: &HookEvent<'_>) -> HookOutcome {
    let mut selected: Vec<&HookSpec> = Vec::new();
    for hook in hooks.iter().filter(|h| h.applies_to(event.tool)) {
        if !selected.iter().any(|s| s.command == hook.command) {
            selected.push(hook);
        }
    }
    if selected.is_empty() {
        return HookOutcome {
            verdict: HookVerdict::None,
            updated_input: None,
            ran: Vec::new(),
        };
    }

    let payload = json!({
        "hook_event": PRE_TOOL_USE,
        "tool": event.tool,
        "key": event.key,
        "session": event.session,
        "input": event.input,
        "workspace": event.workspace.to_string_lossy(),
    });
    let payload = match serde_json::to_vec(&payload) {
        Ok(mut bytes) => {
            bytes.push(b'\n');
            std::sync::Arc::new(bytes)
        }
        // Serialising a `Value` cannot fail in practice; if it does, every hook gets nothing.
        Err(_) => std::sync::Arc::new(Vec::new()),
    };

    let handles: Vec<_> = selected
        .iter()
        .map(|hook| {
            let hook = (*hook).clone();
            let payload = std::sync::Arc::clone(&payload);
            let workspace = event.workspace.to_path_buf();
            tokio::spawn(async move { run_one(&hook, &payload, &workspace).await })
        })
        .collect();

    let mut results = Vec::with_capacity(handles.len());
    for (hook, handle) in selected.iter().zip(handles) {
        let single = match handle.await {
            Ok(single) => single,
            Err(err) => failure(hook, &format!("crashed in the host ({err})")),
        };
        results.push((hook.name(), single));
    }
    merge(results)
}

/// Merge per-hook results (in configuration order).
fn merge(results: Vec<(String, Single)>) -> HookOutcome {
    let mut deny_by: Option<String> = None;
    let mut reasons: Vec<String> = Vec::new();
    let mut halt = false;
    let mut allow_by: Option<String> = None;
    let mut patch: Option<Map<String, Value>> = None;
    let mut ran = Vec::with_capacity(results.len());
    for (name, single) in results {
        match single {
            Single::Deny { reason, halt: h } => {
                if deny_by.is_none() {
                    deny_by = Some(name.clone());
                }
                reasons.push(reason);
                halt |= h;
            }
            Single::Allow { patch: p } => {
                if allow_by.is_none() {
                    allow_by = Some(name.clone());
                }
                merge_patch(&mut patch, p);
            }
            Single::None { patch: p } => merge_patch(&mut patch, p),
        }
        ran.push(name);
    }
    let verdict = match (deny_by, allow_by) {
        (Some(by), _) => HookVerdict::Deny {
            by,
            reason: reasons.join("; "),
            halt,
        },
        (None, Some(by)) => HookVerdict::Allow { by },
        (None, None) => HookVerdict::None,
    };
    HookOutcome {
        verdict,
        updated_input: patch.map(Value::Object),
        ran,
    }
}

fn merge_patch(acc: &mut Option<Map<String, Value>>, patch: Option<Map<String, Value>>) {
    if let Some(patch) = patch {
        acc.get_or_insert_with(Map::new).extend(patch);
    }
}

/// A hook failure: deny, unless the hook fails open.
fn failure(hook: &HookSpec, what: &str) -> Single {
    if hook.fail_open {
        tracing::warn!(hook = %hook.name(), "hook failed open: {what}");
        Single::None { patch: None }
    } else {
        Single::Deny {
            reason: format!("hook `{}` {what}", hook.name()),
            halt: false,
        }
    }
}

fn denied_without_reason(hook: &HookSpec) -> String {
    format!("hook `{}` denied without a reason", hook.name())
}

fn stderr_reason(hook: &HookSpec, stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let text = text.trim();
    if text.is_empty() {
        denied_without_reason(hook)
    } else {
        text.to_string()
    }
}

/// Run one hook and interpret how it ended.
async fn run_one(hook: &HookSpec, payload: &[u8], workspace: &Path) -> Single {
    match execute(hook, payload, workspace).await {
        Ended::SpawnFailed(err) => failure(hook, &format!("could not be started: {err}")),
        Ended::Refused(why) => Single::Deny {
            reason: format!("hook `{}` {why}", hook.name()),
            halt: false,
        },
        Ended::WaitFailed(err) => failure(hook, &format!("could not be waited for: {err}")),
        Ended::TimedOut { exited: false } => {
            failure(hook, &format!("timed out after {} ms", hook.timeout_ms))
        }
        Ended::TimedOut { exited: true } => failure(
            hook,
            &format!(
                "timed out after {} ms (it exited, but processes it started kept its output open)",
                hook.timeout_ms
            ),
        ),
        Ended::Exited {
            status,
            stdout,
            stderr,
        } => match status.code() {
            Some(0) => parse_output(hook, &stdout),
            Some(DENY_EXIT_CODE) => Single::Deny {
                reason: stderr_reason(hook, &stderr),
                halt: false,
            },
            Some(HALT_EXIT_CODE) => Single::Deny {
                reason: stderr_reason(hook, &stderr),
                halt: true,
            },
            Some(code) => failure(
                hook,
                &with_stderr(format!("exited with code {code}"), &stderr),
            ),
            None => {
                let what = match status.signal() {
                    Some(sig) => format!("was killed by signal {sig}"),
                    None => "ended without an exit code".to_string(),
                };
                failure(hook, &with_stderr(what, &stderr))
            }
        },
    }
}

/// Append the first line of stderr (if any) to a failure description.
fn with_stderr(what: String, stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    match text.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => {
            let line: String = line.chars().take(200).collect();
            format!("{what}: {line}")
        }
        None => what,
    }
}

/// Interpret stdout of a hook that exited 0.
fn parse_output(hook: &HookSpec, stdout: &[u8]) -> Single {
    if stdout.len() >= OUTPUT_CAP {
        return failure(
            hook,
            &format!("printed more than {} KiB on stdout", OUTPUT_CAP / 1024),
        );
    }
    let text = match std::str::from_utf8(stdout) {
        Ok(text) => text,
        Err(err) => return failure(hook, &format!("printed output that is not UTF-8: {err}")),
    };
    if text.trim().is_empty() {
        return Single::None { patch: None };
    }
    // Duplicate keys (at any depth) are invalid: serde_json alone would keep the last one.
    let value: Value = match parse_strict(text) {
        Ok(value) => value,
        Err(err) => return failure(hook, &format!("printed invalid JSON: {err}")),
    };
    if !value.is_object() {
        return failure(hook, "printed JSON that is not an object");
    }
    let output: HookOutput = match serde_json::from_value(value) {
        Ok(output) => output,
        Err(err) => return failure(hook, &format!("printed invalid JSON: {err}")),
    };
    let patch = match output.updated_input {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(map),
        Some(_) => return failure(hook, "printed an `updated_input` that is not an object"),
    };
    match output.decision.as_deref() {
        None | Some("ask") => Single::None { patch },
        Some("allow") => Single::Allow { patch },
        Some("deny") => Single::Deny {
            reason: match output.reason.as_deref().map(str::trim) {
                Some(r) if !r.is_empty() => r.to_string(),
                _ => denied_without_reason(hook),
            },
            halt: false,
        },
        Some(other) => failure(hook, &format!("printed an unknown decision `{other}`")),
    }
}

/// Parse `text` as JSON, refusing an object that repeats a key at any depth.
///
/// serde_json keeps the last of duplicate keys, so `{"decision":"deny","decision":"allow"}`
/// would read as allow while another parser (or a human reading the hook's log) sees deny.
/// The value is built through [`StrictValue`], whose map visitor errors on a repeated key;
/// serde_json's own recursion limit still applies. No extra dependency.
fn parse_strict(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue::deserialize(&mut de)?.0;
    de.end()?;
    Ok(value)
}

/// A JSON value deserialized with duplicate object keys rejected (see [`parse_strict`]).
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // `Value::from` maps a non-finite float to null; JSON text cannot produce one anyway.
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                // Escaped and cut short: the key is the hook's text and goes into the reason.
                let shown: String = key.chars().take(80).collect();
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    shown.escape_debug()
                )));
            }
            let StrictValue(value) = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

/// Spawn the hook, feed it the event, collect capped output, enforce the timeout.
async fn execute(hook: &HookSpec, payload: &[u8], workspace: &Path) -> Ended {
    let argv = match crate::policy::hooks::verified_argv(hook, workspace) {
        Ok(argv) => argv,
        Err(why) => return Ended::Refused(why),
    };
    let mut cmd = Command::new(&argv.program);
    cmd.arg0(&argv.arg0)
        .args(&argv.args)
        .current_dir(workspace)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    crate::policy::hooks::inherit(cmd.as_std_mut(), &argv.fds);
    for name in ENV_ALLOWLIST {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.env(EVENT_ENV, PRE_TOOL_USE);

    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => return Ended::SpawnFailed(err),
    };
    // Taken now: once the child is reaped `id()` is gone, but its group may live on.
    let pid = child.id();
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();

    let mut out = Vec::new();
    let mut err = Vec::new();
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    let timeout = Duration::from_millis(hook.timeout_ms);
    let finished = tokio::time::timeout(timeout, async {
        let feed = async {
            if let Some(mut stdin) = stdin {
                // A hook may exit without reading its input: EPIPE is fine.
                let _ = stdin.write_all(payload).await;
                let _ = stdin.shutdown().await;
                drop(stdin);
            }
        };
        let wait = async {
            status = Some(child.wait().await);
        };
        tokio::join!(
            feed,
            read_capped(stdout, &mut out),
            read_capped(stderr, &mut err),
            wait
        );
    })
    .await;

    match finished {
        Ok(()) => match status {
            Some(Ok(status)) => Ended::Exited {
                status,
                stdout: out,
                stderr: err,
            },
            Some(Err(e)) => {
                kill_group(&mut child, pid).await;
                Ended::WaitFailed(e)
            }
            None => Ended::WaitFailed(std::io::Error::other("no exit status")),
        },
        Err(_) => {
            // The hook, or something it left behind holding its pipes, outlived its timeout.
            let exited = matches!(status, Some(Ok(_)));
            kill_group(&mut child, pid).await;
            Ended::TimedOut { exited }
        }
    }
}

/// Read `reader` to EOF, keeping at most [`OUTPUT_CAP`] bytes and draining the rest so the hook
/// never blocks on a full pipe.
async fn read_capped<R: AsyncRead + Unpin>(reader: Option<R>, into: &mut Vec<u8>) {
    let Some(mut reader) = reader else { return };
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let room = OUTPUT_CAP.saturating_sub(into.len());
                into.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

/// Kill the hook's whole process group (it leads its own group), then the hook itself, and reap
/// it.
async fn kill_group(child: &mut Child, pid: Option<u32>) {
    if let Some(pid) = pid {
        let pgid = i32::try_from(pid).unwrap_or(0);
        if let Err(error) = crate::exec::process::try_kill_group(pgid) {
            tracing::warn!(pid, %error, "could not kill hook process group");
        }
    }
    let _ = child.start_kill();
    let _ = tokio::time::timeout(REAP_GRACE, child.wait()).await;
}

#[cfg(test)]
#[path = "hooks_tests.rs"]
mod tests;
