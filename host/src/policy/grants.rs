//! Project grants: approvals saved as "always for this project" in `.toolgate/grants.toml`,
//! a human-readable file written atomically and picked up again when edited by hand.
//!
//! The file is trusted no more than a policy: an entry that reaches a session-capped tool is a
//! CeilingViolation (reported, never honoured), a symlinked or malformed file is an error, and
//! nothing in it can override scope or a deny rule.
//!
//! A repository can ship this file, so each entry toolgate writes carries `sig`, an HMAC over
//! the workspace path and the key made with the user's own key (outside the workspace, see
//! [`super::trust::Keyring`]). An entry without a valid signature (shipped, copied from
//! another workspace, or added by hand) is ignored and named, until the user adopts it with
//! `toolgate trust` or `toolgate grants add`, or the run trusts the workspace
//! (`--trust-workspace`). Removing an entry by hand always works.

use super::trust::Keyring;
use super::{Ignored, Problem};
use crate::key::{CallKey, KeyPattern};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What a grant's signature covers.
const SIGNED_AS: &str = "toolgate-project-grant-v1";

/// One saved grant.
#[derive(Clone, Debug)]
pub struct Grant {
    /// The key pattern granted.
    pub pattern: KeyPattern,
    /// `grants.toml:LINE`.
    pub source: String,
}

#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct GrantsFile {
    #[serde(default)]
    grants: Vec<toml::Spanned<GrantEntry>>,
}

#[derive(Serialize, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct GrantEntry {
    key: String,
    #[serde(default)]
    added: Option<String>,
    #[serde(default)]
    by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sig: Option<String>,
}

type Stamp = (SystemTime, u64);

/// The honoured grants and the ignored entries of one version of the file.
type Parsed = Result<(Vec<Grant>, Vec<Ignored>), Problem>;

/// The last file stamp seen and what was parsed from it.
type Cached = Option<(Option<Stamp>, Parsed)>;

/// The grants file with a cache that is refreshed when its mtime or size changes.
pub struct ProjectGrants {
    path: PathBuf,
    cache: Mutex<Cached>,
    keyring: Option<Arc<Keyring>>,
    workspace: String,
    trust_all: bool,
}

impl ProjectGrants {
    /// The grants file at `path` (it need not exist), with no key: nothing in it verifies, so
    /// every entry is ignored. Use [`ProjectGrants::signed`] for a real workspace.
    pub fn new(path: PathBuf) -> Self {
        ProjectGrants {
            path,
            cache: Mutex::new(None),
            keyring: None,
            workspace: String::new(),
            trust_all: false,
        }
    }

    /// The grants file of `workspace`, verified with `keyring`; `trust_all` honours unsigned
    /// entries too (`--trust-workspace`).
    pub fn signed(path: PathBuf, workspace: &Path, keyring: Arc<Keyring>, trust_all: bool) -> Self {
        ProjectGrants {
            path,
            cache: Mutex::new(None),
            keyring: Some(keyring),
            workspace: workspace.to_string_lossy().into_owned(),
            trust_all,
        }
    }

