//! The gate: SPEC §5 top to bottom for one call. Validate the input, check every path's scope,
//! decide, build the call's capabilities, run the component, and turn whatever happened into an
//! observation. Every step is audited.

pub mod scope;

use crate::error::{Error, Result};
use crate::sandbox::{wit, Capabilities, GuestResult, Limits, Preopen, Sandbox};
use crate::state::{redact, FileStamp, StateDb};
use crate::tools::observation::cut_head_tail;
use crate::tools::registry::{PathUse, RegisteredTool};
use crate::tools::{Observation, Registry, Risk, Status, ToolInfo, Total};
use scope::{ScopedPath, Workspace, GUEST_ROOT, OUTPUTS_DIR};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// How to open a gate.
#[derive(Clone, Debug, Default)]
pub struct GateOptions {
    /// The workspace root.
    pub workspace: PathBuf,
    /// Per-call limits.
    pub limits: Limits,
    /// Where compiled components are cached (`None`: `$TOOLGATE_CACHE_DIR`, else the user's
    /// cache directory).
    pub cache_dir: Option<PathBuf>,
    /// Let write tools run. Until the permission ladder lands this explicit switch is the only
    /// way to enable them.
    pub allow_writes: bool,
    /// Extra component files to serve besides the built-ins.
    pub extra_components: Vec<PathBuf>,
    /// Secret patterns added to the default deny-list.
    pub extra_secrets: Vec<String>,
}

/// One workspace's gate: the tools, the sandbox and the state.
pub struct Gate {
    workspace: Workspace,
    state: StateDb,
    sandbox: Sandbox,
    registry: Registry,
    options: GateOptions,
    denied_globs: Vec<String>,
}

/// A ladder decision and what it is based on, as audited.
struct Decision {
    decision: &'static str,
    stage: &'static str,
    source: String,
}

impl Gate {
    /// Open the gate for a workspace: load the tools and the state database.
    pub async fn open(options: GateOptions) -> Result<Self> {
        let workspace = Workspace::new(&options.workspace, &options.extra_secrets)?;
        let state = StateDb::open(&workspace.state_dir().join("state.db"))?;
        let sandbox = Sandbox::new(options.cache_dir.clone())?;
        let mut registry = Registry::builtins(&sandbox, &options.limits).await?;
        for file in &options.extra_components {
            registry.add_file(&sandbox, &options.limits, file).await?;
        }
        let denied_globs = workspace.guest_denied_globs();
        Ok(Gate {
            workspace,
            state,
            sandbox,
            registry,
            options,
            denied_globs,
        })
    }

    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The state database.
    pub fn state(&self) -> &StateDb {
        &self.state
    }

    /// Every tool this gate serves.
    pub fn tools(&self) -> impl Iterator<Item = &ToolInfo> {
        self.registry.iter()
    }

    /// Run one call for `session`. Never fails: every outcome is an observation.
    #[tracing::instrument(skip_all, fields(tool = %tool_name))]
    pub async fn call(&self, session: &str, tool_name: &str, input: Value) -> Observation {
        let call_id = new_call_id();
        let started = Instant::now();
        let input_sha = hex::encode(Sha256::digest(input.to_string().as_bytes()));
        let mut events: Vec<(&str, Value)> = vec![(
            "intent",
            json!({ "input": redact(&input), "input_sha256": input_sha }),
        )];
        let _ = self.state.touch_session(session);

        let observation = match self.prepare(session, tool_name, input, &call_id) {
            Err((decision, observation)) => {
                events.push(("decision", decision_event(&decision, &observation)));
                observation
            }
            Ok(prepared) => {
                let decision = Decision {
                    decision: "allow",
                    stage: prepared.stage,
                    source: prepared.source.clone(),
                };
                events.push(("decision", json!({
                    "decision": decision.decision, "stage": decision.stage, "source": decision.source,
                })));
                events.push(("started", json!({})));
                if let Err(e) = self.state.audit(&call_id, session, tool_name, &events) {
                    tracing::warn!(error = %e, "audit write failed");
                }
                events.clear();
                self.run(session, prepared, &call_id).await
            }
        };
        let elapsed = started.elapsed();
        events.push((
            "completed",
            json!({
                "status": observation.status.as_str(),
                "summary": observation.summary,
                "error_code": observation.error_code,
                "duration_us": u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
                "truncated": observation.truncated,
            }),
        ));
        if let Err(e) = self.state.audit(&call_id, session, tool_name, &events) {
            tracing::warn!(error = %e, "audit write failed");
        }
        observation
    }

