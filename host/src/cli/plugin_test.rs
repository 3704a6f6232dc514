//! `toolgate plugin test NAME JSON`: one call of an installed plugin with what its manifest
//! requests granted for this run, printing what it touched (files and directories, hosts),
//! what the host refused, and which requested capabilities it never used.
//!
//! It runs without asking because the user typed it, and it cannot exceed the manifest: the
//! call goes through the same gate as `toolgate call plugin__NAME` with a `--grant` of that
//! one tool (schema, path scope, mode and rules as always), the plugin is loaded only if its
//! record verifies (a plugin a repository shipped is refused here too), and it gets requested
//! ∩ granted, inside the workspace, with the deny-list and `.toolgate/` guarded.

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{json, Value};
use std::io::Write;
use std::process::ExitCode;
use toolgate::plugins::{PluginGrant, PluginStore, Record};
use toolgate::sandbox::net::HostPattern;
use toolgate::sandbox::trace::{self, FsEvent, NetEvent, Outcome, Trace, TraceHandle};
use toolgate::{Gate, GateOptions, Observation, Status};

/// `toolgate plugin test NAME JSON`.
#[derive(Args)]
pub(super) struct TestArgs {
    /// The installed plugin's name (or its tool name, `plugin__NAME`).
    name: String,
    /// The call's input, a JSON object, or `-` to read it from stdin.
    #[arg(value_name = "JSON")]
    input: String,
    /// Print one JSON object (the result, what it touched, the capabilities) instead of text.
    #[arg(long)]
    json: bool,
}

/// The session the test call is made in (nothing was read in it before).
const SESSION: &str = "plugin-test";

pub(super) async fn run(
    args: TestArgs,
    _ws: &toolgate::workspace::Workspace,
    store: &PluginStore,
    opts: GateOptions,
) -> Result<ExitCode> {
    let name = args
        .name
        .strip_prefix(toolgate::plugins::TOOL_PREFIX)
        .unwrap_or(&args.name)
        .to_string();
    let installed = store.list();
    let Some((_, record)) = installed.into_iter().find(|(n, _)| *n == name) else {
        eprintln!(
            "toolgate: no plugin `{name}` is installed in {}; `toolgate plugin list` shows the installed ones, `toolgate plugin add` installs one",
            store.dir().display()
        );
        return Ok(ExitCode::from(2));
    };
    let input = match super::usage_input(Some(&args.input)) {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let tool = toolgate::plugins::tool_name(&name);
    // This one tool, granted for this run only; nothing else is added, nobody is asked.
    let gate = Gate::open(GateOptions {
        grants: vec![tool.clone()],
        approver: None,
        allow_writes: false,
        extra_components: Vec::new(),
        sandbox: toolgate::sandbox::SandboxOptions {
            one_shot: true,
            ..opts.sandbox
        },
        ..opts
    })
    .await
    .context("cannot open the gate")?;
    super::warn_ignored(&gate);
    let handle: TraceHandle = Default::default();
    let observation = trace::scope(handle.clone(), gate.call(SESSION, &tool, input)).await;
    let trace = std::mem::take(&mut *handle.lock().unwrap_or_else(|p| p.into_inner()));
    let report = Report::new(&tool, record.ok().as_ref(), &trace, &observation);
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&report.json(&trace))?
        )?;
    } else {
        write!(out, "{}", report.text(&trace))?;
        writeln!(out, "result (as `toolgate call` prints it):")?;
        writeln!(out, "{}", serde_json::to_string_pretty(&observation)?)?;
    }
    out.flush()?;
    Ok(ExitCode::from(match observation.status {
        Status::Ok => 0,
        Status::Error => 1,
        Status::Denied => 3,
        Status::NeedsApproval => 4,
    }))
}

/// One requested capability and what the call made of it.
struct Use {
    kind: &'static str,
    value: String,
    /// `used`, `unused`, `only-read`, `not-granted`, `given`, `not-set`.
    state: &'static str,
    advice: String,
}

/// Everything printed besides the trace itself.
struct Report {
    tool: String,
    observation: Value,
    refused: Vec<(String, String, String)>,
    uses: Vec<Use>,
    notes: Vec<String>,
}

/// Whether the normalised workspace-relative path `inner` lies in `outer` (`.` holds all).
fn within(inner: &str, outer: &str) -> bool {
    outer == "." || inner == outer || inner.starts_with(&format!("{outer}/"))
}

