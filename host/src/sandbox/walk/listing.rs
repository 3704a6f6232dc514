//! The listing of one directory by its descriptor: opening a preopen's root and a listed
//! child without following symlinks, reading its names and inodes, and an open file's real path.

use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open directory, shared by the walk and the entries found in it.
pub(crate) type DirFd = Arc<OwnedFd>;

/// One listed name.
#[derive(Clone)]
pub(super) struct Child {
    pub(super) name: String,
    pub(super) kind: Kind,
    /// The inode the listing gave (what an open of the name must find).
    pub(super) ino: u64,
}

/// Whether a listed name is a directory (never through a symlink).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Dir,
    Other,
}

/// Open the canonical directory `root` (a preopen's root) so that any symlink on the way
/// fails.
pub(super) fn open_root(root: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        match rustix::fs::openat2(
            rustix::fs::CWD,
            root,
            flags,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => return Ok(fd),
            // No `openat2` (Linux before 5.6): the last component at least must not be a
            // symlink.
            Err(rustix::io::Errno::NOSYS) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(rustix::fs::openat(
        rustix::fs::CWD,
        root,
        flags | OFlags::NOFOLLOW,
        Mode::empty(),
    )?)
}

#[allow(clippy::unnecessary_cast)]
pub(super) fn fstat_dev(fd: &OwnedFd) -> u64 {
    rustix::fs::fstat(fd).map_or(0, |s| s.st_dev as u64)
}

/// Open the directory `name` of `parent` (never following a symlink) when it still is the
/// object the listing named: inode `ino`, unless it is a mount point (another filesystem than
/// `parent_dev`, where the listed inode is the covered directory's). Its descriptor and
/// filesystem.
#[allow(clippy::unnecessary_cast)]
pub(super) fn open_listed_dir(
    parent: BorrowedFd<'_>,
    name: &str,
    ino: u64,
    parent_dev: u64,
) -> std::io::Result<(OwnedFd, u64)> {
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let stat = rustix::fs::fstat(&fd)?;
    let dev = stat.st_dev as u64;
    if dev == parent_dev && stat.st_ino as u64 != ino {
        return Err(std::io::Error::other(format!(
            "`{name}` was replaced while it was being listed"
        )));
    }
    Ok((fd, dev))
}

/// The entries of the directory open as `dir`, in name order, each with its listed inode.
/// Names that are not UTF-8 are left out (a WASI guest cannot name them either) and counted
/// in `unnamed`, so the tools report them as unreadable instead of dropping them silently.
pub(super) fn read_children(
    dir: BorrowedFd<'_>,
    buf: &mut Vec<std::mem::MaybeUninit<u8>>,
    unnamed: &mut u32,
) -> std::io::Result<Vec<Child>> {
    let mut children = Vec::new();
    let mut push = |name: &std::ffi::CStr, file_type: FileType, ino: u64| {
        let Ok(name) = name.to_str() else {
            *unnamed = unnamed.saturating_add(1);
            return;
        };
        if name == "." || name == ".." {
            return;
        }
        // The entry's own type, never following a symlink: a symlink to a directory is not a
        // directory. Filesystems that do not report it are asked without following.
        let is_dir = match file_type {
            FileType::Directory => true,
            FileType::Unknown => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory),
            _ => false,
        };
        children.push(Child {
            name: name.to_string(),
            kind: if is_dir { Kind::Dir } else { Kind::Other },
            ino,
        });
    };
    #[cfg(target_os = "linux")]
    {
        if buf.len() < 32 << 10 {
            buf.resize(32 << 10, std::mem::MaybeUninit::uninit());
        }
        let mut listing = rustix::fs::RawDir::new(dir, buf.as_mut_slice());
        while let Some(entry) = listing.next() {
            let entry = entry?;
            push(entry.file_name(), entry.file_type(), entry.ino());
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = buf;
        for entry in rustix::fs::Dir::read_from(dir)? {
            let Ok(entry) = entry else { continue };
            push(entry.file_name(), entry.file_type(), entry.ino());
        }
    }
    children.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    Ok(children)
}

/// The real path of an open file (Linux: what the kernel says the descriptor is).
#[cfg(target_os = "linux")]
pub(super) fn real_path(file: &OwnedFd, _path: &Path) -> Option<PathBuf> {
    use std::os::fd::AsRawFd as _;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
pub(super) fn real_path(_file: &OwnedFd, path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}
