//! Per-command pids cgroups: where they can be made, making, joining, killing and removing
//! them.

use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where pids cgroups can be made: cgroup v1's pids hierarchy or a cgroup v2 root that
/// offers the pids controller, found once.
fn pids_root() -> Option<&'static PathBuf> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let candidates = [
            PathBuf::from("/sys/fs/cgroup/pids"),
            PathBuf::from("/sys/fs/cgroup"),
        ];
        candidates.into_iter().find(|root| {
            if !root.join("cgroup.procs").is_file() {
                return false;
            }
            let is_v1_pids = root.ends_with("pids");
            let v2_pids = std::fs::read_to_string(root.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == "pids"));
            if !(is_v1_pids || v2_pids) {
                return false;
            }
            let probe = root.join(format!("toolgate-probe-{}", std::process::id()));
            let ok = std::fs::create_dir(&probe).is_ok() && probe.join("pids.max").is_file();
            let _ = std::fs::remove_dir(&probe);
            ok
        })
    })
    .as_ref()
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
