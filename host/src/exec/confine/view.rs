//! The command's filesystem view as the host plans it: the per-call directories, the binds
//! and masks ([`ViewSpec`]), built from the workspace's plan and the host's system paths.

use super::calldirs::{fast_base, skeletons, CallDirs};
use super::skeleton::Entry;
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
    /// PATH entries the command may use (absolute host directories, symlinks resolved).
    pub path_dirs: &'a [PathBuf],
    /// Extra host paths, read-only (`[shell] read`).
    pub extra_read: &'a [PathBuf],
    /// Extra host paths, writable for normal commands (`[shell] write`).
    pub extra_write: &'a [PathBuf],
}

/// The host's system directories (bound read-only, or made the same symlinks) and device
/// nodes, as they were at most [`FACTS_AGE`] ago: they do not change while a host runs, and
/// reading them is a dozen system calls a command.
struct SystemFacts {
    links: Vec<(PathBuf, PathBuf)>,
    dirs: Vec<PathBuf>,
    dev: Vec<PathBuf>,
    /// A system symlink that could not be read: no view is built (as before the facts were
    /// kept).
    unreadable: Option<String>,
}

const FACTS_AGE: std::time::Duration = std::time::Duration::from_secs(10);

fn system_facts() -> std::sync::Arc<SystemFacts> {
    static FACTS: std::sync::Mutex<Option<(std::time::Instant, std::sync::Arc<SystemFacts>)>> =
        std::sync::Mutex::new(None);
    let mut kept = FACTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, facts)) = kept.as_ref() {
        if at.elapsed() < FACTS_AGE {
            return facts.clone();
        }
    }
    let mut facts = SystemFacts {
        links: Vec::new(),
        dirs: Vec::new(),
        dev: Vec::new(),
        unreadable: None,
    };
    for dir in SYSTEM_DIRS {
        let host = Path::new(dir);
        let Ok(meta) = host.symlink_metadata() else {
            continue;
        };
        if meta.file_type().is_symlink() {
            match std::fs::read_link(host) {
                Ok(target) => facts.links.push((host.to_path_buf(), target)),
                Err(e) => {
                    facts.unreadable = Some(format!("preparing the command's view ({dir}): {e}"))
                }
            }
        } else if meta.is_dir() {
            facts.dirs.push(host.to_path_buf());
        }
    }
    for node in DEV_NODES {
        let host = Path::new("/dev").join(node);
        if host.exists() {
            facts.dev.push(host);
        }
    }
    let facts = std::sync::Arc::new(facts);
    *kept = Some((std::time::Instant::now(), facts.clone()));
    facts
}

/// Lay out the new root in `dirs` and say which binds make the view.
pub fn build_view(dirs: &CallDirs, inputs: &ViewInputs<'_>) -> Result<ViewSpec, String> {
    // What the shared root skeleton holds (paths relative to it).
    let mut layout: Vec<Entry> = Vec::new();
    let rel = |p: &Path| p.strip_prefix("/").unwrap_or(p).to_path_buf();
    let mut binds: Vec<Bind> = Vec::new();
    let fail =
        |what: &str, e: std::io::Error| format!("preparing the command's view ({what}): {e}");
    let facts = system_facts();
    if let Some(e) = &facts.unreadable {
        return Err(e.clone());
    }
    for (host, target) in &facts.links {
        layout.push(Entry::Link(rel(host), target.clone()));
    }
    for host in &facts.dirs {
        binds.push(Bind {
            source: host.clone(),
            target: host.clone(),
            read_only: true,
            device: false,
        });
    }
    // Private /tmp, /dev, /proc.
    binds.push(Bind {
        source: dirs.tmp(),
        target: "/tmp".into(),
        read_only: false,
        device: false,
    });
    for host in &facts.dev {
        binds.push(Bind {
            source: host.clone(),
            target: host.clone(),
            read_only: false,
            device: true,
        });
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
        // `/sbin -> usr/sbin`: judged (and mounted) by where it really is (resolved by the
        // caller).
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
    // Every bind's source is a directory except device nodes and these.
    let mut extra_files: Vec<PathBuf> = Vec::new();
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
            if let Ok(meta) = p.metadata() {
                if !meta.is_dir() {
                    extra_files.push(p.clone());
                }
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
    let mut points: Vec<PathBuf> = Vec::new();
    for i in 0..binds.len() {
        let target = binds[i].target.clone();
        let enclosing = binds[..i]
            .iter()
            .filter(|b| target.starts_with(&b.target) && target != b.target)
            .max_by_key(|b| b.target.components().count());
        let source_is_dir = !binds[i].device && !extra_files.contains(&binds[i].source);
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
            None => {
                layout.push(if source_is_dir {
                    Entry::Dir(rel(&target))
                } else {
                    Entry::File(rel(&target))
                });
                continue;
            }
        };
        if source_is_dir {
            // Usually made ahead in this call's fresh directories (the last command's points).
            if !at.is_dir() {
                std::fs::create_dir_all(&at).map_err(|e| fail(&at.display().to_string(), e))?;
            }
            points.push(at.clone());
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
    layout.push(Entry::Dir("proc".into()));
    for (link, to) in [
        ("dev/fd", "/proc/self/fd"),
        ("dev/stdin", "/proc/self/fd/0"),
        ("dev/stdout", "/proc/self/fd/1"),
        ("dev/stderr", "/proc/self/fd/2"),
    ] {
        layout.push(Entry::Link(link.into(), to.into()));
    }
    dirs.remember_points(&points);
    let skeleton = skeletons().get(fast_base(), layout)?;
    let root = skeleton.root();
    let _ = dirs.skeleton.set(skeleton);
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
