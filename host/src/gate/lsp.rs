//! The language-server tools in the gate.
//!
//! `lsp_rename` and `lsp_replace_symbol` change files the model did not name: before anyone is
//! asked, the gate asks the server for the change and computes every file's new text (the
//! *plan*). Each file is then checked as a `write` of it would be — in the scope, not a secret,
//! not denied by a `write:<dir>/` rule, read in this session as it is now — and the prompt
//! shows the multi-file diff. After an approval the plan is computed again and must be the
//! same. The tool's `apply` writes exactly the plan, on directory descriptors, all files or
//! none: a file that changed since is refused before anything is written.
//!
//! After any tool writes a file, its language server (when one runs and has it open) gets the
//! new text, and with `[lsp] diagnostics_after_edit` the file's new diagnostics are appended
//! to the observation.

use super::decision::{Code, Refusal, Stage};
use super::observe;
use super::validate::{write_key, Validated};
use super::Gate;
use crate::exec::lsp::{LspHost, PlannedFile, Pos};
use crate::history::restore::{sha256_hex, Current, Place};
use crate::key::RuleDecision;
use crate::tools::registry::PathUse;
use crate::tools::{Builtin, Observation, Status, ToolInfo};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use super::validate::LspPlan as Plan;

/// Most diff bytes the prompt shows over all files.
const MAX_SHOWN: usize = 48 * 1024;

/// How long `diagnostics_after_edit` waits for the new diagnostics.
const AFTER_EDIT_WAIT: Duration = Duration::from_secs(10);

pub(crate) fn is_lsp_write(info: &ToolInfo) -> bool {
    info.builtin_kind().is_some_and(Builtin::is_lsp_write)
}

fn pos_of(input: &Value) -> Pos {
    Pos {
        path: input["path"].as_str().unwrap_or_default().to_string(),
        line: input["line"]
            .as_u64()
            .and_then(|l| u32::try_from(l).ok())
            .unwrap_or(1),
        column: input["column"].as_u64().and_then(|c| u32::try_from(c).ok()),
        symbol: input["symbol"].as_str().map(str::to_string),
    }
}

impl Gate {
    /// The language servers of this gate's workspace.
    pub fn lsp(&self) -> &Arc<LspHost> {
        &self.lsp
    }

    /// For `lsp_rename` and `lsp_replace_symbol`: compute the change, check every file it
    /// writes as a write, and add them to `v.paths` (so read-before-write, the prompt and the
    /// history see them). Other tools: nothing.
    pub(crate) async fn lsp_plan(&self, v: &mut Validated, call_id: &str) -> Result<(), Refusal> {
        if !is_lsp_write(&v.tool.info) {
            return Ok(());
        }
        let name = v.tool.info.name.clone();
        let fail = |message: String, hint: Option<String>| {
            observe::error_at(&name, call_id, Stage::Scope, Code::Lsp, message, hint)
        };
        let host = self.lsp.clone();
        let input = v.input.clone();
        let kind = v.tool.info.builtin_kind();
        let wait = host.config().timeout.min(self.limits.timeout);
        let plan = tokio::task::spawn_blocking(move || match kind {
            Some(Builtin::LspRename) => host.plan_rename(
                &pos_of(&input),
                input["new_name"].as_str().unwrap_or_default(),
                wait,
            ),
            _ => host.plan_replace_symbol(
                input["path"].as_str().unwrap_or_default(),
                input["symbol"].as_str().unwrap_or_default(),
                input["new_text"].as_str().unwrap_or_default(),
                wait,
            ),
        })
        .await
        .map_err(|e| {
            fail(
                format!("computing the change failed inside the host: {e}"),
                None,
            )
        })?
        .map_err(|e| fail(format!("the change cannot be computed: {e}"), None))?;
        for f in &plan {
            let scoped = self
                .workspace
                .scope(&f.rel, crate::workspace::Access::Write)
                .map_err(|d| {
                    fail(
                        format!(
                            "the change would also edit {}: {}",
                            crate::text::escape_name(&f.rel),
                            d.reason
                        ),
                        Some(d.hint),
                    )
                })?;
            let write = write_key(&scoped);
            if let Some(r) = self
                .policy
                .strictest(&write)
                .filter(|r| r.decision == RuleDecision::Deny)
            {
                let (d, o) = observe::deny(
                    &name,
                    call_id,
                    Stage::Rules,
                    r.source.clone(),
                    format!(
                        "the change would edit {}, and `{write}` is denied by rule `{}`",
                        crate::text::escape_name(&f.rel),
                        r.pattern.as_str()
                    ),
                    format!(
                        "the deny rule at {} decides this; nothing was changed",
                        r.source
                    ),
                );
                return Err((d, o));
            }
            if !v.paths.iter().any(|(_, _, p)| p.host == scoped.host) {
                v.paths
                    .push(("the server's change".into(), PathUse::Write, scoped));
            }
        }
        v.lsp_plan = Some(Arc::new(plan));
        Ok(())
    }

