//! What a shell command must not see or change inside the workspace (secrets, the host's
//! state, git's hooks and config): this module *finds* the paths, the mount code masks them.
//!
//! [`Finder::plan`] walks the whole workspace (secrets can be anywhere, `node_modules/` and
//! `target/` included) and returns a [`Plan`]: the deny-listed files and directories to hide,
//! the git directories to pin as mount points and the entries in them git executes or reads its
//! configuration from, to freeze read-only.
//!
//! # How the walk stays safe
//! - Every directory is opened relative to its parent's descriptor with
//!   `O_DIRECTORY | O_NOFOLLOW`, so a directory swapped for a symlink mid-walk fails to open and
//!   is skipped, never followed, and nothing outside the workspace is ever walked.
//! - Only `getdents` and `fstatat(AT_SYMLINK_NOFOLLOW)` touch entries: no non-directory is ever
//!   opened, so FIFOs and devices cannot block the walk.
//! - Symlinks are never listed, not even one whose name is deny-listed: a bind mount over a
//!   symlink would land on its *target*. That is fine because the shell sees what the file tools
//!   see: the file tools deny the symlink's name, and the target is judged by its own path (if the
//!   target is a deny-listed path inside the workspace it is masked where it is; if it is outside,
//!   the command's filesystem view does not contain it).
//! - A deny-listed directory is masked whole and not descended into; `.git` directories are read
//!   only to find their configuration and the git directories nested in `modules/` and
//!   `worktrees/` (never `objects/`). `.toolgate/` (the host's state) is left to the mount code.
//! - The work is bounded: [`MAX_DEPTH`] directories deep, [`MAX_ENTRIES`] entries in all,
//!   [`MAX_MOUNTS`] masks; past any of them the plan fails closed with a message.
//! - A directory the host cannot read is hidden whole (listed in [`Plan::secret_dirs`]): what is
//!   below it is unknown, and a command running as the same user could `chmod` it back and read a
//!   secret the walk never saw.
//!
//! # The cache
//! A [`Finder`] keeps one node per directory with what its listing yielded, keyed by the
//! directory's (device, inode, mtime, ctime). Creating, removing or renaming an entry changes its
//! directory's mtime, so [`Finder::plan`] checks every cached directory (an `O_PATH` `openat`
//! and an `fstat`; a leaf directory, one `fstatat(AT_SYMLINK_NOFOLLOW)` of its name) and re-reads
//! only the directories whose key changed. A directory
//! modified within [`RACY_WINDOW`] of being read is read again next time too, because file system
//! timestamps are coarse (a file created in the same clock tick leaves the mtime unchanged; git's
//! "racily clean" problem). When the walk yields the plan it yielded last time, the same
//! `Arc<Plan>` is returned.

mod links;
mod listing;
mod plan;
mod remember;
mod walk;

pub use listing::GIT_READONLY;
pub use plan::{Plan, SecretInode, WalkStats};

use listing::Role;
use plan::{finish, too_many};
use rustix::fs::{openat, Mode, OFlags};
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use walk::{Acc, Node, WalkError};

/// Most masks one command may need; past it `plan` fails closed with a message saying how many
/// were found and what to do (a hostile repository with 100k `.env` files must not exhaust the
/// kernel's mount table).
pub const MAX_MOUNTS: usize = 4096;
/// How many directories deep the walk goes; a deeper tree fails closed.
pub const MAX_DEPTH: usize = 256;
/// How many directory entries the walk reads in all; a larger tree fails closed.
pub const MAX_ENTRIES: usize = 2_000_000;
/// A directory whose mtime or ctime is this close to the moment it was read is read again on the
/// next plan: an entry created in the same timestamp granule would not change it.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The bounds of a walk (tests shrink them).
#[derive(Clone, Copy, Debug)]
struct Bounds {
    depth: usize,
    entries: usize,
    mounts: usize,
    racy: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            depth: MAX_DEPTH,
            entries: MAX_ENTRIES,
            mounts: MAX_MOUNTS,
            racy: RACY_WINDOW,
        }
    }
}

