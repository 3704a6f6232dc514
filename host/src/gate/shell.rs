//! The built-in shell on the ladder: its command keyed from what will run, whether a read-only
//! command stays in the scope, and the one command the exec capability may run once allowed.

use super::decision::{Code, Refusal, Stage};
use super::observe;
use super::validate::Validated;
use super::Gate;
use crate::exec::{ApprovedCommand, Class, Keyed};
use crate::tools::ToolInfo;
use crate::workspace::{Access, Workspace};
use serde_json::Value;
use std::time::Duration;

impl Gate {
    /// For the built-in shell: the command keyed from what will run.
    pub(crate) fn shell_command(&self, info: &ToolInfo, v: &Validated) -> Option<Keyed> {
        if info.builtin_kind() != Some(crate::tools::Builtin::Shell) {
            return None;
        }
        let text = shell_text(&v.input);
        Some(crate::exec::keyed(&text, &self.policy.shell.banned))
    }

    /// A read-only command inside the scope, or a job tool (they only reach jobs this session
    /// started under an approved command): no grant needed.
    pub(crate) fn shell_read_only(
        &self,
        info: &ToolInfo,
        v: &Validated,
        shell: Option<&Keyed>,
    ) -> bool {
        shell.is_some_and(|k| k.class == Class::ReadOnly && args_in_scope(&self.workspace, v, k))
            || info.builtin_kind().is_some_and(|b| b.is_job_tool())
    }

    /// The command the exec capability may run for this call (the shell only).
    pub(crate) fn approve_command(
        &self,
        info: &ToolInfo,
        v: &Validated,
        shell: Option<&Keyed>,
        call_id: &str,
    ) -> Result<Option<ApprovedCommand>, Refusal> {
        let Some(k) = shell else {
            return Ok(None);
        };
        let cwd = match v.paths.iter().find(|(f, _, _)| f == "cwd") {
            Some((_, _, p)) if p.host.is_dir() => p.host.clone(),
            Some((_, _, p)) => {
                return Err(observe::error(
                    &info.name,
                    call_id,
                    Stage::Scope,
                    Code::NotADirectory,
                    format!("cwd `{}` is not a directory", p.rel),
                    Some("give an existing directory inside the workspace".into()),
                ))
            }
            None => self.workspace.root().to_path_buf(),
        };
        let ms = |field: &str| v.input.get(field).and_then(Value::as_u64);
        let timeout = ms("timeout_ms")
            .map(Duration::from_millis)
            .unwrap_or(crate::exec::DEFAULT_TIMEOUT)
            .min(crate::exec::MAX_TIMEOUT);
        let auto_background = ms("auto_background_ms")
            .map(Duration::from_millis)
            .or_else(|| {
                self.policy
                    .shell
                    .auto_background_secs
                    .map(Duration::from_secs)
            })
            .unwrap_or(crate::exec::DEFAULT_AUTO_BACKGROUND);
        Ok(Some(ApprovedCommand {
            text: shell_text(&v.input),
            plan: k.plan.clone(),
            key: k.key.to_string(),
            class: match k.class {
                Class::ReadOnly => "read-only",
                Class::Dangerous(_) => "dangerous",
                _ => "normal",
            },
            cwd,
            timeout,
            auto_background,
            background: v
                .input
                .get("run_in_background")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            net: None,
        }))
    }
}

/// A read-only command is run without a prompt only when every argument that could be a
/// path stays in the scope (so `cat .env` or `cat /etc/shadow` still asks).
pub(crate) fn args_in_scope(workspace: &Workspace, v: &Validated, k: &Keyed) -> bool {
    let crate::exec::Plan::Argv(argv) = &k.plan else {
        return false;
    };
    let cwd = v
        .paths
        .iter()
        .find(|(f, _, _)| f == "cwd")
        .map(|(_, _, p)| p.rel.clone())
        .unwrap_or_else(|| ".".into());
    argv[1..].iter().all(|a| {
        // Any argument may name a file the program reads: a plain word, the value of a long
        // option (`--from-file=.env`) and what follows a short option letter (`-f.env`).
        // Values that are not paths (`--color=always`, `-n5`) are judged as paths too;
        // they stay inside, so only a real path outside (or a secret) makes it ask.
        let path = match a.strip_prefix("--") {
            Some(long) => match long.split_once('=') {
                Some((_, value)) => value,
                None => return true,
            },
            None => match a.strip_prefix('-') {
                Some(short) => match short.char_indices().nth(1) {
                    Some((i, _)) => &short[i..],
                    None => return true,
                },
                None => a.as_str(),
            },
        };
        let raw = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("{cwd}/{path}")
        };
        workspace.scope(&raw, Access::Read).is_ok()
    })
}

/// The `command` field of a shell call.
pub(crate) fn shell_text(input: &Value) -> String {
    input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