/// `./a//b/` as `a/b`, `./` as `.`.
fn norm(p: &str) -> String {
    let parts: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

fn touched(e: &FsEvent) -> bool {
    !matches!(e.outcome, Outcome::Refused(_))
}

impl Report {
    fn new(tool: &str, record: Option<&Record>, t: &Trace, o: &Observation) -> Report {
        let mut refused = Vec::new();
        for e in &t.fs {
            if let Outcome::Refused(why) = &e.outcome {
                refused.push((e.op.as_str().to_string(), e.path.clone(), why.clone()));
            }
        }
        for h in &t.hidden {
            refused.push((
                "hidden".into(),
                h.clone(),
                "left out of a directory listing (secrets deny-list or .toolgate/)".into(),
            ));
        }
        for e in &t.net {
            if let Outcome::Refused(why) = &e.outcome {
                refused.push((e.method.clone(), e.target.clone(), why.clone()));
            }
        }
        if o.status == Status::Denied {
            refused.push((
                "call".into(),
                tool.to_string(),
                o.reason.clone().unwrap_or_default(),
            ));
        }
        let mut notes = Vec::new();
        let mut uses = Vec::new();
        if o.error_code.as_deref() == Some("plugin-refused") {
            notes.push(format!(
                "the plugin did not run: it is refused at load, and `plugin test` loads it exactly as every call does ({})",
                o.reason.clone().unwrap_or_default()
            ));
        }
        if let Some(r) = record {
            uses = uses_of(r, t);
            if r.granted != r.capabilities {
                notes.push(format!("[granted] in .toolgate/plugins/{}/plugin.toml narrows what the manifest requests; this run had only what both name, as every call does", r.name));
            }
        }
        if o.status != Status::Ok {
            notes.push("a path outside every mount fails inside the plugin (not found) without reaching the host, so it is not listed above".into());
        }
        if t.dropped > 0 {
            notes.push(format!(
                "{} more operations were not recorded (at most {} are)",
                t.dropped,
                trace::MAX_EVENTS
            ));
        }
        Report {
            tool: tool.to_string(),
            observation: serde_json::to_value(o).unwrap_or(Value::Null),
            refused,
            uses,
            notes,
        }
    }

    fn json(&self, t: &Trace) -> Value {
        json!({
            "tool": self.tool,
            "result": self.observation,
            "mounts": t.mounts,
            "files": t.fs,
            "hidden": t.hidden,
            "hosts": t.net,
            "refused": self.refused.iter().map(|(op, what, why)| json!({"op": op, "what": what, "why": why})).collect::<Vec<_>>(),
            "capabilities": self.uses.iter().map(|u| json!({"kind": u.kind, "value": u.value, "state": u.state, "advice": u.advice})).collect::<Vec<_>>(),
            "notes": self.notes,
        })
    }

    fn text(&self, t: &Trace) -> String {
        let mut s = format!(
            "plugin test {}: one call with what its manifest requests, nothing asked\n",
            self.tool
        );
        if !t.mounts.is_empty() {
            s.push_str("mounted (relative to the workspace):\n");
            for m in &t.mounts {
                let how = if m.writable { "writable" } else { "read-only" };
                s.push_str(&format!("  {:<9} {}\n", how, show(&m.path)));
            }
        }
        s.push_str("files and directories:\n");
        let seen: Vec<&FsEvent> = t.fs.iter().filter(|e| touched(e)).collect();
        if seen.is_empty() {
            s.push_str("  (none)\n");
        }
        for e in seen {
            let to = e.to.as_deref().map(|x| format!(" -> {}", show(x)));
            let failed = match &e.outcome {
                Outcome::Failed(why) => format!("  ({why})"),
                _ => String::new(),
            };
            s.push_str(&format!(
                "  {:<9} {}{}{failed}\n",
                e.op.as_str(),
                show(&e.path),
                to.unwrap_or_default()
            ));
        }
        s.push_str("hosts:\n");
        if t.net.is_empty() {
            s.push_str("  (none)\n");
        }
        for e in &t.net {
            s.push_str(&format!(
                "  {:<7} {}  {}\n",
                e.method,
                e.target,
                net_words(e)
            ));
        }
        s.push_str("refused:\n");
        if self.refused.is_empty() {
            s.push_str("  (nothing)\n");
        }
        for (op, what, why) in &self.refused {
            s.push_str(&format!("  {op:<9} {}  {why}\n", show(what)));
        }
        if !self.uses.is_empty() {
            s.push_str("capabilities requested:\n");
            for u in &self.uses {
                s.push_str(&format!(
                    "  {:<8} `{}`  {}{}\n",
                    u.kind,
                    u.value,
                    u.state,
                    if u.advice.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", u.advice)
                    }
                ));
            }
        }
        for n in &self.notes {
            s.push_str(&format!("note: {n}\n"));
        }
        s
    }
}

