//! The command's filesystem view as the host plans it: the per-call directories, the binds
//! and masks ([`ViewSpec`]), built from the workspace's plan and the host's system paths.

use super::*;

/// One bind mount of the view: `source` (a host path) at `target` (a path inside the view).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// The host path.
    pub source: PathBuf,
    /// Where it appears inside the view (absolute).
    pub target: PathBuf,
    /// Mounted read-only.
    pub read_only: bool,
    /// A device node (keeps device access; everything else is `nodev`).
    pub device: bool,
}

/// The command's filesystem view, prepared by the host: a new root directory whose mount
/// points already exist, the binds to make in order, and what to hide or freeze inside the
/// workspace (workspace-relative paths, opened in the child beneath the workspace without
/// following any symlink, so a path swapped for a symlink is skipped, never followed).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewSpec {
    /// The host directory that becomes `/`.
    pub root: PathBuf,
    /// Bind mounts, parents before children.
    pub binds: Vec<Bind>,
    /// Paths inside the view masked by an empty read-only file (system secrets).
    pub masked_files: Vec<PathBuf>,
    /// Paths inside the view masked by an empty read-only tmpfs.
    pub masked_dirs: Vec<PathBuf>,
    /// The workspace, inside the view.
    pub workspace: PathBuf,
    /// What to hide and freeze inside the workspace (the host's plan, as it is).
    pub plan: crate::workspace::view::Plan,
    /// The working directory inside the view.
    pub cwd: PathBuf,
    /// Host paths a normal command may write beneath (Landlock); empty for the read-only class
    /// except the private `/tmp`, `$HOME` and `/dev/shm`.
    pub writable: Vec<PathBuf>,
}

/// The per-call directories behind a view: removed when dropped, off the call's path. The new
/// root, `$HOME` and `/dev/shm` live on a tmpfs where the host has one (`/dev/shm`: creating a
/// directory there costs ~5 µs against ~140 µs on this machine kind's disk, and a view needs a
/// few dozen); the command's `/tmp` stays on disk, so a command's temporary files do not eat
/// the host's memory.
pub struct CallDirs {
    fast: Option<tempfile::TempDir>,
    disk: Option<tempfile::TempDir>,
}

/// Removes per-call directories on a thread of its own: removing a directory that was a mount
/// point in a namespace the kernel is still tearing down waits for it (~8 ms a directory on
/// this machine kind), which no call should pay for.
struct Remover {
    tx: std::sync::Mutex<std::sync::mpsc::Sender<tempfile::TempDir>>,
    pending: std::sync::Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>,
}

fn remover() -> Option<&'static Remover> {
    static REMOVER: OnceLock<Option<Remover>> = OnceLock::new();
    REMOVER
        .get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<tempfile::TempDir>();
            let pending =
                std::sync::Arc::new((std::sync::Mutex::new(0usize), std::sync::Condvar::new()));
            let counter = pending.clone();
            std::thread::Builder::new()
                .name("toolgate-shell-cleanup".into())
                .spawn(move || {
                    for dir in rx {
                        drop(dir);
                        let (lock, cv) = &*counter;
                        let mut n = lock.lock().unwrap_or_else(|p| p.into_inner());
                        *n = n.saturating_sub(1);
                        cv.notify_all();
                    }
                })
                .ok()?;
            Some(Remover {
                tx: std::sync::Mutex::new(tx),
                pending,
            })
        })
        .as_ref()
}

/// Wait (at most `timeout`) until the directories of ended commands are removed; the gate
/// calls this when it closes, so a one-shot `toolgate call` leaves nothing behind in `/tmp`.
pub fn finish_cleanup(timeout: std::time::Duration) {
    let Some(r) = remover() else { return };
    let (lock, cv) = &*r.pending;
    let deadline = std::time::Instant::now() + timeout;
    let mut n = lock.lock().unwrap_or_else(|p| p.into_inner());
    while *n > 0 {
        let now = std::time::Instant::now();
        if now >= deadline {
            return;
        }
        n = cv
            .wait_timeout(n, deadline - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0);
    }
}

impl Drop for CallDirs {
    fn drop(&mut self) {
        for dir in [self.fast.take(), self.disk.take()].into_iter().flatten() {
            let Some(r) = remover() else {
                drop(dir);
                continue;
            };
            let (lock, _) = &*r.pending;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            let tx = r.tx.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(std::sync::mpsc::SendError(dir)) = tx.send(dir) {
                *lock.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
                drop(dir);
            }
        }
    }
}

