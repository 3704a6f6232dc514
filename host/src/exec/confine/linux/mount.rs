//! The command's filesystem view: its paths made C strings in the parent, then built and
//! entered in the child (bind mounts, masks, `pivot_root`).

use super::util::fd_path;
use crate::exec::confine::ViewSpec;
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use rustix::mount::{
    mount, mount_bind, mount_change, mount_remount, unmount, MountFlags, MountPropagationFlags,
    UnmountFlags,
};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

fn cstr(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| format!("`{}` contains a NUL byte", p.display()))
}

fn cstr_str(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("`{s}` contains a NUL byte"))
}

/// `root` + an absolute path inside the view.
fn under(root: &Path, inside: &Path) -> PathBuf {
    root.join(inside.strip_prefix("/").unwrap_or(inside))
}

/// The view with every path a C string, ready for the child.
pub(super) struct Prepared {
    root: CString,
    binds: Vec<(CString, CString, MountFlags, bool)>,
    proc_: CString,
    proc_sys: CString,
    proc_sysrq: CString,
    empty: CString,
    masked_files: Vec<CString>,
    masked_dirs: Vec<CString>,
    workspace: CString,
    secret_files: Vec<CString>,
    secret_dirs: Vec<CString>,
    git_readonly: Vec<CString>,
    git_files: Vec<CString>,
    /// Pinned and git directories together, parents first.
    mount_points: Vec<CString>,
    cwd: CString,
    /// Built inside a user namespace: every remount keeps the flags the kernel locked on the
    /// host's mounts (`nosuid`, `nodev`, `noexec`, atime, read-only), and a bind that would
    /// reveal what a locked mount below it hides is made recursive.
    in_userns: bool,
}