    fn parts<'a>(&'a self, key: &'a str) -> [&'a str; 3] {
        [SIGNED_AS, &self.workspace, key]
    }

    fn verified(&self, e: &GrantEntry) -> bool {
        match (&self.keyring, &e.sig) {
            (Some(k), Some(sig)) => k.verify(&self.parts(&e.key), sig),
            _ => false,
        }
    }

    fn sign(&self, key: &str) -> Result<Option<String>, Problem> {
        match &self.keyring {
            None => Ok(None),
            Some(k) => k
                .sign(&self.parts(key))
                .map(Some)
                .map_err(|m| self.problem(None, format!("cannot sign the grant: {m}"))),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current grants, reloading the file if it changed. A malformed or symlinked file is
    /// an error (callers fail closed).
    pub fn current(&self) -> Result<Vec<Grant>, Problem> {
        self.parsed().map(|(g, _)| g)
    }

    /// The entries that are not honoured because nothing shows this user's toolgate wrote
    /// them.
    pub fn ignored(&self) -> Vec<Ignored> {
        self.parsed().map(|(_, i)| i).unwrap_or_default()
    }

    fn parsed(&self) -> Parsed {
        let stamp = self.stamp()?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((cached_stamp, value)) = cache.as_ref() {
            if *cached_stamp == stamp {
                return value.clone();
            }
        }
        let value = match stamp {
            None => Ok((Vec::new(), Vec::new())),
            Some(_) => self.parse(),
        };
        *cache = Some((stamp, value.clone()));
        value
    }

    fn problem(&self, line: Option<usize>, message: String) -> Problem {
        Problem {
            location: match line {
                Some(l) => format!("{}:{l}", self.path.display()),
                None => self.path.display().to_string(),
            },
            message,
            severity: "error",
        }
    }

    fn stamp(&self) -> Result<Option<Stamp>, Problem> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.file_type().is_symlink() => Err(self.problem(
                None,
                "is a symlink; toolgate refuses to follow it (replace it with a regular file or delete it)".into(),
            )),
            Ok(meta) if !meta.is_file() => Err(self.problem(
                None,
                format!(
                    "is {}, not a regular file; delete it (`rm -r {}`) and add grants again",
                    crate::fsutil::describe(meta.file_type()),
                    self.path.display()
                ),
            )),
            Ok(meta) => Ok(Some((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.problem(
                None,
                format!("cannot be read: {}", crate::fsutil::plain_error(&e)),
            )),
        }
    }

    fn read_text(&self) -> Result<String, Problem> {
        let bytes = super::trust::read_state_file(&self.path)
            .map_err(|m| {
                self.problem(
                    None,
                    m.replacen(&format!("{} ", self.path.display()), "", 1),
                )
            })?
            .unwrap_or_default();
        String::from_utf8(bytes).map_err(|_| self.problem(None, "is not UTF-8 text".into()))
    }

    fn parse(&self) -> Parsed {
        let text = self.read_text()?;
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let file: GrantsFile = toml::from_str(&text).map_err(|e| {
            self.problem(
                e.span().map(|s| line_of(s.start)),
                format!("is malformed: {}", e.message()),
            )
        })?;
        let mut grants = Vec::new();
        let mut ignored = Vec::new();
        for g in &file.grants {
            let line = line_of(g.span().start);
            let entry = g.get_ref();
            let pattern = KeyPattern::parse(&entry.key)
                .map_err(|m| self.problem(Some(line), format!("grant key {m}")))?;
            let source = format!("{}:{line}", self.path.display());
            if self.trust_all || self.verified(entry) {
                grants.push(Grant { pattern, source });
            } else {
                ignored.push(Ignored {
                    file: self.path.display().to_string(),
                    part: format!("grant `{}` (line {line})", entry.key),
                    reason: "not written by your toolgate (no valid signature), so the repository may have shipped it; adopt it with `toolgate grants add` or `toolgate trust`".into(),
                });
            }
        }
        Ok((grants, ignored))
    }

    /// The entries without a valid signature (what `toolgate trust` would adopt).
    pub fn unsigned_keys(&self) -> Result<Vec<String>, Problem> {
        Ok(self
            .entries()?
            .into_iter()
            .filter(|e| !self.verified(e))
            .map(|e| e.key)
            .collect())
    }

    /// Sign every entry that has no valid signature: the user adopts them as their own.
    pub fn adopt_all(&self) -> Result<usize, Problem> {
        let all = self.unsigned_keys()?;
        self.adopt_shown(&all).map(|(n, _)| n)
    }

    /// Sign the unsigned entries whose keys are in `shown` (what the user was shown and
    /// accepted); an entry added since is left unsigned. Returns how many were signed and
    /// the keys of the unsigned entries left.
    pub fn adopt_shown(&self, shown: &[String]) -> Result<(usize, Vec<String>), Problem> {
        let mut entries = self.entries()?;
        let mut n = 0;
        let mut left = Vec::new();
        for e in &mut entries {
            if self.verified(e) {
                continue;
            }
            if shown.contains(&e.key) {
                e.sig = self.sign(&e.key)?;
                n += 1;
            } else {
                left.push(e.key.clone());
            }
        }
        if n > 0 {
            self.write(&entries)?;
        }
        Ok((n, left))
    }

    /// The first grant matching `key`.
    pub fn find(&self, key: &CallKey) -> Result<Option<Grant>, Problem> {
        Ok(self.current()?.into_iter().find(|g| g.pattern.matches(key)))
    }

    /// Add a grant for `key` (atomically rewriting the file). Existing entries are kept as
    /// they are; an identical key is not added twice.
    pub fn add(&self, key: &str, by: &str) -> Result<(), Problem> {
        KeyPattern::parse(key).map_err(|m| self.problem(None, format!("grant key {m}")))?;
        let mut entries = self.entries()?;
        let sig = self.sign(key)?;
        if let Some(e) = entries.iter_mut().find(|e| e.key == key) {
            if self.verified(e) {
                return Ok(());
            }
            e.sig = sig;
            return self.write(&entries);
        }
        entries.push(GrantEntry {
            key: key.to_string(),
            added: Some(crate::state::now_ms().to_string()),
            by: Some(by.to_string()),
            sig,
        });
        self.write(&entries)
    }

    /// Remove every grant whose key is exactly `key`; returns how many were removed.
    pub fn revoke(&self, key: &str) -> Result<usize, Problem> {
        let mut entries = self.entries()?;
        let before = entries.len();
        entries.retain(|e| e.key != key);
        let removed = before - entries.len();
        if removed > 0 {
            self.write(&entries)?;
        }
        Ok(removed)
    }

    /// Every grant key with its source line.
    pub fn list(&self) -> Result<Vec<(String, String)>, Problem> {
        Ok(self
            .current()?
            .into_iter()
            .map(|g| (g.pattern.as_str().to_string(), g.source))
            .collect())
    }

    fn entries(&self) -> Result<Vec<GrantEntry>, Problem> {
        if self.stamp()?.is_none() {
            return Ok(Vec::new());
        }
        let text = self.read_text()?;
        let file: GrantsFile = toml::from_str(&text)
            .map_err(|e| self.problem(None, format!("is malformed: {}", e.message())))?;
        Ok(file.grants.into_iter().map(|g| g.into_inner()).collect())
    }

    fn write(&self, entries: &[GrantEntry]) -> Result<(), Problem> {
        #[derive(Serialize)]
        struct Out<'a> {
            grants: &'a [GrantEntry],
        }
        let body = toml::to_string(&Out { grants: entries })
            .map_err(|e| self.problem(None, e.to_string()))?;
        let text = format!(
            "# Project grants: approvals saved as \"always for this project\".\n\
             # Remove entries by hand or with `toolgate grants revoke`; add them with\n\
             # `toolgate grants add` (an entry without your toolgate's `sig` is ignored).\n\
             # Session-capped tools (the shell) can never be granted here.\n\n{body}"
        );
        if let Some(dir) = self.path.parent() {
            crate::workspace::layout::ensure_state_dir(dir).map_err(|e| {
                self.problem(
                    None,
                    format!("cannot be written: {}", crate::fsutil::plain_error(&e)),
                )
            })?;
        }
        crate::fsutil::write_atomic(&self.path, text.as_bytes()).map_err(|e| {
            self.problem(
                None,
                format!("cannot be written: {}", crate::fsutil::plain_error(&e)),
            )
        })
    }
}

/// Why a project grant for `key` must not be written: it reaches a tool capped at session
/// scope (`capped`: those tools' names; `net` is always one, the shell's network), the same
/// ceiling the ladder applies to a grant it finds. `None`: it may be granted.
pub fn ceiling_refusal(key: &KeyPattern, capped: &[String]) -> Option<String> {
    // The tool of the shell's `net:HOST` keys (`gate::egress::NET_KEY`): project grants are
    // never consulted for it.
    let net = "net";
    let tool = key.tool();
    let reached: Vec<&str> = capped
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(net))
        .filter(|t| tool == "*" || tool == *t)
        .collect();
    let first = reached.first()?;
    let why = if *first == net {
        "a command's network (`net:HOST`) can only be allowed per session".to_string()
    } else {
        format!("`{first}` runs real host processes (its component imports the host exec or lsp capability) and can only be allowed per session")
    };
    Some(format!(
        "a project grant for `{}` would allow {} for the whole project, but {why}; nothing was written (allow it for one session with `--grant '{}'`, or answer `session` when asked)",
        key.as_str(),
        reached
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", "),
        key.as_str()
    ))
}

#[cfg(test)]
#[path = "grants_tests.rs"]
mod tests;