impl CallDirs {
    /// Fresh per-call directories (`root`, `home`, `shm` in [`CallDirs::path`], and the
    /// private temp dir), only root can enter.
    pub fn create() -> Result<CallDirs, String> {
        let fail = |e: std::io::Error| format!("creating the command's private directories: {e}");
        static FAST_BASE: OnceLock<PathBuf> = OnceLock::new();
        let fast_base = FAST_BASE.get_or_init(|| {
            let shm = Path::new("/dev/shm");
            if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            }
        });
        let fast = tempfile::Builder::new()
            .prefix("toolgate-view-")
            .tempdir_in(fast_base)
            .map_err(fail)?;
        for sub in ["root", "home", "shm"] {
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
            // The private /tmp behaves like /tmp (sticky, world-writable).
            let _ = std::fs::set_permissions(disk.path(), std::fs::Permissions::from_mode(0o1777));
        }
        Ok(CallDirs {
            fast: Some(fast),
            disk: Some(disk),
        })
    }

    /// The directory holding the new root, `home` and `shm`.
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

    /// Whether `p` is inside one of this call's own directories.
    fn owns(&self, p: &Path) -> bool {
        p.starts_with(self.path()) || p.starts_with(self.tmp())
    }
}

/// What the host hands to [`build_view`].
pub struct ViewInputs<'a> {
    /// The workspace (canonical host path).
    pub workspace: &'a Path,
    /// The working directory (host path inside the workspace).
    pub cwd: &'a Path,
    /// The read-only class.
    pub read_only: bool,
    /// What to hide and freeze inside the workspace.
    pub plan: &'a crate::workspace::view::Plan,
    /// `$HOME` of the host, if any.
    pub home: Option<&'a Path>,
    /// PATH entries the command may use (absolute host directories).
    pub path_dirs: &'a [PathBuf],
    /// Extra host paths, read-only (`[shell] read`).
    pub extra_read: &'a [PathBuf],
    /// Extra host paths, writable for normal commands (`[shell] write`).
    pub extra_write: &'a [PathBuf],
}