pub(super) fn prepare(v: &ViewSpec, in_userns: bool) -> Result<Prepared, String> {
    let root = &v.root;
    let mut binds = Vec::new();
    for b in &v.binds {
        let mut flags = MountFlags::BIND | MountFlags::NOSUID;
        if !b.device {
            flags |= MountFlags::NODEV;
        }
        if b.read_only {
            flags |= MountFlags::RDONLY;
        }
        // Read-only binds and the workspace are remounted with their flags. A device node
        // and the call's own private directories need no second call: setuid bits are
        // ignored under no_new_privs and device nodes cannot be made.
        let remount = b.read_only || (!b.device && b.target == v.workspace);
        binds.push((
            cstr(&b.source)?,
            cstr(&under(root, &b.target))?,
            flags,
            remount,
        ));
    }
    let list = |v: &[String]| v.iter().map(|s| cstr_str(s)).collect::<Result<Vec<_>, _>>();
    let paths = |v: &[PathBuf]| {
        v.iter()
            .map(|p| cstr(&under(root, p)))
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(Prepared {
        root: cstr(root)?,
        binds,
        proc_: cstr(&root.join("proc"))?,
        proc_sys: cstr(&root.join("proc/sys"))?,
        proc_sysrq: cstr(&root.join("proc/sysrq-trigger"))?,
        empty: cstr(&root.join(crate::exec::confine::skeleton::EMPTY))?,
        masked_files: paths(&v.masked_files)?,
        masked_dirs: paths(&v.masked_dirs)?,
        workspace: cstr(&under(root, &v.workspace))?,
        secret_files: list(&v.plan.secret_files)?,
        secret_dirs: list(&v.plan.secret_dirs)?,
        git_readonly: list(&v.plan.git_readonly)?,
        git_files: list(&v.plan.git_files)?,
        mount_points: {
            let mut all: Vec<&String> = v.plan.pinned_dirs.iter().chain(&v.plan.git_dirs).collect();
            all.sort_by_key(|p| p.split('/').count());
            all.dedup();
            all.into_iter()
                .map(|s| cstr_str(s))
                .collect::<Result<Vec<_>, _>>()?
        },
        cwd: cstr(&v.cwd)?,
        in_userns,
    })
}

/// The flags of the mount at `target` that a remount inside a user namespace must keep: the
/// kernel locks them on mounts that came from a more privileged namespace (and on binds of
/// those), and refuses a remount that would clear one. Only system calls.
fn locked_flags(target: &CStr) -> std::io::Result<MountFlags> {
    use rustix::fs::StatVfsMountFlags as F;
    let st = rustix::fs::statvfs(target)?;
    let mut keep = MountFlags::empty();
    for (has, flag) in [
        (F::RDONLY, MountFlags::RDONLY),
        (F::NOSUID, MountFlags::NOSUID),
        (F::NODEV, MountFlags::NODEV),
        (F::NOEXEC, MountFlags::NOEXEC),
        (F::NOATIME, MountFlags::NOATIME),
        (F::NODIRATIME, MountFlags::NODIRATIME),
        (F::RELATIME, MountFlags::RELATIME),
    ] {
        if st.f_flag.contains(has) {
            keep |= flag;
        }
    }
    if !st.f_flag.intersects(F::NOATIME | F::RELATIME) {
        keep |= MountFlags::STRICTATIME;
    }
    Ok(keep)
}

/// Remount the bind at `target` with `flags`, keeping its locked flags inside a user
/// namespace.
fn remount(target: &CStr, flags: MountFlags, in_userns: bool) -> std::io::Result<()> {
    let flags = if in_userns {
        flags | locked_flags(target)?
    } else {
        flags
    };
    mount_remount(target, flags, c"")?;
    Ok(())
}

/// Bind `source` at `target`; inside a user namespace, recursively when the kernel refuses a
/// plain bind because a locked mount lies below `source` (the mounts below stay as they are;
/// Landlock still refuses every write outside the writable places).
fn bind(source: &CStr, target: &CStr, in_userns: bool) -> std::io::Result<()> {
    match mount_bind(source, target) {
        Err(Errno::INVAL) if in_userns => {
            rustix::mount::mount_bind_recursive(source, target)?;
            Ok(())
        }
        r => Ok(r?),
    }
}

const MASK_FLAGS: MountFlags = MountFlags::RDONLY
    .union(MountFlags::NOSUID)
    .union(MountFlags::NODEV)
    .union(MountFlags::NOEXEC);

/// Open `rel` beneath `dir` without following any symlink (`None`: it is gone or became a
/// symlink, so there is nothing to mask under that name).
fn beneath(dir: BorrowedFd<'_>, rel: &CStr) -> std::io::Result<Option<OwnedFd>> {
    match rustix::fs::openat2(
        dir,
        rel,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR | Errno::XDEV) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn is_dir(fd: BorrowedFd<'_>) -> bool {
    rustix::fs::fstat(fd).is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
}

/// An empty read-only tmpfs over the directory `fd`.
fn mask_dir(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    let mut buf = [0u8; 40];
    mount(
        c"tmpfs",
        fd_path(fd, &mut buf),
        c"tmpfs",
        MASK_FLAGS,
        c"size=4k,nr_inodes=4,mode=555",
    )?;
    Ok(())
}

/// Bind `source` over the file `fd` (reopened by `reopen` to reach the new mount), then
/// make that mount read-only.
fn bind_ro(
    source: &CStr,
    fd: BorrowedFd<'_>,
    reopen: impl Fn() -> std::io::Result<Option<OwnedFd>>,
    in_userns: bool,
) -> std::io::Result<()> {
    let mut buf = [0u8; 40];
    mount_bind(source, fd_path(fd, &mut buf))?;
    if let Some(top) = reopen()? {
        let mut buf = [0u8; 40];
        remount(
            fd_path(top.as_fd(), &mut buf),
            MountFlags::BIND | MASK_FLAGS,
            in_userns,
        )?;
    }
    Ok(())
}

/// In the child: build the view and enter it.
pub(super) fn enter_view(p: &Prepared) -> std::io::Result<()> {
    mount_change(
        c"/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )?;
    let u = p.in_userns;
    bind(p.root.as_c_str(), p.root.as_c_str(), u)?;
    for (source, target, flags, again) in &p.binds {
        bind(source.as_c_str(), target.as_c_str(), u)?;
        if *again {
            remount(target.as_c_str(), *flags, u)?;
        }
    }
    mount(
        c"proc",
        p.proc_.as_c_str(),
        c"proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        c"",
    )?;
    for sub in [&p.proc_sys, &p.proc_sysrq] {
        match mount_bind(sub.as_c_str(), sub.as_c_str()) {
            // Not every kernel (or container) has both.
            Err(Errno::NOENT) => continue,
            r => r?,
        }
        remount(sub.as_c_str(), MountFlags::BIND | MASK_FLAGS, u)?;
    }
    for f in &p.masked_files {
        mount_bind(p.empty.as_c_str(), f.as_c_str())?;
        remount(f.as_c_str(), MountFlags::BIND | MASK_FLAGS, u)?;
    }
    for d in &p.masked_dirs {
        mount(
            c"tmpfs",
            d.as_c_str(),
            c"tmpfs",
            MASK_FLAGS,
            c"size=4k,nr_inodes=4,mode=555",
        )?;
    }
    let ws = rustix::fs::open(
        p.workspace.as_c_str(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let ws = ws.as_fd();
    // The host's state: an empty read-only tmpfs, with `outputs/` bound back read-only.
    let outputs = beneath(ws, c".toolgate/outputs")?;
    if let Some(state) = beneath(ws, c".toolgate")? {
        if is_dir(state.as_fd()) {
            let mut buf = [0u8; 40];
            mount(
                c"tmpfs",
                fd_path(state.as_fd(), &mut buf),
                c"tmpfs",
                MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                c"size=16k,nr_inodes=8,mode=755",
            )?;
            if let Some(top) = beneath(ws, c".toolgate")? {
                if let Some(out) = outputs.as_ref().filter(|o| is_dir(o.as_fd())) {
                    rustix::fs::mkdirat(&top, c"outputs", Mode::from_raw_mode(0o755))?;
                    if let Some(at) = beneath(ws, c".toolgate/outputs")? {
                        let mut src = [0u8; 40];
                        bind_ro(
                            fd_path(out.as_fd(), &mut src),
                            at.as_fd(),
                            || beneath(ws, c".toolgate/outputs"),
                            u,
                        )?;
                    }
                }
                let mut buf = [0u8; 40];
                mount_remount(fd_path(top.as_fd(), &mut buf), MASK_FLAGS, c"")?;
            }
        } else {
            bind_ro(
                p.empty.as_c_str(),
                state.as_fd(),
                || beneath(ws, c".toolgate"),
                u,
            )?;
        }
    }
    // Judged by what is there now: a secret file swapped for a directory (or back) is
    // still masked.
    for f in p.secret_dirs.iter().chain(&p.secret_files) {
        if let Some(fd) = beneath(ws, f)? {
            if is_dir(fd.as_fd()) {
                mask_dir(fd.as_fd())?;
            } else {
                bind_ro(p.empty.as_c_str(), fd.as_fd(), || beneath(ws, f), u)?;
            }
        }
    }
    // Git directories become mount points (rename and removal fail); their config and
    // hooks are read-only.
    for g in &p.mount_points {
        if let Some(fd) = beneath(ws, g)? {
            if is_dir(fd.as_fd()) {
                let mut buf = [0u8; 40];
                let at = fd_path(fd.as_fd(), &mut buf);
                mount_bind(at, at)?;
            }
        }
    }
    for g in p.git_readonly.iter().chain(&p.git_files) {
        if let Some(fd) = beneath(ws, g)? {
            let mut buf = [0u8; 40];
            let at = fd_path(fd.as_fd(), &mut buf);
            mount_bind(at, at)?;
            if let Some(top) = beneath(ws, g)? {
                let mut buf = [0u8; 40];
                remount(
                    fd_path(top.as_fd(), &mut buf),
                    MountFlags::BIND | MASK_FLAGS,
                    u,
                )?;
            }
        }
    }
    remount(
        p.root.as_c_str(),
        MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
        u,
    )?;
    rustix::process::chdir(p.root.as_c_str())?;
    rustix::process::pivot_root(c".", c".")?;
    unmount(c".", UnmountFlags::DETACH)?;
    rustix::process::chdir(p.cwd.as_c_str())?;
    Ok(())
}
