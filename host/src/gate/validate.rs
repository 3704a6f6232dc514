//! Stages 1–2 of the ladder: the tool exists, the input fits its schema, every path is in the
//! scope (and is rewritten to what the guest will open) — through its symbolic links too, whose
//! targets need not exist (`validate_links.rs`); then the call's key.

use super::decision::{Code, Decision, Refusal, Stage, Verdict};
use super::observe;
use super::Gate;
use crate::key::{CallKey, RuleDecision};
use crate::tools::registry::{PathUse, RegisteredTool};
use crate::tools::{Builtin, Observation, ToolInfo};
use crate::workspace::{ScopedPath, Workspace};
use serde_json::Value;
use std::sync::Arc;

/// A language server's change, computed before the ask (`gate/lsp.rs`).
pub(crate) type LspPlan = Arc<Vec<crate::exec::lsp::PlannedFile>>;

/// Each path argument of a call: its field, how the tool uses it, and where it is.
pub(crate) type Paths = Vec<(String, PathUse, ScopedPath)>;

/// A call that passed stages 1–2.
pub(crate) struct Validated {
    pub(crate) tool: Arc<RegisteredTool>,
    /// The input with every path rewritten to what the guest opens.
    pub(crate) input: Value,
    pub(crate) paths: Paths,
    /// For `lsp_rename` / `lsp_replace_symbol`: the change, computed before the ask
    /// (`gate/lsp.rs`); its files are in `paths` too.
    pub(crate) lsp_plan: Option<LspPlan>,
}

/// The built-in network tool.
pub(crate) const FETCH_TOOL: &str = "fetch";
/// The built-in that saves a URL into a workspace file.
pub(crate) const DOWNLOAD_TOOL: &str = "download";

impl Gate {
    /// Stages 1–2 for `tool_name`: find the tool, then [`check_input`].
    pub(crate) fn validate(
        &self,
        tool_name: &str,
        input: &Value,
        call_id: &str,
    ) -> Result<Validated, Refusal> {
        let Some(tool) = self.tool(tool_name) else {
            return Err(self.no_tool(tool_name, call_id));
        };
        let (input, paths) =
            check_input(&tool.info, &tool.validator, input, &self.workspace, call_id)?;
        if is_download(&tool.info) {
            download_target(&self.policy, &tool.info, &input, &paths, call_id)?;
        }
        Ok(Validated {
            tool,
            input,
            paths,
            lsp_plan: None,
        })
    }

    /// Why there is no tool `tool_name`: a built-in that failed to load, a refused plugin, or
    /// no such tool.
    fn no_tool(&self, tool_name: &str, call_id: &str) -> Refusal {
        let why = self.registry.refused(tool_name);
        if let Some(why) = why.as_ref().filter(|_| self.registry.is_builtin(tool_name)) {
            return observe::error(
                tool_name,
                call_id,
                Stage::Tool,
                Code::ToolUnavailable,
                format!("the built-in tool `{tool_name}` could not be loaded: {why}"),
                Some("delete the component cache ($TOOLGATE_CACHE_DIR, else ~/.cache/toolgate) and retry; if it fails again, reinstall toolgate".into()),
            );
        }
        if let Some(why) = why {
            return observe::error(
                tool_name,
                call_id,
                Stage::Tool,
                Code::PluginRefused,
                format!("the plugin `{tool_name}` was refused when it was loaded: {why}"),
                Some("`toolgate plugin list` shows every plugin and its state".into()),
            );
        }
        observe::error(
            tool_name,
            call_id,
            Stage::Tool,
            Code::UnknownTool,
            format!("there is no tool `{tool_name}`"),
            Some(format!(
                "available tools: {}",
                self.visible_names().join(", ")
            )),
        )
    }
}