/// Lay out the new root in `dirs` and say which binds make the view.
pub fn build_view(dirs: &CallDirs, inputs: &ViewInputs<'_>) -> Result<ViewSpec, String> {
    let root = dirs.path().join("root");
    let mut binds: Vec<Bind> = Vec::new();
    let fail =
        |what: &str, e: std::io::Error| format!("preparing the command's view ({what}): {e}");
    for dir in SYSTEM_DIRS {
        let host = Path::new(dir);
        let Ok(meta) = host.symlink_metadata() else {
            continue;
        };
        let at = root.join(dir.trim_start_matches('/'));
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(host).map_err(|e| fail(dir, e))?;
            #[cfg(unix)]
            std::os::unix::fs::symlink(&target, &at).map_err(|e| fail(dir, e))?;
        } else if meta.is_dir() {
            binds.push(Bind {
                source: host.to_path_buf(),
                target: host.to_path_buf(),
                read_only: true,
                device: false,
            });
        }
    }
    // Private /tmp, /dev, /proc.
    binds.push(Bind {
        source: dirs.tmp(),
        target: "/tmp".into(),
        read_only: false,
        device: false,
    });
    for node in DEV_NODES {
        let host = Path::new("/dev").join(node);
        if host.exists() {
            binds.push(Bind {
                source: host.clone(),
                target: host,
                read_only: false,
                device: true,
            });
        }
    }
    binds.push(Bind {
        source: dirs.path().join("shm"),
        target: "/dev/shm".into(),
        read_only: false,
        device: false,
    });
    // $HOME: private, with the toolchain homes read-only.
    let mut home_secrets = Vec::new();
    if let Some(home) = inputs
        .home
        .filter(|h| h.is_absolute() && *h != Path::new("/"))
    {
        binds.push(Bind {
            source: dirs.path().join("home"),
            target: home.to_path_buf(),
            read_only: false,
            device: false,
        });
        for sub in TOOLCHAIN_HOMES {
            let host = home.join(sub);
            if host.is_dir() && !inputs.workspace.starts_with(&host) {
                binds.push(Bind {
                    source: host.clone(),
                    target: host,
                    read_only: true,
                    device: false,
                });
            }
        }
        for s in TOOLCHAIN_SECRETS {
            let host = home.join(s);
            if host.symlink_metadata().is_ok_and(|m| m.is_file()) {
                home_secrets.push(host);
            }
        }
    }
    // PATH entries the view does not already hold (read-only), and the policy's paths.
    let usable = |p: &Path| {
        p.is_absolute()
            && p != Path::new("/")
            && !["/tmp", "/proc", "/sys", "/dev", "/run", "/var/run"]
                .iter()
                .any(|bad| p.starts_with(bad))
            && inputs.home.is_none_or(|h| p != h)
    };
    for dir in inputs.path_dirs {
        // `/sbin -> usr/sbin`: judged (and mounted) by where it really is.
        let Ok(dir) = dir.canonicalize() else {
            continue;
        };
        let dir = &dir;
        let covered = binds
            .iter()
            .any(|b| b.read_only && dir.starts_with(&b.target));
        if !covered && usable(dir) && dir.is_dir() && !inputs.workspace.starts_with(dir) {
            binds.push(Bind {
                source: dir.clone(),
                target: dir.clone(),
                read_only: true,
                device: false,
            });
        }
    }
    for (paths, read_only) in [(inputs.extra_read, true), (inputs.extra_write, false)] {
        for p in paths {
            // Never the root, `$HOME` or the workspace itself or anything holding them (that
            // would undo the private home and the masks), nor, for writes, a system directory.
            let holds = |inner: &Path| inner.starts_with(p);
            let system = SYSTEM_DIRS
                .iter()
                .chain(&["/boot", "/var"])
                .any(|d| p.starts_with(d));
            if !usable(p)
                || !p.is_absolute()
                || p.components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                || holds(inputs.workspace)
                || inputs.home.is_some_and(holds)
                || (!read_only && system)
            {
                return Err(format!(
                    "the policy's [shell] {} cannot name `{}`: only absolute paths outside /tmp, /proc, /sys, /dev and /run, not holding $HOME or the workspace{}",
                    if read_only { "read" } else { "write" },
                    p.display(),
                    if read_only { "" } else { ", and not inside a system directory (/usr, /etc, /bin, /lib, /opt, /var, /boot …)" }
                ));
            }
            if p.exists() {
                binds.push(Bind {
                    source: p.clone(),
                    target: p.clone(),
                    read_only: read_only || inputs.read_only,
                    device: false,
                });
            }
        }
    }
    binds.push(Bind {
        source: inputs.workspace.to_path_buf(),
        target: inputs.workspace.to_path_buf(),
        read_only: inputs.read_only,
        device: false,
    });
    // Parents before children: a mount point inside another bind is made after it.
    binds.sort_by_key(|b| b.target.components().count());
    // Make every mount point: inside the nearest enclosing bind's source when that is one of
    // this call's own directories, else in the new root. A mount point inside a host directory
    // (the workspace under /usr, say) exists already, since it is the same path.
    for i in 0..binds.len() {
        let target = binds[i].target.clone();
        let enclosing = binds[..i]
            .iter()
            .filter(|b| target.starts_with(&b.target) && target != b.target)
            .max_by_key(|b| b.target.components().count());
        let at = match enclosing {
            Some(b) => {
                let rest = target.strip_prefix(&b.target).unwrap_or(Path::new(""));
                if !dirs.owns(&b.source) {
                    if !b.source.join(rest).exists() {
                        return Err(format!(
                            "preparing the command's view: `{}` is inside `{}` but does not exist there",
                            target.display(),
                            b.target.display()
                        ));
                    }
                    continue;
                }
                b.source.join(rest)
            }
            None => root.join(target.strip_prefix("/").unwrap_or(&target)),
        };
        let source_is_dir = binds[i].source.is_dir();
        if source_is_dir {
            std::fs::create_dir_all(&at).map_err(|e| fail(&at.display().to_string(), e))?;
        } else {
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| fail(&parent.display().to_string(), e))?;
            }
            if !at.exists() {
                std::fs::write(&at, b"").map_err(|e| fail(&at.display().to_string(), e))?;
            }
        }
    }
    std::fs::create_dir_all(root.join("proc")).map_err(|e| fail("/proc", e))?;
    for (link, to) in [
        ("dev/fd", "/proc/self/fd"),
        ("dev/stdin", "/proc/self/fd/0"),
        ("dev/stdout", "/proc/self/fd/1"),
        ("dev/stderr", "/proc/self/fd/2"),
    ] {
        #[cfg(unix)]
        std::os::unix::fs::symlink(to, root.join(link)).map_err(|e| fail(link, e))?;
    }
    // The empty file bound over every masked file.
    std::fs::write(root.join(".empty"), b"").map_err(|e| fail(".empty", e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ =
            std::fs::set_permissions(root.join(".empty"), std::fs::Permissions::from_mode(0o444));
    }
    let mut masked_files: Vec<PathBuf> = Vec::new();
    let mut masked_dirs: Vec<PathBuf> = Vec::new();
    for s in SYSTEM_SECRETS {
        let p = Path::new(s);
        match p.symlink_metadata() {
            Ok(m) if m.is_dir() => masked_dirs.push(p.to_path_buf()),
            Ok(m) if m.is_file() => masked_files.push(p.to_path_buf()),
            _ => {}
        }
    }
    masked_files.extend(home_secrets);
    let mut writable = vec![
        dirs.tmp(),
        dirs.path().join("home"),
        dirs.path().join("shm"),
    ];
    if !inputs.read_only {
        writable.push(inputs.workspace.to_path_buf());
        writable.extend(inputs.extra_write.iter().filter(|p| p.exists()).cloned());
    }
    Ok(ViewSpec {
        root,
        binds,
        masked_files,
        masked_dirs,
        workspace: inputs.workspace.to_path_buf(),
        plan: inputs.plan.clone(),
        cwd: inputs.cwd.to_path_buf(),
        writable,
    })
}