    /// The capability an lsp tool's call gets: the servers, and the approved change.
    pub(crate) fn lsp_grant(
        &self,
        plan: Option<&Plan>,
        max_wait: Duration,
    ) -> crate::exec::lsp::LspGrant {
        let apply = plan.map(|plan| {
            let (plan, root, host) = (
                plan.clone(),
                self.workspace.root().to_path_buf(),
                self.lsp.clone(),
            );
            Arc::new(move || apply(&root, &plan, &host)) as crate::exec::lsp::Apply
        });
        crate::exec::lsp::LspGrant {
            host: self.lsp.clone(),
            apply,
            max_wait,
        }
    }

    /// After a successful call wrote `written`: the servers get the new texts; with
    /// `diagnostics_after_edit`, an `edit`/`write`/`multiedit` observation gets the file's new
    /// diagnostics appended.
    pub(crate) async fn lsp_after_write(
        &self,
        info: &ToolInfo,
        written: Vec<PathBuf>,
        observation: &mut Observation,
    ) {
        if written.is_empty() || observation.status != Status::Ok {
            return;
        }
        let host = self.lsp.clone();
        let append = self.lsp.config().diagnostics_after_edit
            && matches!(
                info.builtin_kind(),
                Some(Builtin::Edit | Builtin::Write | Builtin::MultiEdit)
            );
        let root = self.workspace.root().to_path_buf();
        let answer = tokio::task::spawn_blocking(move || {
            for p in &written {
                host.after_write(p);
            }
            let first = written.first()?;
            if !append || host.config().language_for(first).is_none() {
                return None;
            }
            let rel = first
                .strip_prefix(&root)
                .ok()?
                .to_string_lossy()
                .into_owned();
            Some(host.ask(
                &crate::exec::lsp::Query::Diagnostics(Some(rel)),
                AFTER_EDIT_WAIT,
            ))
        })
        .await
        .ok()
        .flatten();
        let Some(answer) = answer else { return };
        let text = match answer {
            Ok(a) => diagnostics_text(&a),
            Err(e) => format!("diagnostics after the change: not available ({e})"),
        };
        observation.content.push_str(&format!("\n\n{text}"));
        if let Value::Object(map) = &mut observation.data {
            map.insert("diagnostics_after_edit".into(), json!(text));
        }
    }
}

/// The new diagnostics of a file, in a few lines.
fn diagnostics_text(a: &Value) -> String {
    let mut lines = Vec::new();
    for f in a["files"].as_array().map_or(&[][..], Vec::as_slice) {
        let path = f["path"].as_str().unwrap_or("");
        let diags = f["diagnostics"].as_array().map_or(&[][..], Vec::as_slice);
        if diags.is_empty() {
            lines.push(format!("diagnostics after the change: none in {path}"));
        } else {
            lines.push(format!(
                "diagnostics after the change ({} in {path}):",
                diags.len()
            ));
            for d in diags.iter().take(20) {
                lines.push(format!(
                    "{path}:{}:{}: {}: {}",
                    d["line"],
                    d["column"],
                    d["severity"].as_str().unwrap_or("error"),
                    d["message"].as_str().unwrap_or("")
                ));
            }
            if diags.len() > 20 {
                lines.push(format!(
                    "… {} more (lsp_diagnostics lists them all)",
                    diags.len() - 20
                ));
            }
        }
    }
    for t in a["timed_out"].as_array().map_or(&[][..], Vec::as_slice) {
        lines.push(format!(
            "diagnostics after the change: the language server did not answer for {} in time; call lsp_diagnostics",
            t.as_str().unwrap_or("")
        ));
    }
    lines.join("\n")
}

/// The prompt's view of a plan: each file's diff, cut past [`MAX_SHOWN`] bytes in all.
pub(crate) fn describe_plan(plan: &[PlannedFile]) -> String {
    let edits: usize = plan.iter().map(|f| f.edits).sum();
    let mut text = format!(
        "the language server's change: {} file{}, {edits} edit{}",
        plan.len(),
        if plan.len() == 1 { "" } else { "s" },
        if edits == 1 { "" } else { "s" }
    );
    let mut left = Vec::new();
    for f in plan {
        if text.len() > MAX_SHOWN {
            left.push(crate::text::escape_name(&f.rel).into_owned());
            continue;
        }
        let shown = crate::text::escape_name(&f.rel);
        text.push('\n');
        text.push_str(&super::preview::unified(
            &String::from_utf8_lossy(&f.old),
            &String::from_utf8_lossy(&f.new),
            &format!("a/{shown}"),
            &format!("b/{shown}"),
        ));
    }
    if !left.is_empty() {
        text.push_str(&format!(
            "\n… the diffs of {} more file{} are not shown: {}",
            left.len(),
            if left.len() == 1 { "" } else { "s" },
            left.join(", ")
        ));
    }
    text
}

