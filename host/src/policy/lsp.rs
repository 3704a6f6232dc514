//! `[lsp]`: the language servers behind the lsp tools.
//!
//! ```toml
//! [lsp]
//! diagnostics_after_edit = true   # edit/write/multiedit append the file's new diagnostics
//! timeout_ms = 30000              # how long a request waits by default (1..=600000)
//!
//! [lsp.python]                    # one table per language: [a-z0-9_+-]{1,32}
//! command = ["pylsp"]             # argv: a program found on PATH, or an absolute path
//! extensions = ["py", "pyi"]      # the files it handles, without the dot
//! [lsp.c]
//! disabled = true                 # turn a built-in or detected language off
//! ```
//!
//! Layers (built-in < user < workspace < command line < managed): a higher layer's value
//! replaces a lower one's, field by field (a table that sets only `extensions` keeps the
//! command below it). `command` runs a program on this machine and `extensions` choose which
//! server reads which files, so an untrusted workspace's are ignored (and reported). Every
//! layer may set `diagnostics_after_edit`, `timeout_ms` and `disabled = true`; `disabled =
//! false` turns a language back on only from a trusted layer below the managed one (a managed
//! `disabled = false` changes nothing, like every managed value that would loosen).
//!
//! A language whose `command` no layer set keeps the server toolgate knows for it (the
//! consumer fills it in); one with `disabled` is off whatever its command.

use super::Problem;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a request waits when no layer sets `timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest `timeout_ms` a policy may set (10 minutes).
const MAX_TIMEOUT_MS: u64 = 600_000;

/// The language servers a policy configures (`[lsp]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LspPolicy {
    /// `edit`, `write` and `multiedit` append the file's new diagnostics (default false).
    pub diagnostics_after_edit: bool,
    /// How long a request waits for a server's answer by default (default 30 s).
    pub timeout: Duration,
    /// The `[lsp.<language>]` tables, by language name.
    pub languages: BTreeMap<String, LspLanguage>,
}

impl Default for LspPolicy {
    fn default() -> Self {
        LspPolicy {
            diagnostics_after_edit: false,
            timeout: DEFAULT_TIMEOUT,
            languages: BTreeMap::new(),
        }
    }
}

/// One `[lsp.<language>]` table, as the layers left it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LspLanguage {
    /// The server's argv (a program on `PATH` or an absolute path). Empty: no layer set one,
    /// the server toolgate knows for this language is used.
    pub command: Vec<String>,
    /// File extensions it handles, without the dot. Empty: no layer set them, the known
    /// server's are used.
    pub extensions: Vec<String>,
    /// Turned off: no server runs for this language.
    pub disabled: bool,
    /// The policy file (or flag) of the last layer that changed it, for messages.
    pub source: String,
}

/// `[lsp]` as written (checked by [`check`]).
#[derive(Clone, Debug, Default)]
pub(super) struct LspFile {
    diagnostics_after_edit: Option<bool>,
    timeout_ms: Option<toml::Spanned<u64>>,
    languages: Vec<(String, toml::Spanned<LanguageFile>)>,
}

/// `[lsp.<language>]` as written.
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a `[lsp.<language>]` table (`command`, `extensions`, `disabled`); `[lsp]` itself takes only `diagnostics_after_edit` and `timeout_ms`"
)]
struct LanguageFile {
    command: Option<Vec<String>>,
    extensions: Option<Vec<String>>,
    disabled: Option<bool>,
}