/// Finds the [`Plan`] for a workspace, cached and refreshed only where a directory changed.
pub struct Finder {
    workspace: PathBuf,
    is_secret: Box<dyn Fn(&str) -> bool + Send + Sync>,
    bounds: Bounds,
    cache: Mutex<Cache>,
}

impl fmt::Debug for Finder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Finder")
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Cache {
    root: Option<Node>,
    plan: Option<Arc<Plan>>,
    stats: WalkStats,
    /// Paths already warned about (unreadable directories), so the log says it once.
    warned: HashSet<String>,
    /// Every identity seen under a deny-listed name and still in the workspace
    /// ([`remember`](remember::remember)).
    remembered: remember::Memory,
}

impl Finder {
    /// `is_secret(rel)` is the file tools' deny-list match on a workspace-relative path.
    pub fn new(workspace: PathBuf, is_secret: Box<dyn Fn(&str) -> bool + Send + Sync>) -> Finder {
        Finder::with_bounds(workspace, is_secret, Bounds::default())
    }

    fn with_bounds(
        workspace: PathBuf,
        is_secret: Box<dyn Fn(&str) -> bool + Send + Sync>,
        bounds: Bounds,
    ) -> Finder {
        Finder {
            workspace,
            is_secret,
            bounds,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The workspace this finder walks.
    pub fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    /// What the last [`Finder::plan`] did.
    pub fn stats(&self) -> WalkStats {
        self.lock().stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic mid-walk leaves every node either old or new, both valid.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The plan now. Errors are plain-English messages naming the path.
    pub fn plan(&self) -> Result<Arc<Plan>, String> {
        let mut cache = self.lock();
        let root_fd = openat(
            rustix::fs::CWD,
            &self.workspace,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            format!(
                "cannot open the workspace {} to find what to hide from the shell: {e}",
                self.workspace.display()
            )
        })?;
        let mut acc = Acc::default();
        let mut root = cache.root.take();
        let walked = self.walk(&root_fd, &mut root, "", true, Role::Tree, 0, &mut acc);
        cache.root = root;
        let message = match walked {
            Ok(()) => None,
            Err(WalkError::Unreadable) => Some(format!(
                "cannot read the workspace {} to find what to hide from the shell: permission denied",
                self.workspace.display()
            )),
            Err(WalkError::Io(e, rel)) => Some(format!(
                "cannot read `{}` in the workspace {} to find what to hide from the shell: {e}",
                if rel.is_empty() { "." } else { &rel },
                self.workspace.display()
            )),
            Err(WalkError::Bound(message)) => Some(message),
        };
        if let Some(message) = message {
            cache.plan = None;
            return Err(message);
        }
        let Acc {
            mut plan,
            mut unnamable,
            stats,
            unreadable,
            ..
        } = acc;
        remember::remember(&mut cache.remembered, &mut plan, &root_fd);
        if let Err(message) =
            self.linked_names(&root_fd, cache.root.as_ref(), &mut plan, &mut unnamable)
        {
            cache.plan = None;
            return Err(message);
        }
        cache.stats = stats;
        for rel in unreadable {
            if cache.warned.insert(rel.clone()) {
                tracing::warn!(
                    path = %rel,
                    "the shell's view hides this workspace directory whole: the host cannot read it, so what is below it is unknown"
                );
            }
        }
        if let Some(rel) = unnamable.first() {
            cache.plan = None;
            return Err(format!(
                "cannot hide `{rel}` from the shell: its path is not valid UTF-8 ({} such path(s) in the workspace); rename it",
                unnamable.len()
            ));
        }
        finish(&mut plan);
        let mounts = plan.mounts();
        if mounts > self.bounds.mounts {
            cache.plan = None;
            return Err(too_many(&plan, mounts, self.bounds.mounts));
        }
        if let Some(old) = &cache.plan {
            if **old == plan {
                return Ok(old.clone());
            }
        }
        let plan = Arc::new(plan);
        cache.plan = Some(plan.clone());
        Ok(plan)
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
