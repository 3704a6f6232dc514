//! The guard's system-call helpers (Linux): errors as wasmtime-wasi maps them, `stat`s as it
//! reports them, timestamps for `utimensat`, and how a path splits into directory and name.

use wasmtime_wasi::p2::bindings::filesystem::types::{self, ErrorCode};
use wasmtime_wasi::p2::{FsError, FsResult};

/// A regular file's `stat` as wasmtime-wasi reports it (its `status-change-timestamp` is the
/// birth time, as there).
pub(super) fn file_stat(meta: &std::fs::Metadata) -> types::DescriptorStat {
    use std::os::unix::fs::MetadataExt;
    let at = |t: std::io::Result<std::time::SystemTime>| {
        let d = t.ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some(types::Datetime {
            seconds: d.as_secs(),
            nanoseconds: d.subsec_nanos(),
        })
    };
    types::DescriptorStat {
        type_: types::DescriptorType::RegularFile,
        link_count: meta.nlink(),
        size: meta.len(),
        data_access_timestamp: at(meta.accessed()),
        data_modification_timestamp: at(meta.modified()),
        status_change_timestamp: at(meta.created()),
    }
}

/// `path` split into what leads to the directory holding its target and the target's final
/// component (trailing `/` kept): `a/b/c/` -> (`a/b`, `c/`). A final `.` or `..` names a
/// directory itself: `a/..` -> (`a/..`, `.`).
pub(super) fn split_last(path: &str) -> (&str, &str) {
    let trimmed = path.trim_end_matches('/');
    let (lead, last) = match trimmed.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    };
    let bare = last.trim_end_matches('/');
    if bare == "." || bare == ".." {
        return (trimmed, ".");
    }
    (lead, last)
}

/// A system call's error as the guest sees it, as wasmtime-wasi maps it. Leaving the directory
/// (`RESOLVE_BENEATH`'s `EXDEV`) is `not-permitted`, as wasmtime-wasi refuses an escape.
pub(super) fn errno_code(e: rustix::io::Errno) -> ErrorCode {
    use rustix::io::Errno;
    match e {
        Errno::PIPE => ErrorCode::Pipe,
        Errno::PERM | Errno::XDEV => ErrorCode::NotPermitted,
        Errno::NOENT => ErrorCode::NoEntry,
        Errno::NOMEM => ErrorCode::InsufficientMemory,
        Errno::BADF => ErrorCode::BadDescriptor,
        Errno::BUSY => ErrorCode::Busy,
        Errno::ACCESS => ErrorCode::Access,
        Errno::NOTDIR => ErrorCode::NotDirectory,
        Errno::ISDIR => ErrorCode::IsDirectory,
        Errno::INVAL => ErrorCode::Invalid,
        Errno::EXIST => ErrorCode::Exist,
        Errno::FBIG => ErrorCode::FileTooLarge,
        Errno::NOSPC => ErrorCode::InsufficientSpace,
        Errno::SPIPE => ErrorCode::InvalidSeek,
        Errno::MLINK => ErrorCode::TooManyLinks,
        Errno::NAMETOOLONG => ErrorCode::NameTooLong,
        Errno::NOTEMPTY => ErrorCode::NotEmpty,
        Errno::LOOP => ErrorCode::Loop,
        Errno::OVERFLOW => ErrorCode::Overflow,
        Errno::ILSEQ => ErrorCode::IllegalByteSequence,
        Errno::NOTSUP => ErrorCode::Unsupported,
        Errno::ROFS => ErrorCode::ReadOnly,
        Errno::INTR => ErrorCode::Interrupted,
        Errno::DQUOT => ErrorCode::Quota,
        _ => ErrorCode::Io,
    }
}

pub(super) fn code(e: rustix::io::Errno) -> FsError {
    errno_code(e).into()
}

pub(super) fn io_code(e: std::io::Error) -> FsError {
    match e.raw_os_error() {
        Some(raw) => code(rustix::io::Errno::from_raw_os_error(raw)),
        None => ErrorCode::Io.into(),
    }
}

/// Any object's `stat` as wasmtime-wasi reports it.
pub(super) fn object_stat(meta: &std::fs::Metadata) -> types::DescriptorStat {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    let mut stat = file_stat(meta);
    stat.type_ = if kind.is_dir() {
        types::DescriptorType::Directory
    } else if kind.is_symlink() {
        types::DescriptorType::SymbolicLink
    } else if kind.is_file() {
        types::DescriptorType::RegularFile
    } else if kind.is_block_device() {
        types::DescriptorType::BlockDevice
    } else if kind.is_char_device() {
        types::DescriptorType::CharacterDevice
    } else {
        types::DescriptorType::Unknown
    };
    stat
}

/// A new timestamp for `utimensat`.
pub(super) fn timespec(t: types::NewTimestamp) -> FsResult<rustix::thread::Timespec> {
    use rustix::thread::Timespec;
    Ok(match t {
        types::NewTimestamp::NoChange => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        types::NewTimestamp::Now => Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_NOW,
        },
        types::NewTimestamp::Timestamp(t) => {
            let secs = t
                .seconds
                .checked_add(u64::from(t.nanoseconds / 1_000_000_000))
                .and_then(|s| i64::try_from(s).ok())
                .ok_or(ErrorCode::Overflow)?;
            Timespec {
                tv_sec: secs,
                tv_nsec: (t.nanoseconds % 1_000_000_000).into(),
            }
        }
    })
}