/// `[lsp]` mixes its own two keys with a table per language, so it is read by hand: every
/// key but the two is a language, read with `deny_unknown_fields` (a misspelt
/// `diagnostics_after_edit = true` fails as a value that is not a table).
impl<'de> Deserialize<'de> for LspFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Tables;
        impl<'de> Visitor<'de> for Tables {
            type Value = LspFile;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("the `[lsp]` table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LspFile, A::Error> {
                let mut out = LspFile::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "diagnostics_after_edit" => {
                            out.diagnostics_after_edit = Some(map.next_value()?)
                        }
                        "timeout_ms" => out.timeout_ms = Some(map.next_value()?),
                        _ => {
                            let table = map.next_value()?;
                            out.languages.push((key, table));
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(Tables)
    }
}

impl LspFile {
    /// Every `command` this layer sets, with its language (what trust binds).
    pub(super) fn commands(&self) -> Vec<(&str, &[String])> {
        self.languages
            .iter()
            .filter_map(|(n, t)| t.get_ref().command.as_deref().map(|c| (n.as_str(), c)))
            .collect()
    }
}

fn name_ok(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_+-".contains(&b))
}

/// Check one layer's `[lsp]` (`at` turns a byte offset into `file:line`); every problem is
/// added to `problems`. The file comes back for the layer to keep.
pub(super) fn check(
    file: Option<LspFile>,
    at: &dyn Fn(usize) -> String,
    problems: &mut Vec<Problem>,
) -> LspFile {
    let file = file.unwrap_or_default();
    let mut error = |location: String, message: String| {
        problems.push(Problem {
            location,
            message,
            severity: "error",
        })
    };
    if let Some(t) = &file.timeout_ms {
        if !(1..=MAX_TIMEOUT_MS).contains(t.get_ref()) {
            error(
                at(t.span().start),
                format!(
                    "[lsp] timeout_ms = {}: use 1 to {MAX_TIMEOUT_MS} milliseconds",
                    t.get_ref()
                ),
            );
        }
    }
    for (name, table) in &file.languages {
        let location = at(table.span().start);
        let mut bad = |message: String| error(location.clone(), format!("[lsp.{name}] {message}"));
        if !name_ok(name) {
            bad("the language name may hold only 1 to 32 of `a`-`z`, `0`-`9`, `_`, `+` and `-` (`[lsp.python]`)".into());
        }
        let t = table.get_ref();
        match t.command.as_deref().map(|c| c.first().map(String::as_str)) {
            None => {}
            Some(None) => bad("`command` is empty: name the server's program (`command = [\"pylsp\"]`), or turn the language off with `disabled = true`".into()),
            Some(Some("")) => bad("`command` starts with an empty program name".into()),
            Some(Some(program)) if program.contains('/') && !program.starts_with('/') => bad(format!(
                "`command` runs `{program}`, a relative path: a program in the workspace must never run; use a name found on PATH (`pylsp`) or an absolute path (`/usr/bin/pylsp`)"
            )),
            Some(Some(_)) => {}
        }
        match t.extensions.as_deref() {
            Some([]) => bad("`extensions` is empty: list the files it handles (`extensions = [\"py\"]`), or turn the language off with `disabled = true`".into()),
            Some(list) => {
                for e in list {
                    if e.is_empty() || e.contains(['.', '/', '\\']) {
                        bad(format!("extension `{e}`: write it without a dot or a slash (`py`, not `.py`)"));
                    }
                }
            }
            None => {}
        }
    }
    file
}

/// Apply one layer's `[lsp]` (checked at load): `who` is its origin, kind and whether only
/// what is stricter applies (an untrusted layer).
pub(super) fn apply(
    p: &mut LspPolicy,
    file: &LspFile,
    (origin, kind, strict_only): (&str, super::LayerKind, bool),
    applied: &mut Vec<String>,
    ignore: &mut dyn FnMut(String, String),
) {
    let ceiling = kind == super::LayerKind::Managed;
    if let Some(v) = file.diagnostics_after_edit {
        p.diagnostics_after_edit = v;
        applied.push(format!("[lsp] diagnostics_after_edit = {v}"));
    }
    if let Some(ms) = file.timeout_ms.as_ref().map(|t| *t.get_ref()) {
        p.timeout = Duration::from_millis(ms);
        applied.push(format!("[lsp] timeout_ms = {ms}"));
    }
    for (name, table) in &file.languages {
        let t = table.get_ref();
        let mut changed = false;
        let mut entry = p.languages.get(name).cloned().unwrap_or_default();
        if let Some(c) = &t.command {
            let part = format!("[lsp.{name}] command = {c:?}");
            if strict_only {
                ignore(
                    part,
                    "runs a program on this machine; an untrusted workspace's never runs".into(),
                );
            } else {
                entry.command = c.clone();
                changed = true;
                applied.push(part);
            }
        }
        if let Some(e) = &t.extensions {
            let part = format!("[lsp.{name}] extensions = {e:?}");
            if strict_only {
                ignore(
                    part,
                    "chooses which language server reads which files".into(),
                );
            } else {
                entry.extensions = e.clone();
                changed = true;
                applied.push(part);
            }
        }
        match t.disabled {
            None => {}
            Some(true) => {
                entry.disabled = true;
                changed = true;
                applied.push(if ceiling {
                    format!("[lsp.{name}] disabled = true (no layer may turn it on)")
                } else {
                    format!("[lsp.{name}] disabled = true")
                });
            }
            Some(false) => {
                let part = format!("[lsp.{name}] disabled = false");
                if ceiling && entry.disabled {
                    applied.push(format!("{part} (a ceiling: it turns nothing back on)"));
                } else if strict_only && entry.disabled {
                    ignore(
                        part,
                        "would turn back on a language server a layer below turned off".into(),
                    );
                } else {
                    changed |= entry.disabled;
                    entry.disabled = false;
                    applied.push(part);
                }
            }
        }
        if changed {
            entry.source = origin.to_string();
            p.languages.insert(name.clone(), entry);
        }
    }
}

impl LspPolicy {
    /// What `policy check` prints: `lsp: diagnostics after edit` when set, then one line per
    /// configured language (`lsp python: pylsp (py, pyi) from <origin>`); each line ends with
    /// a newline, nothing configured is the empty text.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if self.diagnostics_after_edit {
            out.push_str("lsp: diagnostics after edit\n");
        }
        for (name, l) in &self.languages {
            let what = if l.disabled {
                "disabled".to_string()
            } else {
                let command = if l.command.is_empty() {
                    "the built-in server".to_string()
                } else {
                    l.command.join(" ")
                };
                let extensions = if l.extensions.is_empty() {
                    "its built-in extensions".to_string()
                } else {
                    l.extensions.join(", ")
                };
                format!("{command} ({extensions})")
            };
            out.push_str(&format!("lsp {name}: {what} from {}\n", l.source));
        }
        out
    }
}

#[cfg(test)]
#[path = "lsp_tests.rs"]
mod tests;