    /// Stages 1–2 and the decision: everything before the guest runs.
    fn prepare(
        &self,
        session: &str,
        tool_name: &str,
        mut input: Value,
        call_id: &str,
    ) -> Result<Prepared, (Decision, Observation)> {
        let error = |stage: &'static str, o: Observation| {
            (
                Decision {
                    decision: "error",
                    stage,
                    source: "input".into(),
                },
                o,
            )
        };
        let Some(tool) = self.registry.get(tool_name) else {
            return Err(error(
                "schema",
                Observation::error(
                    tool_name,
                    call_id,
                    "unknown-tool",
                    format!("there is no tool `{tool_name}`"),
                    Some(format!("available tools: {}", self.registry.names().join(", "))),
                ),
            ));
        };

        // Stage 1: schema.
        if let Some(message) = schema_errors(&tool, &input) {
            return Err(error(
                "schema",
                Observation::error(
                    tool_name,
                    call_id,
                    "schema",
                    message,
                    Some(format!("see `toolgate tools --json` for the input schema of `{tool_name}`")),
                ),
            ));
        }

        // Stage 2: scope, rewriting each path to what the guest will open.
        let mut paths = Vec::new();
        for (field, usage) in &tool.info.path_fields {
            let Some(raw) = input.get(field).and_then(Value::as_str).map(str::to_string) else {
                continue;
            };
            match self.workspace.scope(&raw, usage.access()) {
                Ok(scoped) => {
                    input[field] = Value::String(scoped.guest.clone());
                    paths.push((field.clone(), *usage, scoped));
                }
                Err(denial) => {
                    let o = Observation::denied(tool_name, call_id, "scope", denial.reason, denial.hint);
                    return Err((
                        Decision {
                            decision: "deny",
                            stage: "scope",
                            source: format!("path `{field}`"),
                        },
                        o,
                    ));
                }
            }
        }

        // The decision. Until the permission ladder lands: read tools inside the scope need no
        // grant; write tools need the explicit switch; nothing else runs.
        let (stage, source) = match tool.info.risk {
            Risk::ReadOnly => ("no-permission", "read-only tool inside the scope".to_string()),
            Risk::Write if self.options.allow_writes => ("flag", "--allow-write".to_string()),
            risk => {
                let hint = match risk {
                    Risk::Write => "write tools are off: run with `--allow-write` to enable them".to_string(),
                    _ => format!("`{}` tools cannot run yet", risk.as_str()),
                };
                let o = Observation::denied(
                    tool_name,
                    call_id,
                    "mode",
                    format!("`{tool_name}` is a {} tool", risk.as_str()),
                    hint,
                );
                return Err((
                    Decision {
                        decision: "deny",
                        stage: "mode",
                        source: "default".into(),
                    },
                    o,
                ));
            }
        };

