//! Keys and the rules that match them.
//!
//! A key is `tool` or `tool:target`: `write:src/` (a write keys on the parent directory),
//! `read:src/main.rs`, `fetch:api.github.com`, `shell:cargo` (a simple command keys on its
//! program), `shell:<exact text>` (a compound command). A rule's key pattern is the same with
//! globs in the target (`write:src/**`, `fetch:*.github.com`), or for the shell an argv pattern
//! (`shell:cargo test **`: a word matches itself, `*` exactly one argument, a trailing `**` the
//! rest, none included).

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

/// What a rule says about the calls it matches. Ordered by strictness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleDecision {
    /// Run without asking (project scope: subject to the ceiling rule).
    Allow,
    /// Always ask, even when a grant exists.
    Ask,
    /// Never run.
    Deny,
}

impl RuleDecision {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleDecision::Allow => "allow",
            RuleDecision::Ask => "ask",
            RuleDecision::Deny => "deny",
        }
    }
}

/// A call's key: the tool, the target (if any), and for shell commands the argv.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallKey {
    /// The tool name.
    pub tool: String,
    /// The target: a workspace-relative path, a directory with a trailing `/`, a host, a
    /// program name or a whole command text.
    pub target: Option<String>,
    /// For a simple shell command, its argv (program first).
    pub argv: Option<Vec<String>>,
}

impl CallKey {
    /// A key with only a tool.
    pub fn tool(tool: &str) -> Self {
        CallKey {
            tool: tool.to_string(),
            target: None,
            argv: None,
        }
    }

    /// A key with a target.
    pub fn with_target(tool: &str, target: &str) -> Self {
        CallKey {
            tool: tool.to_string(),
            target: Some(target.to_string()),
            argv: None,
        }
    }

    /// Parse `tool` or `tool:target` (a rule's `match` example, a `--grant`).
    pub fn parse(text: &str) -> Self {
        match text.split_once(':') {
            Some((tool, target)) => {
                let mut key = CallKey::with_target(tool, target);
                if tool == "shell" {
                    key.argv = simple_words(target);
                }
                key
            }
            None => CallKey::tool(text),
        }
    }
}

impl std::fmt::Display for CallKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.target {
            Some(t) => write!(f, "{}:{t}", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

/// Split plain text into words when it has no quoting or shell syntax at all (for examples).
fn simple_words(text: &str) -> Option<Vec<String>> {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " -_./=,:@+%".contains(c));
    plain.then(|| text.split_whitespace().map(str::to_string).collect())
}

/// A compiled key pattern.
#[derive(Clone, Debug)]
pub struct KeyPattern {
    raw: String,
    tool: String,
    target: Target,
}

#[derive(Clone, Debug)]
enum Target {
    /// `tool` alone: every call of the tool.
    Any,
    /// `tool:glob`.
    Glob(GlobMatcher),
    /// `shell:word word * **`.
    Argv(Vec<String>),
}

impl KeyPattern {
    /// Compile `tool`, `tool:glob` or `shell:argv pattern`.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let (tool, target) = match raw.split_once(':') {
            Some((tool, target)) => (tool, Some(target)),
            None => (raw, None),
        };
        let tool_ok = tool == "*"
            || (!tool.is_empty()
                && tool.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' || c == '.'
                }));
        if !tool_ok {
            return Err(format!(
                "`{raw}`: the tool part `{tool}` is not a tool name (or `*`)"
            ));
        }
        let target = match target {
            None => Target::Any,
            Some("") => return Err(format!("`{raw}`: empty target after `:`")),
            Some(t) if tool == "shell" && t.contains(' ') => {
                let words: Vec<String> = t.split_whitespace().map(str::to_string).collect();
                if let Some(i) = words.iter().position(|w| w == "**") {
                    if i != words.len() - 1 {
                        return Err(format!("`{raw}`: `**` may only end an argv pattern"));
                    }
                }
                Target::Argv(words)
            }
            Some(t) => Target::Glob(
                // `./**` is "anywhere in the workspace" as users write it; keys have no `./`
                // prefix except the root's own `./` (its top-level files), which stays.
                GlobBuilder::new(match t.strip_prefix("./") {
                    Some(rest) if !rest.is_empty() && tool != "shell" => rest,
                    _ => t,
                })
                .literal_separator(true)
                .build()
                .map_err(|e| format!("`{raw}`: {e}"))?
                .compile_matcher(),
            ),
        };
        Ok(KeyPattern {
            raw: raw.to_string(),
            tool: tool.to_string(),
            target,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The tool part (`*` for any).
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Whether the pattern matches `key`.
    pub fn matches(&self, key: &CallKey) -> bool {
        if self.tool != "*" && self.tool != key.tool {
            return false;
        }
        match (&self.target, &key.target) {
            (Target::Any, _) => true,
            (Target::Glob(_), None) => false,
            // A shell key on a whole command text is matched only by that exact text (or by
            // `shell` alone): a glob never stretches a program name over a compound command.
            (Target::Glob(_), Some(t))
                if key.tool == "shell" && t.contains(char::is_whitespace) =>
            {
                self.raw.split_once(':').is_some_and(|(_, raw)| raw == t)
            }
            (Target::Glob(g), Some(t)) => {
                // `write:src/**` also covers the directory key `write:src/` itself.
                g.is_match(t) || (t.ends_with('/') && g.is_match(t.trim_end_matches('/')))
            }
            (Target::Argv(words), t) => match &key.argv {
                Some(argv) => argv_matches(words, argv),
                // A compound command: only its exact text.
                None => t
                    .as_deref()
                    .is_some_and(|t| self.raw.split_once(':').is_some_and(|(_, raw)| raw == t)),
            },
        }
    }
}

/// `*` matches one argument, a trailing `**` the rest (none included), other words themselves.
pub fn argv_matches(pattern: &[String], argv: &[String]) -> bool {
    let mut i = 0;
    for (pi, word) in pattern.iter().enumerate() {
        if word == "**" && pi == pattern.len() - 1 {
            return true;
        }
        let Some(arg) = argv.get(i) else {
            return false;
        };
        if word != "*" && word != arg {
            return false;
        }
        i += 1;
    }
    i == argv.len()
}

#[cfg(test)]
#[path = "key_tests.rs"]
mod tests;
