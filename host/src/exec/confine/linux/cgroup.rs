//! Per-command pids cgroups: where they can be made, making, joining, killing and removing
//! them.

use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where pids cgroups can be made, found once: cgroup v1's pids hierarchy or a cgroup v2 root
/// that offers the pids controller (as root), else the nearest cgroup v2 directory above this
/// process that was delegated to its user (systemd's `user@UID.service`, a container's own
/// subtree): one this user may create children in, whose `cgroup.subtree_control` gives its
/// children the pids controller, and whose `cgroup.procs` this user may write (moving a
/// process between two cgroups needs that on their common ancestor).
fn pids_root() -> Option<&'static PathBuf> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let candidates = [
            PathBuf::from("/sys/fs/cgroup/pids"),
            PathBuf::from("/sys/fs/cgroup"),
        ];
        let usable = |root: &PathBuf| {
            if !root.join("cgroup.procs").is_file() {
                return false;
            }
            let is_v1_pids = root.ends_with("pids");
            let v2_pids = std::fs::read_to_string(root.join("cgroup.subtree_control"))
                .is_ok_and(|c| gives_pids(&c));
            if !(is_v1_pids || v2_pids) {
                return false;
            }
            let procs_writable =
                rustix::fs::access(root.join("cgroup.procs"), rustix::fs::Access::WRITE_OK).is_ok();
            let probe = root.join(format!("toolgate-probe-{}", std::process::id()));
            let ok = procs_writable
                && std::fs::create_dir(&probe).is_ok()
                && probe.join("pids.max").is_file();
            let _ = std::fs::remove_dir(&probe);
            ok
        };
        candidates
            .into_iter()
            .chain(delegated_candidates())
            .find(usable)
    })
    .as_ref()
}

/// Whether a `cgroup.subtree_control` text enables the pids controller for children.
fn gives_pids(subtree_control: &str) -> bool {
    subtree_control.split_whitespace().any(|w| w == "pids")
}

/// The cgroup v2 directories above this process, nearest first (its own cgroup cannot hold
/// children with controllers while it holds processes, so it is not one of them).
fn delegated_candidates() -> Vec<PathBuf> {
    let Ok(own) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    let Some(mount) = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .map(PathBuf::from)
        .find(|m| m.join("cgroup.controllers").is_file())
    else {
        return Vec::new();
    };
    v2_ancestors(&own, &mount)
}

/// From `/proc/self/cgroup`'s text, the cgroup v2 (`0::`) path's ancestors under `mount`,
/// nearest first, the mount itself excluded (tried as a candidate of its own).
fn v2_ancestors(proc_cgroup: &str, mount: &std::path::Path) -> Vec<PathBuf> {
    let Some(path) = proc_cgroup.lines().find_map(|l| l.strip_prefix("0::")) else {
        return Vec::new();
    };
    let rel = std::path::Path::new(path.trim().trim_start_matches('/'));
    if rel
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Vec::new();
    }
    rel.ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .map(|a| mount.join(a))
        .collect()
}

/// One command's pids cgroup.
pub(in crate::exec::confine) struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    pub(in crate::exec::confine) fn create(max: u32) -> Option<Cgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let root = pids_root()?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = root.join(format!("toolgate-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let cgroup = Cgroup { dir };
        std::fs::write(cgroup.dir.join("pids.max"), max.to_string()).ok()?;
        Some(cgroup)
    }

    /// The group's directory, opened for the process that joins it (through its
    /// `cgroup.procs`).
    pub(in crate::exec::confine) fn dir_fd(&self) -> Result<OwnedFd, String> {
        rustix::fs::open(
            &self.dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("opening the pids cgroup {}: {e}", self.dir.display()))
    }

    pub(in crate::exec::confine) fn join(&self, pid: u32) -> Result<(), String> {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string())
            .map_err(|e| format!("joining the pids cgroup {}: {e}", self.dir.display()))
    }

    /// SIGKILL every process in the group: cgroup v2's `cgroup.kill` where there is one,
    /// else each pid listed (repeated a few times, for processes forked meanwhile).
    pub(in crate::exec::confine) fn kill_all(&self) {
        if std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok() {
            return;
        }
        for _ in 0..4 {
            let Ok(list) = std::fs::read_to_string(self.dir.join("cgroup.procs")) else {
                return;
            };
            let pids: Vec<i32> = list.lines().filter_map(|l| l.trim().parse().ok()).collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill_all();
        // Killed tasks may take a moment to be reaped, and a cgroup with tasks cannot be
        // removed. That moment is usually well under a millisecond, so wait in short,
        // growing steps (at most ~1 s).
        let mut wait = std::time::Duration::from_micros(100);
        let mut waited = std::time::Duration::ZERO;
        while waited < std::time::Duration::from_secs(1) {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(wait);
            waited += wait;
            wait = (wait * 2).min(std::time::Duration::from_millis(20));
            self.kill_all();
        }
        tracing::warn!(cgroup = %self.dir.display(), "could not remove a pids cgroup");
    }
}

#[cfg(test)]
mod delegation_tests {
    use super::*;

    /// A process in systemd's user slice looks for a pids-enabled parent from its own
    /// cgroup's parent up, never its own cgroup and never above the mount.
    #[test]
    fn a_user_slice_process_tries_its_ancestors_nearest_first() {
        let text = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope\n";
        let got = v2_ancestors(text, std::path::Path::new("/sys/fs/cgroup"));
        let want: Vec<PathBuf> = [
            "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice",
            "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service",
            "/sys/fs/cgroup/user.slice/user-1000.slice",
            "/sys/fs/cgroup/user.slice",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
        assert!(v2_ancestors("0::/\n", std::path::Path::new("/sys/fs/cgroup")).is_empty());
        assert!(v2_ancestors("0::/a/../b\n", std::path::Path::new("/x")).is_empty());
        assert!(v2_ancestors("1:pids:/\n", std::path::Path::new("/x")).is_empty());
        assert!(gives_pids("cpu memory pids\n"));
        assert!(!gives_pids("cpu memory\n"));
    }
}