/// The input fits the schema and every path field is in the scope: the input with each path
/// rewritten to the guest's view, and the paths.
pub(crate) fn check_input(
    info: &ToolInfo,
    validator: &jsonschema::Validator,
    input: &Value,
    workspace: &Workspace,
    call_id: &str,
) -> Result<(Value, Paths), Refusal> {
    let tool_name = info.name.as_str();
    if let Some(message) = schema_errors(tool_name, validator, input) {
        return Err(observe::error_at(
            tool_name,
            call_id,
            Stage::Schema,
            Code::Schema,
            message,
            // Models read this too, and cannot run the CLI: point at what both can see.
            Some(format!(
                "fix the input to match the input schema of `{tool_name}` (in the tool list: MCP tools/list, or `toolgate tools --json`)"
            )),
        ));
    }
    let mut input = input.clone();
    let mut paths = Vec::new();
    for (field, usage) in &info.path_fields {
        let Some(raw) = input.get(field).and_then(Value::as_str).map(str::to_string) else {
            continue;
        };
        let scoped = workspace.scope(&raw, usage.access()).and_then(|scoped| {
            // A link whose target does not exist yet is judged by where it leads.
            match links::through_links(workspace, &raw, usage.access()) {
                Some(denial) => Err(denial),
                None => Ok(scoped),
            }
        });
        match scoped {
            Ok(scoped) => {
                input[field] = Value::String(scoped.guest.clone());
                paths.push((field.clone(), *usage, scoped));
            }
            Err(denial) => {
                return Err(observe::deny(
                    tool_name,
                    call_id,
                    Stage::Scope,
                    format!("path `{field}`"),
                    denial.reason,
                    denial.hint,
                ));
            }
        }
    }
    Ok((input, paths))
}