        // Read-before-write: the session must have seen the file as it is now.
        let mut before = Vec::new();
        for (_, usage, scoped) in &paths {
            if *usage != PathUse::Write {
                continue;
            }
            if scoped.host.is_dir() {
                return Err(error(
                    "scope",
                    Observation::error(
                        tool_name,
                        call_id,
                        "is-directory",
                        format!("{} is a directory", scoped.rel),
                        Some("give the path of a file".into()),
                    ),
                ));
            }
            if !scoped.host.exists() {
                before.push((scoped.clone(), None));
                continue;
            }
            let current = match FileStamp::of(&scoped.host) {
                Ok(c) => c,
                Err(e) => {
                    return Err(error(
                        "scope",
                        Observation::error(tool_name, call_id, "io", e.to_string(), None),
                    ))
                }
            };
            match self.state.last_read(session, &scoped.host) {
                Ok(Some(seen)) if seen.same_content(&current.0) => {}
                Ok(Some(seen)) => {
                    return Err(error(
                        "staleness",
                        Observation::error(
                            tool_name,
                            call_id,
                            "stale",
                            format!(
                                "{} changed since it was last read in this session ({} -> {} bytes)",
                                scoped.rel, seen.size, current.0.size
                            ),
                            Some(format!("read {} again, then retry the change against what it contains now", scoped.rel)),
                        ),
                    ))
                }
                Ok(None) => {
                    return Err(error(
                        "staleness",
                        Observation::error(
                            tool_name,
                            call_id,
                            "not-read",
                            format!("{} has not been read in this session", scoped.rel),
                            Some(format!("call `read` on {} first, so the change is made against what it contains", scoped.rel)),
                        ),
                    ))
                }
                Err(e) => {
                    return Err(error(
                        "staleness",
                        Observation::error(tool_name, call_id, "state", e.to_string(), None),
                    ))
                }
            }
            before.push((scoped.clone(), Some(current)));
        }

        Ok(Prepared {
            tool,
            input,
            paths,
            before,
            stage,
            source,
        })
    }

    /// Build the capabilities, run the guest, and record what it did.
    async fn run(&self, session: &str, p: Prepared, call_id: &str) -> Observation {
        let name = p.tool.info.name.clone();
        let mut caps = Capabilities {
            preopens: vec![Preopen {
                host: self.workspace.root().to_path_buf(),
                guest: GUEST_ROOT.to_string(),
                writable: false,
            }],
        };
        for (scoped, current) in &p.before {
            let (Some(parent), Some(guest_parent)) = (scoped.host.parent(), guest_parent(&scoped.guest)) else {
                return Observation::error(&name, call_id, "scope", format!("{} has no parent directory", scoped.rel), None);
            };
            if let Err(e) = std::fs::create_dir_all(parent) {
                return Observation::error(&name, call_id, "io", Error::io(parent, e).to_string(), None);
            }
            caps.preopens.push(Preopen {
                host: parent.to_path_buf(),
                guest: guest_parent,
                writable: true,
            });
            let snapshot = current.as_ref().map(|(stamp, bytes)| (stamp.sha256.as_str(), bytes.as_slice()));
            if let Err(e) = self.state.history_before_write(&scoped.host, snapshot, call_id) {
                tracing::warn!(error = %e, "history write failed");
            }
        }

        // What `read` shows the model is recorded from the host's own look at the file.
        let read_stamp = if p.tool.info.builtin && name == "read" {
            p.paths
                .iter()
                .find(|(_, u, s)| *u == PathUse::Read && s.host.is_file())
                .and_then(|(_, _, s)| FileStamp::of(&s.host).ok().map(|(stamp, _)| (s.host.clone(), stamp)))
        } else {
            None
        };

        let context = wit::CallContext {
            workspace_root: GUEST_ROOT.to_string(),
            max_output_bytes: u64::try_from(self.options.limits.max_output_bytes).unwrap_or(u64::MAX),
            denied_globs: self.denied_globs.clone(),
        };
        let input = p.input.to_string();
        let result = self
            .sandbox
            .call(&p.tool.loaded, &caps, &self.options.limits, &input, &context)
            .await;
        let mut observation = match result {
            Err(e) => limit_or_crash(&name, call_id, e),
            Ok(GuestResult::ToolError(e)) => {
                let mut o = Observation::error(&name, call_id, &e.code, e.message, None);
                o.data = parse_data(&e.data);
                o
            }
            Ok(GuestResult::Output(out)) => self.ok_observation(&name, call_id, out),
        };
        if observation.status == Status::Ok {
            if let Some((path, stamp)) = read_stamp {
                if let Err(e) = self.state.record_read(session, &path, &stamp) {
                    tracing::warn!(error = %e, "read record failed");
                }
            }
            for (scoped, _) in &p.before {
                match FileStamp::of(&scoped.host) {
                    Ok((stamp, bytes)) => {
                        let _ = self.state.record_read(session, &scoped.host, &stamp);
                        let _ = self.state.history_after_write(&scoped.host, &stamp.sha256, &bytes, call_id);
                    }
                    Err(e) => tracing::warn!(error = %e, "stamping a written file failed"),
                }
            }
        }
        observation.audit_id = call_id.to_string();
        observation
    }

    fn ok_observation(&self, name: &str, call_id: &str, out: wit::Output) -> Observation {
        let mut o = Observation::new(name, Status::Ok, call_id);
        o.summary = out.summary;
        o.truncated = out.truncated;
        o.data = parse_data(&out.data);
        for t in out.totals {
            o.totals.insert(t.unit, Total { seen: t.seen, returned: t.returned });
        }
        let max = self.options.limits.max_output_bytes;
        if out.content.len() > max {
            let rel = format!("{OUTPUTS_DIR}/{call_id}.txt");
            let file = self.workspace.root().join(&rel);
            let saved = file
                .parent()
                .map(std::fs::create_dir_all)
                .unwrap_or(Ok(()))
                .and_then(|_| crate::fsutil::write_atomic(&file, out.content.as_bytes()));
            let reference = if saved.is_ok() { rel.clone() } else { "(could not be saved)".into() };
            if let Some(cut) = cut_head_tail(&out.content, max, &reference) {
                o.totals.insert(
                    "bytes".into(),
                    Total {
                        seen: out.content.len() as u64,
                        returned: cut.len() as u64,
                    },
                );
                o.content = cut;
                o.truncated = true;
                if saved.is_ok() {
                    o.full_output_ref = Some(rel);
                }
            }
        } else {
            o.content = out.content;
        }
        o
    }
}

