//! Project grants: approvals saved as "always for this project" in `.toolgate/grants.toml`,
//! a human-readable file written atomically and picked up again when edited by hand.
//!
//! The file is trusted no more than a policy: an entry that reaches a session-capped tool is a
//! CeilingViolation (reported, never honoured), a symlinked or malformed file is an error, and
//! nothing in it can override scope or a deny rule.

use super::rules::{CallKey, KeyPattern};
use super::Problem;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

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
}

type Stamp = (SystemTime, u64);

/// The last file stamp seen and what was parsed from it.
type Cached = Option<(Option<Stamp>, Result<Vec<Grant>, Problem>)>;

/// The grants file with a cache that is refreshed when its mtime or size changes.
pub struct ProjectGrants {
    path: PathBuf,
    cache: Mutex<Cached>,
}

impl ProjectGrants {
    /// The grants file at `path` (it need not exist).
    pub fn new(path: PathBuf) -> Self {
        ProjectGrants {
            path,
            cache: Mutex::new(None),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current grants, reloading the file if it changed. A malformed or symlinked file is
    /// an error (callers fail closed).
    pub fn current(&self) -> Result<Vec<Grant>, Problem> {
        let stamp = self.stamp()?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((cached_stamp, value)) = cache.as_ref() {
            if *cached_stamp == stamp {
                return value.clone();
            }
        }
        let value = match stamp {
            None => Ok(Vec::new()),
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
            Ok(meta) if !meta.is_file() => Err(self.problem(None, "is not a regular file".into())),
            Ok(meta) => Ok(Some((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.problem(None, format!("cannot be read: {e}"))),
        }
    }

    fn parse(&self) -> Result<Vec<Grant>, Problem> {
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| self.problem(None, format!("cannot be read: {e}")))?;
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let file: GrantsFile = toml::from_str(&text).map_err(|e| {
            self.problem(
                e.span().map(|s| line_of(s.start)),
                format!("is malformed: {}", e.message()),
            )
        })?;
        file.grants
            .iter()
            .map(|g| {
                let line = line_of(g.span().start);
                KeyPattern::parse(&g.get_ref().key)
                    .map(|pattern| Grant {
                        pattern,
                        source: format!("{}:{line}", self.path.display()),
                    })
                    .map_err(|m| self.problem(Some(line), format!("grant key {m}")))
            })
            .collect()
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
        if entries.iter().any(|e| e.key == key) {
            return Ok(());
        }
        entries.push(GrantEntry {
            key: key.to_string(),
            added: Some(crate::state::now_ms().to_string()),
            by: Some(by.to_string()),
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
        let text = std::fs::read_to_string(&self.path)
            .map_err(|e| self.problem(None, format!("cannot be read: {e}")))?;
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
             # Edit by hand or with `toolgate grants`; changes apply to the next call.\n\
             # Session-capped tools (the shell) can never be granted here.\n\n{body}"
        );
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| self.problem(None, format!("cannot create its directory: {e}")))?;
        }
        crate::fsutil::write_atomic(&self.path, text.as_bytes())
            .map_err(|e| self.problem(None, format!("cannot be written: {e}")))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn add_find_revoke_and_reload_after_hand_edit() {
        let dir = tempfile::tempdir().unwrap();
        let g = ProjectGrants::new(dir.path().join("grants.toml"));
        assert!(g
            .find(&CallKey::with_target("write", "src/"))
            .unwrap()
            .is_none());
        g.add("write:src/**", "test").unwrap();
        assert!(g
            .find(&CallKey::with_target("write", "src/a/"))
            .unwrap()
            .is_some());
        // A hand edit is picked up without a restart.
        let text = std::fs::read_to_string(g.path()).unwrap();
        std::fs::write(g.path(), format!("{text}\n[[grants]]\nkey = \"edit\"\n")).unwrap();
        assert!(g
            .find(&CallKey::with_target("edit", "x/"))
            .unwrap()
            .is_some());
        assert_eq!(g.revoke("write:src/**").unwrap(), 1);
        assert!(g
            .find(&CallKey::with_target("write", "src/a/"))
            .unwrap()
            .is_none());
    }

    #[test]
    fn symlink_and_garbage_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.toml");
        std::fs::write(&elsewhere, "[[grants]]\nkey = \"write\"\n").unwrap();
        let path = dir.path().join("grants.toml");
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let g = ProjectGrants::new(path.clone());
        assert!(g.find(&CallKey::tool("write")).is_err());
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "[[grants]\n").unwrap();
        let err = g.current().unwrap_err();
        assert!(err.location.ends_with("grants.toml:1"), "{err:?}");
    }
}
