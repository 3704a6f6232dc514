//! Git entries a bind mount cannot freeze, put back after a command.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Git entries a bind mount cannot freeze (absent ones such as `commondir`, which would
/// redirect the host's git to a planted config, and symlinks): noted before the command and put
/// back after it, so nothing the command planted there reaches the user's own git.
pub(super) struct GitWatch {
    /// Workspace-relative entries and what they were: `None` absent, `Some(target)` a symlink.
    before: Vec<(String, Option<PathBuf>)>,
    /// What was put back (set once, at the first check after the command ended).
    done: Mutex<Option<Vec<String>>>,
}

impl GitWatch {
    pub(super) fn new(workspace: &Path, entries: &[String]) -> GitWatch {
        let before = entries
            .iter()
            .filter_map(|rel| {
                let p = workspace.join(rel);
                match p.symlink_metadata() {
                    Err(_) => Some((rel.clone(), None)),
                    Ok(m) if m.file_type().is_symlink() => {
                        std::fs::read_link(&p).ok().map(|t| (rel.clone(), Some(t)))
                    }
                    Ok(_) => None,
                }
            })
            .collect();
        GitWatch {
            before,
            done: Mutex::new(None),
        }
    }

    /// Put back every entry that changed; returns their paths (the same list every time).
    pub(super) fn check(&self, workspace: &Path) -> Vec<String> {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = done.as_ref() {
            return list.clone();
        }
        let mut reverted = Vec::new();
        for (rel, was) in &self.before {
            let p = workspace.join(rel);
            let now = p.symlink_metadata();
            let same = match (was, &now) {
                (None, Err(_)) => true,
                (Some(target), Ok(m)) if m.file_type().is_symlink() => {
                    std::fs::read_link(&p).is_ok_and(|t| &t == target)
                }
                _ => false,
            };
            if same {
                continue;
            }
            if let Ok(m) = now {
                let _ = if m.is_dir() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
            #[cfg(unix)]
            if let Some(target) = was {
                let _ = std::os::unix::fs::symlink(target, &p);
            }
            tracing::warn!(path = %rel, "a command planted a git entry; it was removed");
            reverted.push(rel.clone());
        }
        *done = Some(reverted.clone());
        reverted
    }
}
