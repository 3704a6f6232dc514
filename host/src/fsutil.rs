//! Small filesystem helpers the host uses for its own files, and the one way the host opens a
//! workspace file itself ([`open_regular`]).
//!
//! A workspace is untrusted: any name in it may be a FIFO (an `open` for reading waits for a
//! writer forever), a device (`/dev/zero`-like nodes never end), a socket, or a symlink that
//! appeared after the scope check. The host's own looks at workspace files (staleness stamps,
//! history snapshots) all go through [`open_regular`], which never blocks and refuses anything
//! that is not a regular file before reading a byte.

use std::fs::{File, Metadata};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The observation error code for a target that is not a regular file.
pub const NOT_A_REGULAR_FILE: &str = "not-a-regular-file";

/// Why a workspace file could not be opened by [`open_regular`].
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The path names something other than a regular file (or a symlink at its last
    /// component, which is never followed).
    #[error(
        "{} is {kind}, not a regular file; the tools only handle regular files",
        path.display()
    )]
    NotRegular {
        /// The path given.
        path: PathBuf,
        /// What it is instead, with its article: "a FIFO", "a character device", ...
        kind: &'static str,
    },
    /// Opening or inspecting it failed (missing, permission, ...).
    #[error("{}: {source}", path.display())]
    Io {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl OpenError {
    /// The observation error code: [`NOT_A_REGULAR_FILE`] or `io`.
    pub fn code(&self) -> &'static str {
        match self {
            OpenError::NotRegular { .. } => NOT_A_REGULAR_FILE,
            OpenError::Io { .. } => "io",
        }
    }

    /// The message with `name` (the workspace-relative path the caller knows it by) in place
    /// of the host path.
    pub fn message_for(&self, name: &str) -> String {
        match self {
            OpenError::NotRegular { kind, .. } => {
                format!("{name} is {kind}, not a regular file; the tools only handle regular files")
            }
            OpenError::Io { source, .. } => format!("{name}: {source}"),
        }
    }

    /// Whether the file does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, OpenError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// Whether the path is a directory.
    pub fn is_directory(&self) -> bool {
        matches!(self, OpenError::NotRegular { kind, .. } if *kind == DIRECTORY)
    }
}

const DIRECTORY: &str = "a directory";

/// What a file type is, for messages ("a FIFO", "a character device", ...).
pub fn describe(file_type: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        DIRECTORY
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// Open a workspace file for reading, only if it is a regular file.
///
/// One `open` with `O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC` (a FIFO opens at
/// once instead of waiting for a writer, a symlink at the last component is refused, a
/// terminal never becomes ours), then one `fstat` of the descriptor: its type decides, so
/// nothing can be swapped in between. Anything but a regular file is [`OpenError::NotRegular`]
/// before any read. Symlinks in earlier components are the scope check's job (it resolves the
/// path first); `O_NOFOLLOW` only stops a last-component symlink that appeared after it.
/// `O_NONBLOCK` means nothing for a regular file, so the descriptor reads normally.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), OpenError> {
    let io = |source| OpenError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::OFlags;
        use std::os::unix::fs::OpenOptionsExt as _;
        // std adds O_CLOEXEC itself.
        options.custom_flags((OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY).bits() as i32);
    }
    #[cfg(not(target_os = "linux"))]
    {
        // No non-blocking open here: look first, so at least a FIFO already there is refused.
        let meta = std::fs::symlink_metadata(path).map_err(io)?;
        if !meta.file_type().is_file() {
            return Err(OpenError::NotRegular {
                path: path.to_path_buf(),
                kind: describe(meta.file_type()),
            });
        }
    }
    let file = match options.open(path) {
        Ok(f) => f,
        Err(e) => {
            // ELOOP (a symlink under O_NOFOLLOW), ENXIO (a socket), ENODEV, ...: say what is
            // there when it is not a regular file, else the open's own error.
            return Err(match std::fs::symlink_metadata(path) {
                Ok(meta) if !meta.file_type().is_file() => OpenError::NotRegular {
                    path: path.to_path_buf(),
                    kind: describe(meta.file_type()),
                },
                _ => io(e),
            });
        }
    };
    let meta = file.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(OpenError::NotRegular {
            path: path.to_path_buf(),
            kind: describe(meta.file_type()),
        });
    }
    Ok((file, meta))
}

/// Read a whole regular file through [`open_regular`], refusing one longer than `max` bytes
/// (for the host's own small files in an untrusted workspace: a policy or grants file that is
/// a FIFO or a 2 GB sparse file must not hang or bloat the host).
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, OpenError> {
    let (file, meta) = open_regular(path)?;
    let io = |source| OpenError::Io {
        path: path.to_path_buf(),
        source,
    };
    if meta.len() > max {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} bytes, more than the {max} allowed", meta.len()),
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // `take`: the file may grow after the `fstat`.
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("more than the {max} bytes allowed"),
        )));
    }
    Ok(bytes)
}