/// Two plans make the same change: the same files, each from the same text to the same text
/// (how the server grouped its edits does not matter).
pub(crate) fn same_plan(a: &[PlannedFile], b: &[PlannedFile]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.rel == y.rel && x.old == y.old && x.new == y.new)
}

/// Write `plan`: every file still exactly as planned is replaced (a temp file renamed over it,
/// on its directory's descriptor), or none is.
fn apply(root: &std::path::Path, plan: &[PlannedFile], host: &LspHost) -> Result<Value, String> {
    let mut places = Vec::with_capacity(plan.len());
    for f in plan {
        let shown = crate::text::escape_name(&f.rel);
        let place = Place::open(root, &f.rel, false).map_err(|e| {
            format!(
                "{shown} cannot be opened ({}); nothing was changed",
                crate::fsutil::plain_error(&e)
            )
        })?;
        let current = place.current(0).map_err(|e| {
            format!(
                "{shown} cannot be read ({}); nothing was changed",
                crate::fsutil::plain_error(&e)
            )
        })?;
        match current {
            Current::File { sha256, mode, .. } if sha256 == sha256_hex(&f.old) => places.push((place, mode)),
            Current::File { .. } => {
                return Err(format!(
                    "{shown} changed after the change was computed and approved; nothing was changed. Read it again and retry"
                ))
            }
            Current::Absent => return Err(format!("{shown} is gone; nothing was changed")),
            Current::Other(what) => return Err(format!("{shown} is now {what}; nothing was changed")),
        }
    }
    for (i, ((place, mode), f)) in places.iter().zip(plan).enumerate() {
        if let Err(e) = place.write(&f.new, *mode) {
            // Put back what was already written.
            let mut lost = Vec::new();
            for ((p, m), g) in places.iter().zip(plan).take(i) {
                if p.write(&g.old, *m).is_err() {
                    lost.push(g.rel.clone());
                }
            }
            let shown = crate::text::escape_name(&f.rel);
            return Err(if lost.is_empty() {
                format!("writing {shown} failed ({}); the files already written were put back, so nothing was changed", crate::fsutil::plain_error(&e))
            } else {
                format!(
                    "writing {shown} failed ({}); putting back {} failed too: check them (`toolgate undo` can restore them)",
                    crate::fsutil::plain_error(&e),
                    lost.join(", ")
                )
            });
        }
    }
    for f in plan {
        host.after_write(&f.host);
    }
    let files: Vec<Value> = plan
        .iter()
        .map(|f| json!({"path": f.rel, "edits": f.edits}))
        .collect();
    Ok(json!({"files": files, "edits": plan.iter().map(|f| f.edits).sum::<usize>()}))
}

/// The language servers of a workspace: the known ones found on the host's `PATH` (never a
/// directory inside the workspace), then the policy's `[lsp.<language>]` tables (a `command`
/// only from the layers allowed to run programs: `policy::lsp` decides that).
pub(crate) fn config(
    policy: &crate::policy::Policy,
    root: &std::path::Path,
) -> crate::exec::lsp::LspConfig {
    use crate::exec::lsp::Language;
    let path = std::env::var("PATH").unwrap_or_default();
    let dirs = crate::exec::prepare::clean_path(&path, root);
    let mut config = crate::exec::lsp::LspConfig::detected(&dirs);
    config.timeout = policy.lsp.timeout;
    config.diagnostics_after_edit = policy.lsp.diagnostics_after_edit;
    for (name, l) in &policy.lsp.languages {
        let base = config.named(name).cloned();
        let known = crate::exec::lsp::KNOWN_SERVERS
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, _, exts)| exts.iter().map(|e| (*e).to_string()).collect::<Vec<_>>());
        let language = if l.disabled {
            Some(Language {
                name: name.clone(),
                command: Vec::new(),
                extensions: Vec::new(),
                source: l.source.clone(),
            })
        } else if !l.command.is_empty() {
            let extensions = if l.extensions.is_empty() {
                base.as_ref()
                    .map(|b| b.extensions.clone())
                    .or(known)
                    .unwrap_or_default()
            } else {
                l.extensions.clone()
            };
            Some(Language {
                name: name.clone(),
                command: l.command.clone(),
                extensions,
                source: l.source.clone(),
            })
        } else {
            base.filter(|_| !l.extensions.is_empty()).map(|b| Language {
                extensions: l.extensions.clone(),
                ..b
            })
        };
        if let Some(language) = language {
            config.set(language);
        }
    }
    config
}

#[cfg(test)]
#[path = "lsp_tests.rs"]
mod tests;