/// Every schema error, one per line, each naming the field.
fn schema_errors(tool: &str, validator: &jsonschema::Validator, input: &Value) -> Option<String> {
    if !input.is_object() {
        return Some(format!("the input of `{tool}` must be a JSON object"));
    }
    let errors: Vec<String> = validator
        .iter_errors(input)
        .take(5)
        .map(|e| {
            let at = e.instance_path.to_string();
            let field = if at.is_empty() {
                "input".to_string()
            } else {
                format!("input{}", at.replace('/', "."))
            };
            format!("{field}: {e}")
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("\n"))
}

/// A plugin's path arguments must lie inside what it was granted: a read inside `fs_read` or
/// `fs_write`, a write inside `fs_write`. The host checks this before anyone is asked.
pub(crate) fn plugin_paths_granted(
    grant: &crate::plugins::PluginGrant,
    paths: &[(String, PathUse, ScopedPath)],
    tool: &str,
    call_id: &str,
) -> Result<(), Refusal> {
    let within = |rel: &str, roots: &[String]| {
        roots
            .iter()
            .any(|r| crate::plugins::manifest::within(rel, r))
    };
    for (field, usage, scoped) in paths {
        let ok = match usage {
            PathUse::Read => {
                within(&scoped.rel, &grant.fs_read) || within(&scoped.rel, &grant.fs_write)
            }
            PathUse::Write => within(&scoped.rel, &grant.fs_write),
        };
        if !ok {
            let (verb, list) = match usage {
                PathUse::Read => ("read", &grant.fs_read),
                PathUse::Write => ("write", &grant.fs_write),
            };
            return Err(observe::deny(
                tool,
                call_id,
                Stage::Scope,
                format!("path `{field}`"),
                format!(
                    "`{}` is outside what the plugin may {verb} ({})",
                    scoped.rel,
                    if list.is_empty() { "nothing".to_string() } else { list.join(", ") }
                ),
                "pass a path inside the plugin's granted directories, or grant more in its manifest and reinstall it".into(),
            ));
        }
    }
    Ok(())
}

/// The call's key: a shell command's, a fetch's or a download's host, else the tool and its
/// paths. `Err` when a fetch or download URL cannot be read.
pub(crate) fn call_key(
    info: &ToolInfo,
    v: &Validated,
    shell: Option<&crate::exec::Keyed>,
) -> std::result::Result<CallKey, String> {
    match shell {
        Some(k) => Ok(k.key.clone()),
        None if is_fetch(info) => {
            fetch_target(&v.input).map(|(_, host, _)| CallKey::with_target(FETCH_TOOL, &host))
        }
        None if is_download(info) => {
            fetch_target(&v.input).map(|(_, host, _)| CallKey::with_target(DOWNLOAD_TOOL, &host))
        }
        None => Ok(key_for(info, &v.paths)),
    }
}

/// [`call_key`] as a refusal at the key stage.
pub(crate) fn key_or_refuse(
    info: &ToolInfo,
    v: &Validated,
    shell: Option<&crate::exec::Keyed>,
    call_id: &str,
) -> Result<CallKey, Refusal> {
    call_key(info, v, shell).map_err(|message| {
        observe::error(
            &info.name,
            call_id,
            Stage::Key,
            Code::BadUrl,
            message,
            Some("pass an absolute http:// or https:// URL".into()),
        )
    })
}

pub(crate) fn is_fetch(info: &ToolInfo) -> bool {
    info.builtin_kind() == Some(Builtin::Fetch)
}

pub(crate) fn is_download(info: &ToolInfo) -> bool {
    info.builtin_kind() == Some(Builtin::Download)
}

/// A download's target, before anyone is asked: an existing file is replaced only with
/// `overwrite` (read-before-write then applies as for `write`), and the write is judged by the
/// policy's deny rules for the key `write` would have there.
fn download_target(
    policy: &crate::policy::Policy,
    info: &ToolInfo,
    input: &Value,
    paths: &Paths,
    call_id: &str,
) -> Result<(), Refusal> {
    let Some((_, _, target)) = paths.iter().find(|(_, u, _)| *u == PathUse::Write) else {
        return Ok(());
    };
    let shown = crate::text::escape_name(&target.rel);
    let write = write_key(target);
    if let Some(r) = policy
        .strictest(&write)
        .filter(|r| r.decision == RuleDecision::Deny)
    {
        let (d, o) = observe::deny(
            &info.name,
            call_id,
            Stage::Rules,
            r.source.clone(),
            format!(
                "the download would write {shown}, and `{write}` is denied by rule `{}`{}",
                r.pattern.as_str(),
                r.reason
                    .as_deref()
                    .map(|w| format!(": {w}"))
                    .unwrap_or_default()
            ),
            format!(
                "the deny rule at {} decides this; download to a path it does not cover",
                r.source
            ),
        );
        return Err((d.with_rule(r.pattern.as_str()), o));
    }
    let overwrite = input.get("overwrite").and_then(Value::as_bool) == Some(true);
    if !overwrite && std::fs::metadata(&target.host).is_ok_and(|m| !m.is_dir()) {
        let mut o = Observation::error(
            &info.name,
            call_id,
            "exists",
            format!("{shown} already exists and `overwrite` is not set; nothing was downloaded"),
            Some(format!(
                "pass `overwrite: true` to replace it (read {shown} first, as for `write`), or download to another path"
            )),
        );
        o.stage = Some(Stage::Staleness.as_str().into());
        return Err((
            Decision::new(Verdict::Error, Stage::Staleness, "input".into()),
            o,
        ));
    }
    Ok(())
}

/// The key a `write` of `target` has (`write:<dir>/`): what a download's write is judged by.
pub(crate) fn write_key(target: &ScopedPath) -> CallKey {
    CallKey::with_target(Builtin::Write.as_str(), &parent_target(&target.rel))
}

/// The parent directory of `rel` as a key target: `src/`, or `./` at the root.
fn parent_target(rel: &str) -> String {
    match rel.rfind('/') {
        Some(i) => format!("{}/", &rel[..i]),
        None => "./".to_string(),
    }
}

/// `(scheme, host, port)` of a fetch call's `url`, lowercased; the host is what the call is
/// keyed on (`fetch:api.github.com`).
pub(crate) fn fetch_target(input: &Value) -> std::result::Result<(String, String, u16), String> {
    let url = input.get("url").and_then(Value::as_str).unwrap_or_default();
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("`url` is not a valid URL ({e}): `{url}`"))?;
    let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "`url` must start with http:// or https://: `{url}`"
        ));
    }
    let host = uri
        .host()
        .map(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase()
        })
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("`url` has no host: `{url}`"))?;
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "https" { 443 } else { 80 });
    Ok((scheme, host, port))
}

/// The key of a call, computed from what will run: writes key on the parent directory
/// (`write:src/`), reads on the path (`read:src/main.rs`), other tools on their name.
pub(crate) fn key_for(info: &ToolInfo, paths: &[(String, PathUse, ScopedPath)]) -> CallKey {
    if let Some((_, _, p)) = paths.iter().find(|(_, u, _)| *u == PathUse::Write) {
        return CallKey::with_target(&info.name, &parent_target(&p.rel));
    }
    if let Some((_, _, p)) = paths.first() {
        return CallKey::with_target(&info.name, &p.rel);
    }
    if info.path_fields.iter().any(|(_, u)| *u == PathUse::Read) {
        return CallKey::with_target(&info.name, ".");
    }
    CallKey::tool(&info.name)
}

#[path = "validate_links.rs"]
mod links;

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
