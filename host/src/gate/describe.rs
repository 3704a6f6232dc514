//! What the model reads about each tool. A built-in tool's description (one file per tool in
//! its guest crate) may hold placeholders that only this workspace's policy can answer — which
//! programs the shell refuses, which run without asking, whether shell commands reach the
//! network, which hosts `fetch` reaches without asking — and they are filled here each time the
//! tools are listed, so the text follows the policy and the grants in force. A plugin's
//! description is its own text and is never filled (it is a guest's words, and placeholders
//! there would let it read the policy back).
//!
//! The text only informs: every one of these facts is enforced by the gate and the sandbox,
//! whatever the description says.

use super::Gate;
use crate::exec::catalog;
use crate::key::RuleDecision;
use crate::policy::Mode;
use crate::tools::registry::ToolInfo;

/// The placeholders a built-in description may use, and what fills them.
const PLACEHOLDERS: &[&str] = &[
    "shell.banned",
    "shell.read_only",
    "shell.network",
    "fetch.hosts",
];

impl Gate {
    /// The tools a client may see now ([`Gate::visible_tools`]), with the descriptions the
    /// model reads: built-in tools' placeholders filled from the policy and grants in force.
    pub fn listed_tools(&self) -> Vec<ToolInfo> {
        self.visible_tools()
            .into_iter()
            .map(|t| self.described(t))
            .collect()
    }

    /// `tool` as listed: a built-in's description filled, a plugin's as it is.
    pub fn described(&self, tool: &ToolInfo) -> ToolInfo {
        let mut t = tool.clone();
        if has_facts(tool) {
            t.description = fill(&t.description, |name| self.fact(name));
        }
        t
    }

    /// The text for one placeholder, `None` for a name that is not one.
    ///
    /// Some change while the gate runs (the fetch hosts follow the mode and the project's
    /// grants), so a description with placeholders is filled anew each time it is shown.
    fn fact(&self, name: &str) -> Option<String> {
        Some(match name {
            "shell.banned" => self.banned_text(),
            "shell.read_only" => read_only_text(),
            "shell.network" => self.shell_network_text(),
            "fetch.hosts" => self.fetch_hosts_text(),
            _ => return None,
        })
    }

    fn banned_text(&self) -> String {
        let mut names: Vec<String> = catalog::banned_programs()
            .into_iter()
            .map(str::to_string)
            .collect();
        for extra in &self.policy.shell.banned {
            if !names.contains(extra) {
                names.push(extra.clone());
            }
        }
        quoted_list(&names)
    }

    fn shell_network_text(&self) -> String {
        if self.policy.shell.network {
            "Shell commands reach the network directly (the policy sets `[shell] network = true`)."
                .to_string()
        } else {
            "Shell commands have no network: they run in a network namespace of their own with \
             only loopback, so downloads and package installs fail there. Use the fetch tool \
             for HTTP."
                .to_string()
        }
    }

    /// Which hosts `fetch` reaches without asking: allow rules, the grants in force, the mode.
    fn fetch_hosts_text(&self) -> String {
        let mut allowed: Vec<String> = Vec::new();
        let mut denied: Vec<String> = Vec::new();
        let mut every = self.mode() == Mode::AllowAll;
        let note = |raw: &str, into: &mut Vec<String>, every: &mut bool| match raw.split_once(':') {
            Some(("fetch", host)) if !host.is_empty() && !into.iter().any(|h| h == host) => {
                into.push(host.to_string());
            }
            Some(("fetch", host)) if !host.is_empty() => {}
            _ if raw == "fetch" || raw == "*" => *every = true,
            _ => {}
        };
        for rule in &self.policy.rules {
            match rule.decision {
                RuleDecision::Allow => note(rule.pattern.as_str(), &mut allowed, &mut every),
                RuleDecision::Deny => {
                    let mut all = false;
                    note(rule.pattern.as_str(), &mut denied, &mut all);
                }
                RuleDecision::Ask => {}
            }
        }
        for g in &self.cli_grants {
            note(g.as_str(), &mut allowed, &mut every);
        }
        if let Ok(grants) = self.project_grants.current() {
            for g in grants {
                note(g.pattern.as_str(), &mut allowed, &mut every);
            }
        }
        let mut text = if every {
            "Every public host is reached without asking in this setup.".to_string()
        } else if allowed.is_empty() {
            "No host is allowed in advance: each new host needs the user's approval (a denial \
             says so; do not retry it unchanged)."
                .to_string()
        } else {
            format!(
                "Hosts reached without asking: {}. Any other host needs the user's approval.",
                quoted_list(&allowed)
            )
        };
        if !denied.is_empty() {
            text.push_str(&format!(
                " Never reached (the policy denies them): {}.",
                quoted_list(&denied)
            ));
        }
        text.push_str(
            " Loopback, private and link-local addresses are refused unless the policy names \
             them in `[network] allow_private`.",
        );
        text
    }
}

fn read_only_text() -> String {
    let git = catalog::git_read_only_subcommands().join(", ");
    let names: Vec<String> = catalog::read_only_programs()
        .into_iter()
        .map(|p| match p {
            "git" => format!("`git` ({git})"),
            "find" => "`find` (without -exec, -delete or -fprint)".to_string(),
            p => format!("`{p}`"),
        })
        .collect();
    format!(
        "{}, each with only its read-only options (anything else asks)",
        names.join(", ")
    )
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `text` with each `{{name}}` that `value` knows replaced; anything else is kept as written.
pub fn fill(text: &str, value: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len() + 512);
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) => {
                let name = after[..close].trim();
                match value(name).filter(|_| PLACEHOLDERS.contains(&name)) {
                    Some(v) => out.push_str(&v),
                    None => out.push_str(&rest[open..open + 2 + close + 2]),
                }
                rest = &after[close + 2..];
            }
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether `tool`'s description has placeholders [`Gate::described`] fills (from the policy,
/// the mode and the grants in force); without any, its description is the registry's as is.
pub fn has_facts(tool: &ToolInfo) -> bool {
    tool.builtin && tool.description.contains("{{")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_replaces_known_names_and_keeps_the_rest() {
        let v = |n: &str| (n == "shell.banned").then(|| "`curl`".to_string());
        assert_eq!(
            fill(
                "no {{shell.banned}} here; {{x}} {{ shell.banned }} {{open",
                v
            ),
            "no `curl` here; {{x}} `curl` {{open"
        );
        assert_eq!(fill("plain", v), "plain");
        // A name the filler knows but that is not a placeholder stays as written.
        assert_eq!(fill("{{other}}", |_| Some("x".into())), "{{other}}");
    }

    #[test]
    fn read_only_text_names_git_subcommands() {
        let t = read_only_text();
        assert!(
            t.contains("`cat`") && t.contains("`git` (status, diff"),
            "{t}"
        );
    }
}