/// Everything decided before the guest runs.
struct Prepared {
    tool: std::sync::Arc<RegisteredTool>,
    input: Value,
    paths: Vec<(String, PathUse, ScopedPath)>,
    /// Each written path and, when it exists, its stamp and content before the call.
    before: Vec<(ScopedPath, Option<(FileStamp, Vec<u8>)>)>,
    stage: &'static str,
    source: String,
}

fn decision_event(d: &Decision, o: &Observation) -> Value {
    json!({
        "decision": d.decision,
        "stage": d.stage,
        "source": d.source,
        "reason": o.reason,
    })
}

/// Every schema error, one per line, each naming the field.
fn schema_errors(tool: &RegisteredTool, input: &Value) -> Option<String> {
    if !input.is_object() {
        return Some(format!("the input of `{}` must be a JSON object", tool.info.name));
    }
    let errors: Vec<String> = tool
        .validator
        .iter_errors(input)
        .take(5)
        .map(|e| {
            let at = e.instance_path.to_string();
            let field = if at.is_empty() { "input".to_string() } else { format!("input{}", at.replace('/', ".")) };
            format!("{field}: {e}")
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("\n"))
}

fn guest_parent(guest: &str) -> Option<String> {
    let i = guest.rfind('/')?;
    let parent = &guest[..i];
    (!parent.is_empty()).then(|| parent.to_string())
}

fn parse_data(data: &str) -> Value {
    if data.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_string()))
}

fn limit_or_crash(name: &str, call_id: &str, e: Error) -> Observation {
    match e {
        Error::Limit { limit, message } => {
            let mut o = Observation::error(
                name,
                call_id,
                "limit",
                message,
                Some(format!("the `{limit}` limit stopped the tool; narrow the request, or raise `limits.{limit}` in .toolgate/policy.toml if it is legitimate")),
            );
            o.data = json!({ "limit": limit });
            o
        }
        other => Observation::error(name, call_id, "crashed", other.to_string(), None),
    }
}

fn new_call_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(n);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    format!("call-{:016x}", h.finish())
}

