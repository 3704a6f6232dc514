//! `[shell] network`: which hosts shell commands reach, through the host's egress proxy
//! (`sandbox::net::egress`), or the whole network as an explicit escape hatch.
//!
//! ```toml
//! [shell]
//! network = ["index.crates.io", "*.example.org", "git.example.com:22"]  # or true / false
//! network_deny = ["evil.example.org"]   # deny wins
//! network_mode = "limited"              # or "full" (the default)
//! ```
//!
//! Layers (built-in < user < workspace < command line, under the managed ceiling):
//! - `network = [..]` adds its hosts (a union); an untrusted layer's non-empty list is ignored;
//!   a managed list is the set the others may choose from (the whole network below it becomes
//!   exactly that list).
//! - `network = false` turns the whole network off and clears the list, in any layer (it is
//!   stricter); `network = true` gives the whole network, never from an untrusted layer, and a
//!   managed `true` changes nothing.
//! - The managed layer's `network = false` or list is also kept as the [`NetworkCeiling`]:
//!   `false` gives commands no proxy at all (their namespace has no way out), a list bounds
//!   every later `net:` decision (rules, grants, a person's answer, `allow-all`) and the hosts
//!   `fetch`, `download` and plugins reach; a host outside it is refused, never asked.
//! - `network_deny` adds its hosts in every layer. `network_mode = "limited"` applies in every
//!   layer; `"full"` lifts it only from a trusted layer (an untrusted layer's is ignored, a
//!   managed layer's changes nothing).
//!
//! Every pattern is checked with [`HostPattern::parse`] when the file is read: a bad one stops
//! loading like any other policy error.

use super::{Problem, ShellFile, ShellPolicy};
use crate::sandbox::net::HostPattern;
use serde::Deserialize;

/// `[shell] network`: the whole network on or off, or the hosts reached through the proxy.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(
    untagged,
    expecting = "`[shell] network` is true, false or a list of hosts (\"index.crates.io\", \"*.example.org\", \"git.example.com:22\")"
)]
pub(super) enum NetworkFile {
    /// `true`: the whole network (no proxy); `false`: none, and no hosts listed.
    Whole(bool),
    /// The hosts commands may reach through the egress proxy.
    Hosts(Vec<String>),
}

/// The managed layer's `[shell] network`: the most that any other layer, grant, answer or
/// mode gives the network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkCeiling {
    /// The host patterns (as written) anything may reach; `None`: `network = false`, no
    /// network at all for shell commands.
    pub hosts: Option<Vec<String>>,
    /// The managed file that set it.
    pub origin: String,
}

impl NetworkCeiling {
    /// The ceiling's patterns (checked when the policy was loaded; `None` when it is off).
    pub fn patterns(&self) -> Option<Vec<HostPattern>> {
        self.hosts.as_ref().map(|list| {
            list.iter()
                .filter_map(|t| HostPattern::parse(t).ok())
                .collect()
        })
    }

    /// Whether `scheme://host:port` is inside the ceiling, read as the proxy reads its
    /// allowlist: a pattern without a port names the web ports (80, 443) only.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.patterns().is_some_and(|list| {
            list.iter().any(|p| {
                p.matches(scheme, host, port) && (p.port().is_some() || port == 80 || port == 443)
            })
        })
    }

    /// Why `what` (`net:HOST`, `fetch:HOST`, …) is refused: the ceiling, where it is set, and
    /// that nothing below it reaches past it.
    pub fn refusal(&self, what: &str) -> String {
        match &self.hosts {
            None => format!(
                "`{what}` is refused by the managed policy's network ceiling: `[shell] network = false` in {} gives shell commands no network at all; no grant, answer or mode lifts it (ask whoever manages this machine)",
                self.origin
            ),
            Some(list) => format!(
                "`{what}` is outside the managed policy's network ceiling: `[shell] network = {list:?}` in {} bounds every network decision; no grant, answer or mode reaches past it (ask whoever manages this machine to add the host there)",
                self.origin
            ),
        }
    }

    /// The ceiling in one line (for `policy check` and `policy explain`).
    pub fn text(&self) -> String {
        match &self.hosts {
            None => format!(
                "managed ceiling ({}): no network for shell commands, whatever the grants, mode or answers",
                self.origin
            ),
            Some(list) => format!(
                "managed ceiling ({}): only {} may ever be reached, whatever the grants, mode or answers",
                self.origin,
                if list.is_empty() {
                    "no host".to_string()
                } else {
                    list.join(", ")
                }
            ),
        }
    }
}

/// The two values `network_mode` takes.
const MODES: &str = "use \"limited\" (only GET, HEAD and OPTIONS on plain HTTP) or \"full\"";

/// Check one layer's `[shell] network`, `network_deny` and `network_mode`; every problem is
/// added to `problems` (`at` turns a byte offset into `file:line`).
pub(super) fn check(
    shell: &ShellFile,
    origin: &str,
    at: &dyn Fn(usize) -> String,
    problems: &mut Vec<Problem>,
) {
    let lists = [
        ("[shell] network", shell.network.as_ref().and_then(hosts)),
        ("[shell] network_deny", shell.network_deny.as_deref()),
    ];
    for (key, list) in lists {
        for text in list.unwrap_or_default() {
            if let Err(message) = HostPattern::parse(text) {
                problems.push(Problem {
                    location: origin.to_string(),
                    message: format!("{key}: {message}"),
                    severity: "error",
                });
            }
        }
    }
    if let Some(mode) = &shell.network_mode {
        if limited(mode.get_ref()).is_none() {
            problems.push(Problem {
                location: at(mode.span().start),
                message: format!(
                    "[shell] network_mode: unknown value `{}`; {MODES}",
                    mode.get_ref()
                ),
                severity: "error",
            });
        }
    }
}

