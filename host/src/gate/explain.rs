//! `toolgate policy explain TOOL JSON`: the ladder's decision for one call, stage by stage,
//! without running anything. Hooks are named, not run (they are programs); nobody is asked;
//! read-before-write is left to the real call (it depends on what the session has read).

use super::decision::{Stage, Verdict};
use super::Gate;
use crate::exec::Class;
use crate::key::RuleDecision;
use crate::policy::Mode;
use crate::tools::{Ceiling, Risk};
use serde::Serialize;
use serde_json::Value;

/// One stage of the ladder as explained.
#[derive(Clone, Debug, Serialize)]
pub struct Step {
    /// The stage (`schema`, `scope`, `mode`, `rules`, `hooks`, …).
    pub stage: &'static str,
    /// `pass`, `deny`, `ask`, `allow`, `error`, `skip` or `note`.
    pub outcome: &'static str,
    /// What decided it, in plain words.
    pub detail: String,
}

/// The whole explanation.
#[derive(Clone, Debug, Serialize)]
pub struct Explained {
    /// The stages in order, up to the one that decides.
    pub stages: Vec<Step>,
    /// The final decision: `allow`, `deny`, `ask` (and what asking means here), or `error`.
    pub decision: String,
}

impl Gate {
    /// Explain what the ladder would decide for `tool` with `input` in `session`.
    pub fn explain(&self, session: &str, tool_name: &str, input: &Value) -> Explained {
        let mut stages = Vec::new();
        let mut step = |stage: &'static str, outcome: &'static str, detail: String| {
            stages.push(Step {
                stage,
                outcome,
                detail,
            });
        };
        let end = |stages: Vec<Step>, decision: String| Explained { stages, decision };

        let v = match self.validate(tool_name, input, "explain") {
            Ok(v) => v,
            Err((d, o)) => {
                let stage = if d.stage == Stage::Scope {
                    "scope"
                } else {
                    "schema"
                };
                let why = o.reason.clone().unwrap_or_else(|| o.summary.clone());
                let outcome = if d.verdict == Verdict::Deny {
                    "deny"
                } else {
                    "error"
                };
                step(stage, outcome, why);
                return end(
                    stages,
                    format!("{} ({})", d.verdict.as_str(), o.hint.unwrap_or_default()),
                );
            }
        };
        step("schema", "pass", "the input fits the tool's schema".into());
        step(
            "scope",
            "pass",
            if v.paths.is_empty() {
                "no path arguments".into()
            } else {
                format!(
                    "{} inside the workspace, none denied",
                    v.paths
                        .iter()
                        .map(|(_, _, p)| format!("`{}`", p.rel))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
        );
        let tool = v.tool.clone();
        if let Some(grant) = &tool.plugin {
            if let Err((_, o)) =
                super::validate::plugin_paths_granted(grant, &v.paths, tool_name, "explain")
            {
                step("scope", "deny", o.reason.unwrap_or(o.summary));
                return end(stages, "deny".into());
            }
        }
        let risk = tool.info.risk;
        let shell = self.shell_command(&tool.info, &v);
        let key = match super::validate::call_key(&tool.info, &v, shell.as_ref()) {
            Ok(k) => k,
            Err(message) => {
                step("key", "error", message);
                return end(stages, "error".into());
            }
        };
        let key_text = key.to_string();
        step(
            "key",
            "note",
            match shell.as_ref().map(|k| &k.class) {
                Some(c) => format!("`{key_text}` (shell command classified {})", class_name(c)),
                None => format!("`{key_text}` ({} tool)", risk.as_str()),
            },
        );
        // A git command that would be read-only but for printing blobs says why it is not.
        let blobs = shell.as_ref().and_then(|k| match &k.plan {
            crate::exec::Plan::Argv(argv) => crate::exec::policy::git_blob_printer(argv),
            crate::exec::Plan::Bash(_) => None,
        });
        if let Some(why) = blobs {
            step("class", "note", format!("not read-only: {why}"));
        }

        let mode = self.mode();
        if mode == Mode::Safe && risk > Risk::ReadOnly {
            step(
                "mode",
                "deny",
                format!(
                    "the mode is `safe` and `{tool_name}` is a {} tool",
                    risk.as_str()
                ),
            );
            return end(stages, "deny".into());
        }
        step("mode", "pass", format!("mode `{}`", mode.as_str()));

        // The managed network ceiling: a `fetch` or `download` outside it is refused whatever
        // a rule, grant, answer or mode says; a command's network is bounded by it.
        if let Some(c) = &self.policy.shell.network_ceiling {
            let (info, input) = (&tool.info, &v.input);
            if super::validate::is_fetch(info) || super::validate::is_download(info) {
                if let (Some(list), Ok((scheme, host, port))) =
                    (c.patterns(), super::validate::fetch_target(input))
                {
                    if !list.iter().any(|p| p.matches(&scheme, &host, port)) {
                        step("ceiling", "deny", c.refusal(&format!("{tool_name}:{host}")));
                        return end(stages, "deny".into());
                    }
                }
            } else if shell.is_some() {
                step(
                    "ceiling",
                    "note",
                    format!("the command's network: {}", c.text()),
                );
            }
        }

        if let Some(Class::Banned(why)) = shell.as_ref().map(|k| &k.class) {
            step("rules", "deny", format!("banned: {why}"));
            return end(stages, "deny".into());
        }
        if shell.is_some() && self.policy.require_confinement {
            let c = self.exec_host.confinement();
            if !c.complete() {
                step(
                    "rules",
                    "deny",
                    format!(
                        "[shell] require_confinement and this host lacks {}. {}",
                        c.missing().join(", "),
                        crate::exec::confine::report::hint(&c.missing())
                    ),
                );
                return end(stages, "deny".into());
            }
        }
        let rule = self.policy.strictest(&key).cloned();
        let mut force_ask = false;
        match &rule {
            Some(r) if r.decision == RuleDecision::Deny => {
                step(
                    "rules",
                    "deny",
                    format!("rule `{}` at {}", r.pattern.as_str(), r.source),
                );
                return end(stages, "deny".into());
            }
            Some(r) => {
                force_ask = r.decision == RuleDecision::Ask;
                step(
                    "rules",
                    "note",
                    format!(
                        "{} rule `{}` at {}",
                        r.decision.as_str(),
                        r.pattern.as_str(),
                        r.source
                    ),
                );
            }
            None => step("rules", "pass", "no rule matches".into()),
        }
        if let Some(Class::Dangerous(why)) = shell.as_ref().map(|k| &k.class) {
            if !self.exact_grant(session, &key_text) {
                force_ask = true;
                step(
                    "rules",
                    "ask",
                    format!(
                        "dangerous form ({why}): always asks unless this exact text is granted"
                    ),
                );
            }
        }
        let hooks: Vec<String> = self
            .policy
            .hooks
            .iter()
            .filter(|h| h.applies_to(tool_name))
            .map(|h| format!("`{}`", h.command.join(" ")))
            .collect();
        if hooks.is_empty() {
            step("hooks", "pass", "no hook applies".into());
        } else {
            step(
                "hooks",
                "skip",
                format!(
                    "would run {} (not run by explain; a hook may deny, allow or change the input)",
                    hooks.join(", ")
                ),
            );
        }
        let shell_read_only = self.shell_read_only(&tool.info, &v, shell.as_ref());
        let no_permission = risk == Risk::ReadOnly && tool.plugin.is_none();
        if (no_permission || shell_read_only) && !force_ask {
            step(
                "no-permission",
                "allow",
                "read-only inside the scope: no grant needed".into(),
            );
            return end(stages, "allow".into());
        }
        if !force_ask && mode == Mode::AllowAll {
            step("mode", "allow", "mode `allow-all` approves it".into());
            return end(stages, "allow".into());
        }
        if !force_ask {
            match self.project_allow(&tool.info, &key, rule.as_ref(), "explain") {
                Ok(Some(d)) => {
                    step("project-allowlist", "allow", d.source);
                    return end(stages, "allow".into());
                }
                Ok(None) => step(
                    "project-allowlist",
                    "pass",
                    "no project rule or grant".into(),
                ),
                Err((_, o)) => {
                    step("project-allowlist", "error", o.reason.unwrap_or(o.summary));
                    return end(stages, "error".into());
                }
            }
            match self.session_allow(session, tool_name, &key, "explain") {
                Ok(Some(d)) => {
                    step("session-allowlist", "allow", d.source);
                    return end(stages, "allow".into());
                }
                Ok(None) => step(
                    "session-allowlist",
                    "pass",
                    format!("no grant in session `{session}`"),
                ),
                Err((_, o)) => {
                    step("session-allowlist", "error", o.reason.unwrap_or(o.summary));
                    return end(stages, "error".into());
                }
            }
        }
        let scopes = if tool.info.ceiling == Ceiling::Session {
            "once or session (capped at session scope)"
        } else {
            "once, session or project"
        };
        step(
            "ask",
            "ask",
            format!("asks for `{key_text}`; answers {scopes}"),
        );
        let headless = if self.approver.is_none() {
            " (here there is no approval surface, so it would be denied with a hint)"
        } else {
            ""
        };
        end(stages, format!("ask{headless}"))
    }
}

fn class_name(c: &Class) -> &'static str {
    match c {
        Class::ReadOnly => "read-only",
        Class::Banned(_) => "banned",
        Class::Dangerous(_) => "dangerous",
        Class::Normal => "normal",
    }
}
