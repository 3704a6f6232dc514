//! The per-call directories behind a view (the command's `$HOME`, `/dev/shm` and `/tmp`),
//! made ahead of need and removed after, both on a cleanup thread of their own so no call
//! waits for either.

use super::cleanup::{self, remove_later};
use super::skeleton::{Skeleton, Skeletons};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The per-call directories behind a view: removed when dropped, off the call's path.
/// `$HOME` and `/dev/shm` live on a tmpfs where the host has one (`/dev/shm`: creating a
/// directory there costs ~5 µs against ~140 µs on this machine kind's disk); the command's
/// `/tmp` stays on disk, so a command's temporary files do not eat the host's memory.
pub struct CallDirs {
    fast: Option<tempfile::TempDir>,
    disk: Option<tempfile::TempDir>,
    /// The shared root skeleton this call's view uses (kept until the call's end).
    pub(super) skeleton: OnceLock<Arc<Skeleton>>,
}

/// Fresh sets kept ready: enough for a few commands started at once.
const READY: usize = 2;

/// Sets of (fast, disk) directories nobody has used, the disk one still private (0700).
static READY_SETS: Mutex<Vec<(tempfile::TempDir, tempfile::TempDir)>> = Mutex::new(Vec::new());

fn ready() -> std::sync::MutexGuard<'static, Vec<(tempfile::TempDir, tempfile::TempDir)>> {
    READY_SETS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Off once the host finishes (no set is made that nobody would remove), on at the next call.
static REFILL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

fn refill() {
    if !REFILL.load(std::sync::atomic::Ordering::Acquire) {
        return;
    }
    if ready().len() >= READY {
        return;
    }
    if let Ok(set) = make_set() {
        let mut sets = ready();
        if sets.len() < READY && REFILL.load(std::sync::atomic::Ordering::Acquire) {
            sets.push(set);
        }
    }
}

/// Wait (up to `timeout`) until every ended command's directories are removed, and remove the
/// sets kept ready and the shared skeletons; the gate calls this when it closes, so a one-shot
/// `toolgate call` leaves nothing behind in `/tmp` or `/dev/shm`.
pub fn finish_cleanup(timeout: std::time::Duration) {
    REFILL.store(false, std::sync::atomic::Ordering::Release);
    skeletons().clear();
    let unused: Vec<_> = std::mem::take(&mut *ready());
    for (fast, disk) in unused {
        remove_later(fast);
        remove_later(disk);
    }
    cleanup::wait_idle(timeout);
}

/// The root skeletons shared by this process's commands.
static SKELETONS: Skeletons = Skeletons::new();

pub(super) fn skeletons() -> &'static Skeletons {
    &SKELETONS
}

/// Where the per-call directories and skeletons live: `/dev/shm` when the host has one.
pub(super) fn fast_base() -> &'static Path {
    static FAST_BASE: OnceLock<PathBuf> = OnceLock::new();
    FAST_BASE.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        }
    })
}

/// Mount points the last view made in its own directories (relative to its fast and disk
/// directories): a fresh set has them already, so the next command's view usually finds
/// them made (a directory on disk costs ~100 µs to make).
static LAST_POINTS: Mutex<(Vec<PathBuf>, Vec<PathBuf>)> = Mutex::new((Vec::new(), Vec::new()));

fn last_points() -> std::sync::MutexGuard<'static, (Vec<PathBuf>, Vec<PathBuf>)> {
    LAST_POINTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A fresh (fast, disk) pair: `home` and `shm` in the first, both private to root, with the
/// last view's mount points.
fn make_set() -> Result<(tempfile::TempDir, tempfile::TempDir), String> {
    let fail = |e: std::io::Error| format!("creating the command's private directories: {e}");
    let fast = tempfile::Builder::new()
        .prefix("toolgate-view-")
        .tempdir_in(fast_base())
        .map_err(fail)?;
    for sub in ["home", "shm"] {
        std::fs::create_dir(fast.path().join(sub)).map_err(fail)?;
    }
    let disk = tempfile::Builder::new()
        .prefix("toolgate-tmp-")
        .tempdir()
        .map_err(fail)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(fast.path(), std::fs::Permissions::from_mode(0o700));
        let _ = std::fs::set_permissions(disk.path(), std::fs::Permissions::from_mode(0o700));
    }
    let (in_fast, in_disk) = last_points().clone();
    for (base, rel) in in_fast
        .iter()
        .map(|r| (fast.path(), r))
        .chain(in_disk.iter().map(|r| (disk.path(), r)))
    {
        // Best effort: the view makes whatever is missing.
        let _ = std::fs::create_dir_all(base.join(rel));
    }
    Ok((fast, disk))
}

impl Drop for CallDirs {
    fn drop(&mut self) {
        for dir in [self.fast.take(), self.disk.take()].into_iter().flatten() {
            remove_later(dir);
        }
    }
}

impl CallDirs {
    /// Fresh per-call directories (`home`, `shm` in [`CallDirs::path`], and the private temp
    /// dir), only root can enter: a set made ahead on the cleanup thread (never used by
    /// anyone, its temp dir private until now), or one made here when none is ready.
    pub fn create() -> Result<CallDirs, String> {
        REFILL.store(true, std::sync::atomic::Ordering::Release);
        let kept = ready().pop();
        let (fast, disk) = match kept {
            Some(set) => set,
            None => make_set()?,
        };
        cleanup::later(Box::new(refill));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            // The private /tmp behaves like /tmp (sticky, world-writable).
            std::fs::set_permissions(disk.path(), std::fs::Permissions::from_mode(0o1777))
                .map_err(|e| format!("creating the command's private directories: {e}"))?;
        }
        Ok(CallDirs {
            fast: Some(fast),
            disk: Some(disk),
            skeleton: OnceLock::new(),
        })
    }

    /// The directory holding `home` and `shm`.
    pub fn path(&self) -> &Path {
        self.fast
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }

    /// The private temp dir (the command's `/tmp` with a view, its `TMPDIR` without).
    pub fn tmp(&self) -> PathBuf {
        self.disk
            .as_ref()
            .map_or(PathBuf::from("/nonexistent"), |d| d.path().to_path_buf())
    }

    /// Remember the directories the view made inside this call's own directories, for the
    /// sets made next.
    pub(super) fn remember_points(&self, made: &[PathBuf]) {
        let (fast, disk) = (self.path().to_path_buf(), self.tmp());
        // Plain names only: nothing made ahead can land outside a fresh set.
        let inside = |base: &Path| -> Vec<PathBuf> {
            made.iter()
                .filter_map(|p| p.strip_prefix(base).ok())
                .filter(|r| {
                    !r.as_os_str().is_empty()
                        && r.components()
                            .all(|c| matches!(c, std::path::Component::Normal(_)))
                })
                .map(Path::to_path_buf)
                .collect()
        };
        let (in_fast, in_disk) = (inside(&fast), inside(&disk));
        *last_points() = (in_fast, in_disk);
    }

    /// Whether `p` is inside one of this call's own directories.
    pub(super) fn owns(&self, p: &Path) -> bool {
        p.starts_with(self.path()) || p.starts_with(self.tmp())
    }
}
