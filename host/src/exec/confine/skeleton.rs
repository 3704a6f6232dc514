//! The new root's skeleton: the empty directories and files the view's mounts land on, the
//! `/dev` links and the empty file bound over masked files. It depends only on which host
//! paths the view binds (system directories, device nodes, `$HOME`, PATH entries, the
//! workspace), not on the call, so it is laid out once and shared by every command with the
//! same layout: each command binds it onto itself in its own mount namespace and makes it
//! read-only there, so no command can change it.
//!
//! A skeleton is reused for at most [`MAX_AGE`] and only while its marker file is still
//! there (a temp-file cleaner may have removed it); one a running command still uses is
//! removed only after that command ends.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to make under the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A directory (and its parents).
    Dir(PathBuf),
    /// An empty file (and its parent directories).
    File(PathBuf),
    /// A symbolic link to the given target.
    Link(PathBuf, PathBuf),
}

/// Skeletons older than this are not reused.
const MAX_AGE: Duration = Duration::from_secs(300);

/// Skeletons kept for reuse at once (different layouts: workspaces, read-only binds).
const KEEP: usize = 4;

/// The marker whose absence means the skeleton was tampered with or cleaned away: the empty,
/// read-only file bound over masked files.
pub const EMPTY: &str = ".empty";

/// One laid-out root, removed (off the call's path) when the last command using it is gone.
pub struct Skeleton {
    dir: Option<tempfile::TempDir>,
    layout: Vec<Entry>,
    made: Instant,
}

impl Skeleton {
    /// The directory that becomes the command's `/`.
    pub fn root(&self) -> PathBuf {
        self.dir
            .as_ref()
            .map_or(PathBuf::from("/nonexistent"), |d| d.path().join("root"))
    }

    fn usable(&self, layout: &[Entry]) -> bool {
        self.layout == layout
            && self
                .root()
                .join(EMPTY)
                .symlink_metadata()
                .is_ok_and(|m| m.is_file())
    }

    fn build(base: &Path, layout: Vec<Entry>) -> Result<Skeleton, String> {
        let fail = |what: &Path, e: std::io::Error| {
            format!("preparing the command's view (`{}`): {e}", what.display())
        };
        let dir = tempfile::Builder::new()
            .prefix("toolgate-root-")
            .tempdir_in(base)
            .map_err(|e| fail(base, e))?;
        let root = dir.path().join("root");
        std::fs::create_dir(&root).map_err(|e| fail(&root, e))?;
        for entry in &layout {
            match entry {
                Entry::Dir(rel) => {
                    let at = root.join(rel);
                    std::fs::create_dir_all(&at).map_err(|e| fail(&at, e))?;
                }
                Entry::File(rel) => {
                    let at = root.join(rel);
                    if let Some(parent) = at.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| fail(parent, e))?;
                    }
                    if at.symlink_metadata().is_err() {
                        std::fs::write(&at, b"").map_err(|e| fail(&at, e))?;
                    }
                }
                Entry::Link(rel, to) => {
                    let at = root.join(rel);
                    if let Some(parent) = at.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| fail(parent, e))?;
                    }
                    #[cfg(unix)]
                    std::os::unix::fs::symlink(to, &at).map_err(|e| fail(&at, e))?;
                }
            }
        }
        let empty = root.join(EMPTY);
        std::fs::write(&empty, b"").map_err(|e| fail(&empty, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o444));
        }
        Ok(Skeleton {
            dir: Some(dir),
            layout,
            made: Instant::now(),
        })
    }
}

impl Drop for Skeleton {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            super::cleanup::remove_later(dir);
        }
    }
}

/// The skeletons kept for reuse (one set per process).
pub struct Skeletons {
    kept: Mutex<Vec<Arc<Skeleton>>>,
}

impl Skeletons {
    /// None kept yet.
    pub const fn new() -> Skeletons {
        Skeletons {
            kept: Mutex::new(Vec::new()),
        }
    }

    /// A skeleton with exactly `layout` (made in this order) under `base`: a kept one, or a
    /// new one laid out now.
    pub fn get(&self, base: &Path, layout: Vec<Entry>) -> Result<Arc<Skeleton>, String> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        // Too old to reuse: forgotten (removed once no command uses it).
        kept.retain(|s| s.made.elapsed() < MAX_AGE);
        if let Some(s) = kept.iter().find(|s| s.usable(&layout)) {
            return Ok(s.clone());
        }
        kept.retain(|s| s.layout != layout);
        let made = Arc::new(Skeleton::build(base, layout)?);
        if kept.len() >= KEEP {
            kept.remove(0);
        }
        kept.push(made.clone());
        Ok(made)
    }

    /// Forget every kept skeleton (each is removed once no command uses it).
    pub fn clear(&self) {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}