/// A name shown plainly (quoted with escapes when it holds anything unusual).
fn show(name: &str) -> String {
    toolgate::text::escape_name(name).into_owned()
}

fn net_words(e: &NetEvent) -> String {
    match (&e.outcome, e.status) {
        (Outcome::Ok, Some(status)) => format!("sent ({status})"),
        (Outcome::Ok, None) => "sent".into(),
        (Outcome::Refused(why), _) => format!("refused: {why}"),
        (Outcome::Failed(why), _) => format!("allowed, failed: {why}"),
    }
}

/// What the call made of each capability the record requests.
fn uses_of(r: &Record, t: &Trace) -> Vec<Use> {
    let effective = PluginGrant::effective(r).ok();
    let granted = |list: &[String], p: &str| {
        list.iter()
            .any(|g| within(&norm(g), p) || within(p, &norm(g)))
    };
    let mut out = Vec::new();
    for raw in &r.capabilities.fs_read {
        let p = norm(raw);
        let used =
            t.fs.iter()
                .any(|e| touched(e) && !e.op.writes() && within(&e.path, &p));
        let ok = effective.as_ref().is_some_and(|g| granted(&g.fs_read, &p));
        out.push(path_use("fs_read", &p, ok, used, false));
    }
    for raw in &r.capabilities.fs_write {
        let p = norm(raw);
        let wrote = t.fs.iter().any(|e| {
            touched(e)
                && e.op.writes()
                && (within(&e.path, &p) || e.to.as_deref().is_some_and(|to| within(to, &p)))
        });
        let read =
            t.fs.iter()
                .any(|e| touched(e) && !e.op.writes() && within(&e.path, &p));
        let ok = effective.as_ref().is_some_and(|g| granted(&g.fs_write, &p));
        out.push(path_use("fs_write", &p, ok, wrote, read));
    }
    for h in &r.capabilities.http {
        let called = HostPattern::parse(h).is_ok_and(|pat| {
            t.net.iter().any(|e| {
                pat.matches(&e.scheme, &e.host, e.port)
                    && !matches!(&e.outcome, Outcome::Refused(w) if w.contains("allowlist"))
            })
        });
        let ok = effective.as_ref().is_some_and(|g| {
            g.http
                .last()
                .is_some_and(|list| list.iter().any(|p| p.as_str() == h.trim()))
        });
        out.push(if !ok {
            not_granted("http", h)
        } else if called {
            plain_use("http", h, "used", String::new())
        } else {
            plain_use(
                "http",
                h,
                "unused",
                format!("http `{h}` was requested but never called: remove it from [capabilities]"),
            )
        });
    }
    for n in &r.capabilities.env {
        let ok = effective.as_ref().is_some_and(|g| g.env.contains(n));
        out.push(if !ok {
            not_granted("env", n)
        } else if std::env::var_os(n).is_some() {
            plain_use(
                "env",
                n,
                "given",
                "set here and given to the plugin; the host cannot tell whether the plugin read it"
                    .into(),
            )
        } else {
            plain_use(
                "env",
                n,
                "not-set",
                format!("`{n}` is not set in this environment, so the plugin got nothing for it"),
            )
        });
    }
    out
}

fn plain_use(kind: &'static str, value: &str, state: &'static str, advice: String) -> Use {
    Use {
        kind,
        value: value.to_string(),
        state,
        advice,
    }
}

fn not_granted(kind: &'static str, value: &str) -> Use {
    plain_use(
        kind,
        value,
        "not-granted",
        format!("{kind} `{value}` is requested but [granted] in the record does not grant it, so this run could not use it"),
    )
}

fn path_use(kind: &'static str, p: &str, granted: bool, used: bool, only_read: bool) -> Use {
    if !granted {
        return not_granted(kind, p);
    }
    if used {
        return plain_use(kind, p, "used", String::new());
    }
    if only_read {
        return plain_use(
            kind,
            p,
            "only-read",
            format!("{kind} `{p}` was only read, never written: request it under fs_read instead"),
        );
    }
    plain_use(
        kind,
        p,
        "unused",
        format!("{kind} `{p}` was requested but never used: remove it from [capabilities]"),
    )
}
