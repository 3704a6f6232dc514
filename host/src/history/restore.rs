//! The file operations of an undo, on directory descriptors: the parent directory is opened
//! once beneath the workspace root without following any symlink, and the file is looked at,
//! written (a temp file renamed over it) and removed through that descriptor. A directory
//! swapped for a link after the plan was made fails the undo instead of writing where the
//! link points; a FIFO or device planted at the name is never opened for reading.

use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

/// What is at a file's name now.
#[derive(Debug)]
pub(crate) enum Current {
    /// Nothing.
    Absent,
    /// A regular file: its content's sha256 and mode, and the content when it is at most the
    /// size asked for.
    File {
        sha256: String,
        mode: u32,
        content: Option<Vec<u8>>,
    },
    /// Something else (a symlink, directory, FIFO, device or socket), named in plain words.
    Other(&'static str),
}

impl Current {
    /// The sha256 a history version would have for this state (`""`: absent).
    pub(crate) fn sha256(&self) -> Option<&str> {
        match self {
            Current::Absent => Some(""),
            Current::File { sha256, .. } => Some(sha256),
            Current::Other(_) => None,
        }
    }
}

/// A file's directory, opened beneath the workspace root, and the file's name in it.
pub(crate) struct Place {
    dir: OwnedFd,
    name: std::ffi::OsString,
}

impl Place {
    /// Open the directory of `rel` (workspace-relative, `/`-separated) beneath `root`,
    /// creating missing directories when `create` is set. No symlink is followed on the way.
    pub(crate) fn open(root: &Path, rel: &str, create: bool) -> std::io::Result<Place> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let rel_path = Path::new(rel);
        let (Some(parent), Some(name)) = (rel_path.parent(), rel_path.file_name()) else {
            return Err(invalid(format!("`{rel}` is not a file path")));
        };
        if create && !parent.as_os_str().is_empty() {
            crate::fsutil::create_dirs_beneath(root, &root.join(parent))?;
        }
        let root_fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        let dir = crate::fsutil::openat2_retry(
            &root_fd,
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::XDEV | rustix::io::Errno::NOTDIR => {
                invalid(format!(
                    "a directory on the way to `{rel}` is a symbolic link or not a directory; \
                     nothing was written through it"
                ))
            }
            e => e.into(),
        })?;
        Ok(Place {
            dir,
            name: name.to_os_string(),
        })
    }

    /// What is at the name now; the content is kept when it is at most `keep` bytes.
    pub(crate) fn current(&self, keep: u64) -> std::io::Result<Current> {
        use rustix::fs::{FileType, Mode, OFlags};
        let stat = match rustix::fs::statat(
            &self.dir,
            &self.name,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(s) => s,
            Err(rustix::io::Errno::NOENT) => return Ok(Current::Absent),
            Err(e) => return Err(e.into()),
        };
        let kind = |t: FileType| match t {
            FileType::Symlink => "a symbolic link",
            FileType::Directory => "a directory",
            FileType::Fifo => "a FIFO",
            FileType::CharacterDevice | FileType::BlockDevice => "a device",
            FileType::Socket => "a socket",
            _ => "not a regular file",
        };
        let t = FileType::from_raw_mode(stat.st_mode);
        if t != FileType::RegularFile {
            return Ok(Current::Other(kind(t)));
        }
        let fd = match rustix::fs::openat(
            &self.dir,
            &self.name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(Current::Absent),
            Err(rustix::io::Errno::LOOP) => return Ok(Current::Other("a symbolic link")),
            Err(e) => return Err(e.into()),
        };
        // The descriptor decides: the name may have been swapped since the look above.
        let stat = rustix::fs::fstat(&fd)?;
        let t = FileType::from_raw_mode(stat.st_mode);
        if t != FileType::RegularFile {
            return Ok(Current::Other(kind(t)));
        }
        let mut file = std::fs::File::from(fd);
        let mut hasher = Sha256::new();
        let mut kept = Some(Vec::new());
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            if let Some(k) = &mut kept {
                if (k.len() + n) as u64 > keep {
                    kept = None;
                } else {
                    k.extend_from_slice(&buf[..n]);
                }
            }
        }
        Ok(Current::File {
            sha256: hex::encode(hasher.finalize()),
            mode: stat.st_mode & 0o7777,
            content: kept,
        })
    }

    /// Replace whatever is at the name by a file holding `bytes` (mode `mode`), atomically: a
    /// temp file in the same directory, fsync, rename over the name, fsync the directory.
    pub(crate) fn write(&self, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        let tmp = format!(".toolgate-undo-{}", random_hex());
        let fd = rustix::fs::openat(
            &self.dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode & 0o777),
        )?;
        let mut file = std::fs::File::from(fd);
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| {
                rustix::fs::renameat(&self.dir, tmp.as_str(), &self.dir, &self.name)
                    .map_err(Into::into)
            });
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&self.dir, tmp.as_str(), rustix::fs::AtFlags::empty());
            return Err(e);
        }
        let _ = rustix::fs::fsync(&self.dir);
        Ok(())
    }

    /// Remove the file at the name (never a directory).
    pub(crate) fn remove(&self) -> std::io::Result<()> {
        match rustix::fs::unlinkat(&self.dir, &self.name, rustix::fs::AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let _ = rustix::fs::fsync(&self.dir);
        Ok(())
    }
}

/// sha256 of `bytes`, hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// 16 random hex digits from the kernel.
pub(crate) fn random_hex() -> String {
    let mut bytes = [0u8; 8];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if filled.is_err() {
        // No /dev/urandom (a chroot): the time and pid still make a name nobody else uses now.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes = ((nanos as u64) ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
    }
    hex::encode(bytes)
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message)
}
