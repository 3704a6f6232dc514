//! One file found by the walk: read through its directory's descriptor when it plainly is the
//! listed regular file, and what sorts it out (a binary file, none of the needles).

use super::MAX_READ_AHEAD_FILE;
use rustix::fd::BorrowedFd;

/// What a reader sorts out (0.2.0's options beyond 0.1.0's).
#[derive(Default, Clone)]
pub(super) struct Sort {
    pub(super) binary_prefix: usize,
    pub(super) needles: Vec<Vec<u8>>,
}

/// Whether `needle` occurs in `hay` (glibc's `memmem`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(super) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    if needle.is_empty() {
        return true;
    }
    if needle.len() > hay.len() {
        return false;
    }
    // SAFETY: both pointers and lengths come from live slices borrowed for the whole call;
    // memmem only reads inside them and returns a pointer into `hay` or null.
    let at = unsafe {
        libc::memmem(
            hay.as_ptr().cast(),
            hay.len(),
            needle.as_ptr().cast(),
            needle.len(),
        )
    };
    !at.is_null()
}

/// Whether `needle` occurs in `hay`.
#[cfg(not(target_os = "linux"))]
pub(super) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// How [`read_plain`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Fetched {
    /// The whole file is in the buffer.
    Whole,
    TooLarge(u64),
    NotRead,
}

/// Why a file found by the walk is not handed to the tool at all.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Skip {
    /// A second name of a secret (a hard link).
    Secret,
    /// No longer the file the listing named (exchanged or renamed over since).
    Swapped,
}

/// Read the file `name` of the directory open as `dir` into `buf` when it is plainly the
/// regular file the listing named (`listed`: the directory's filesystem and the listed inode):
/// opened through the directory's descriptor, never following a symlink and without blocking,
/// judged by what was opened. One `openat`, one `fstat`, and for a file that does not change
/// while it is read, one `read`. [`Skip::Secret`] when `linked(dev, ino, nlink)` says the file
/// is a second name of a secret (asked only of files with several links; no system call of its
/// own). A file larger than `room` is not read (`NotRead`: the tool reads it).
#[allow(clippy::unnecessary_cast, clippy::too_many_arguments)]
pub(super) fn read_plain(
    dir: BorrowedFd<'_>,
    name: &str,
    listed: (u64, u64),
    max_file: u64,
    room: u64,
    linked: &mut dyn FnMut(u64, u64, u64) -> bool,
    buf: &mut Vec<u8>,
) -> Result<Fetched, Skip> {
    use rustix::fs::{FileType, Mode, OFlags};
    let Ok(fd) = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW,
        Mode::empty(),
    ) else {
        return Ok(Fetched::NotRead);
    };
    let Ok(stat) = rustix::fs::fstat(&fd) else {
        return Ok(Fetched::NotRead);
    };
    if stat.st_dev as u64 == listed.0 && stat.st_ino as u64 != listed.1 {
        return Err(Skip::Swapped);
    }
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Ok(Fetched::NotRead);
    }
    if stat.st_nlink > 1 && linked(stat.st_dev as u64, stat.st_ino as u64, stat.st_nlink as u64) {
        return Err(Skip::Secret);
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > max_file {
        return Ok(Fetched::TooLarge(size));
    }
    let cap = MAX_READ_AHEAD_FILE.min(room);
    if size > cap {
        return Ok(Fetched::NotRead);
    }
    // One byte more than the size: a read that fills less than asked is at the end.
    buf.clear();
    buf.reserve(size as usize + 1);
    loop {
        let asked = buf.capacity() - buf.len();
        match rustix::io::read(&fd, rustix::buffer::spare_capacity(&mut *buf)) {
            Ok(0) => break,
            Ok(got) if got < asked => break,
            Ok(_) => {
                // The file grew while it was read.
                let len = buf.len() as u64;
                if len > max_file {
                    return Ok(Fetched::TooLarge(len));
                }
                if len > cap {
                    return Ok(Fetched::NotRead);
                }
                buf.reserve(64 << 10);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Ok(Fetched::NotRead),
        }
    }
    Ok(Fetched::Whole)
}