/// Write `bytes` to `path` atomically: a temp file in the same directory, fsync, rename, fsync
/// the directory. Readers see the old file or the new one, never half of one.
///
/// An existing `path` that is neither a regular file nor a symlink (a FIFO, socket, device or
/// directory planted where the host keeps a file) is refused with `InvalidInput` and left as it
/// is: the host replaces only files. (A symlink is replaced by the new file, never written
/// through, as `rename` does.)
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let t = meta.file_type();
        if !t.is_file() && !t.is_symlink() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} is {}, not a regular file; refusing to replace it",
                    path.display(),
                    describe(t)
                ),
            ));
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".toolgate-tmp-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// An I/O error in plain words, without the errno number: what the user sees after a path.
pub fn plain_error(e: &std::io::Error) -> String {
    let phrase = match e.raw_os_error() {
        Some(libc::ENOENT) => "does not exist",
        Some(libc::EACCES) | Some(libc::EPERM) => "permission denied (check its owner and mode)",
        Some(libc::ENOTDIR) => "a part of the path is not a directory",
        Some(libc::EISDIR) => "is a directory",
        Some(libc::ELOOP) => "is a symbolic link, which toolgate does not follow here",
        Some(libc::ENOSPC) => "the disk is full",
        Some(libc::EDQUOT) => "the disk quota is used up",
        Some(libc::EROFS) => "the filesystem is read-only",
        Some(libc::EEXIST) => "already exists",
        Some(libc::ENAMETOOLONG) => "the name is too long",
        Some(libc::ENOTEMPTY) => "the directory is not empty",
        Some(libc::EBUSY) => "is in use (a mount point or busy file)",
        Some(libc::EMFILE) | Some(libc::ENFILE) => "too many files are open",
        Some(libc::EIO) => "the disk reported a read or write error",
        Some(libc::ENXIO) | Some(libc::ENODEV) => "is a device or FIFO with nothing behind it",
        Some(libc::ETXTBSY) => "is a program that is running",
        _ => "",
    };
    if !phrase.is_empty() {
        return phrase.to_string();
    }
    // Unmapped, or a message of the host's own: the text without any " (os error N)" tail.
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
    }
}

/// Create the directories of `path` below `root` (both host paths; `path` is the scope's
/// resolved path, so no symlink is expected on the way), without following a symlink at any
/// step: each component is made with `mkdirat` in the directory descriptor opened just
/// before, then opened with `O_NOFOLLOW | O_DIRECTORY`. A component swapped for a symlink
/// after the scope check (`sub -> .toolgate`) fails the call instead of creating anything
/// where the link points. `create_dir_all` would follow it.
#[cfg(target_os = "linux")]
pub fn create_dirs_beneath(root: &Path, path: &Path) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags, CWD};
    let rel = path.strip_prefix(root).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not inside {}", path.display(), root.display()),
        )
    })?;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = rustix::fs::openat(CWD, root, flags, Mode::empty())?;
    for c in rel.components() {
        let std::path::Component::Normal(name) = c else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} has a `.` or `..` component", path.display()),
            ));
        };
        match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        dir = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::LOOP) | Err(rustix::io::Errno::NOTDIR) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{} is not a directory (it is a symbolic link or a file, or it changed \
                         while the call was being prepared); nothing was created through it",
                        root.join(rel).display()
                    ),
                ))
            }
            Err(e) => return Err(e.into()),
        };
    }
    Ok(())
}

/// Elsewhere: `create_dir_all`.
#[cfg(not(target_os = "linux"))]
pub fn create_dirs_beneath(_root: &Path, path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path)
}

/// `openat2`, tried again while the kernel answers `EAGAIN`. With `RESOLVE_BENEATH`, a `..`
/// met (literally or in a symlink's target) while any rename or mount happens anywhere on the
/// system makes the kernel give up rather than risk an escape, and openat2(2) says to retry;
/// a machine busy renaming (a build, a test suite) hits it. After 256 tries the `EAGAIN` is
/// returned (the call fails closed).
#[cfg(target_os = "linux")]
pub fn openat2_retry<Fd: std::os::fd::AsFd, P: rustix::path::Arg + Copy>(
    dir: Fd,
    path: P,
    flags: rustix::fs::OFlags,
    mode: rustix::fs::Mode,
    resolve: rustix::fs::ResolveFlags,
) -> rustix::io::Result<std::os::fd::OwnedFd> {
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(dir.as_fd(), path, flags, mode, resolve) {
            Err(rustix::io::Errno::AGAIN) if tries < 256 => {
                tries += 1;
                std::thread::yield_now();
            }
            r => return r,
        }
    }
}

#[cfg(test)]
#[path = "fsutil_state_dir_tests.rs"]
mod state_dir_tests;