fn hosts(f: &NetworkFile) -> Option<&[String]> {
    match f {
        NetworkFile::Hosts(list) => Some(list),
        NetworkFile::Whole(_) => None,
    }
}

/// `Some(true)` for `"limited"`, `Some(false)` for `"full"`.
fn limited(mode: &str) -> Option<bool> {
    match mode {
        "limited" => Some(true),
        "full" => Some(false),
        _ => None,
    }
}

/// Whether two patterns are the same as written (case and surrounding blanks aside).
fn same(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Add the patterns of `list` that `to` lacks.
fn union(to: &mut Vec<String>, list: &[String]) {
    for x in list {
        if !to.iter().any(|y| same(x, y)) {
            to.push(x.clone());
        }
    }
}

/// Apply one layer's `[shell] network*` settings (checked at load). `strict_only` for an
/// untrusted layer, `managed` (the file) for the managed one.
pub(super) fn apply(
    p: &mut ShellPolicy,
    sh: &ShellFile,
    (strict_only, managed): (bool, Option<&str>),
    applied: &mut Vec<String>,
    ignore: &mut dyn FnMut(String, String),
) {
    let ceiling = managed.is_some();
    if let (Some(origin), Some(f)) = (managed, &sh.network) {
        let hosts = match f {
            NetworkFile::Whole(false) => Some(None),
            NetworkFile::Hosts(list) => Some(Some(list.clone())),
            NetworkFile::Whole(true) => None,
        };
        if let Some(hosts) = hosts {
            p.network_ceiling = Some(NetworkCeiling {
                hosts,
                origin: origin.to_string(),
            });
        }
    }
    let as_ceiling = |part: String| {
        if ceiling {
            format!("{part} (a ceiling)")
        } else {
            part
        }
    };
    match &sh.network {
        None => {}
        Some(NetworkFile::Whole(false)) => {
            p.network = false;
            p.network_allow.clear();
            applied.push(as_ceiling("[shell] network = false".into()));
        }
        Some(NetworkFile::Whole(true)) => {
            let part = "[shell] network = true".to_string();
            if ceiling {
                applied.push(as_ceiling(part));
            } else if strict_only {
                ignore(
                    part,
                    "gives shell commands the network (a way out for anything they read)".into(),
                );
            } else {
                p.network = true;
                applied.push(part);
            }
        }
        Some(NetworkFile::Hosts(list)) => {
            let part = format!("[shell] network = {list:?}");
            if ceiling {
                if p.network {
                    p.network = false;
                    p.network_allow.clear();
                    union(&mut p.network_allow, list);
                } else {
                    p.network_allow.retain(|x| list.iter().any(|y| same(x, y)));
                }
                applied.push(as_ceiling(part));
            } else if strict_only {
                if !list.is_empty() {
                    ignore(part, "gives shell commands hosts to reach".into());
                }
            } else {
                union(&mut p.network_allow, list);
                applied.push(part);
            }
        }
    }
    if let Some(list) = &sh.network_deny {
        union(&mut p.network_deny, list);
        applied.push(format!("[shell] network_deny = {list:?}"));
    }
    let Some(mode) = sh.network_mode.as_ref().map(|m| m.get_ref()) else {
        return;
    };
    let part = format!("[shell] network_mode = \"{mode}\"");
    match limited(mode) {
        Some(true) => {
            p.network_limited = true;
            applied.push(as_ceiling(part));
        }
        Some(false) if ceiling => applied.push(as_ceiling(part)),
        Some(false) if strict_only && p.network_limited => {
            ignore(part, "would lift `limited` set below it".into());
        }
        Some(false) => {
            p.network_limited = false;
            applied.push(part);
        }
        None => {}
    }
}

impl ShellPolicy {
    /// The proxy's allow and deny patterns (`network_allow`, `network_deny`), parsed. They were
    /// checked when the policy was loaded, so none is dropped here.
    pub fn egress_patterns(&self) -> (Vec<HostPattern>, Vec<HostPattern>) {
        let parse = |list: &[String]| {
            list.iter()
                .filter_map(|t| HostPattern::parse(t).ok())
                .collect()
        };
        (parse(&self.network_allow), parse(&self.network_deny))
    }

    /// What shell commands reach, in one line (for `policy check`).
    pub fn network_text(&self) -> String {
        if self.network {
            let mut text = "the whole network (`[shell] network = true`: the escape hatch — commands reach every host, loopback and private ranges included)".to_string();
            if !self.network_deny.is_empty() || self.network_limited {
                text.push_str(
                    "; `network_deny` and `network_mode` do not apply: there is no proxy",
                );
            }
            return text;
        }
        let mut text = if self.network_allow.is_empty() {
            "no network without asking: no host is listed in `[shell] network`".to_string()
        } else {
            format!(
                "through the egress proxy to: {}",
                self.network_allow.join(", ")
            )
        };
        if !self.network_deny.is_empty() {
            text.push_str(&format!("; denied: {}", self.network_deny.join(", ")));
        }
        if self.network_limited {
            text.push_str("; limited (GET, HEAD, OPTIONS only)");
        }
        match &self.network_ceiling {
            Some(c) if c.hosts.is_none() => return c.text(),
            Some(c) => {
                text.push_str(
                    "; a host not listed is asked as `net:<host>` (session scope at most; denied hosts and hosts outside the ceiling never); ",
                );
                text.push_str(&c.text());
            }
            None => text.push_str(
                "; a host not listed is asked as `net:<host>` (session scope at most; denied hosts never)",
            ),
        }
        text
    }
}

#[cfg(test)]
#[path = "shell_network_tests.rs"]
mod tests;
