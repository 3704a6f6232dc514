//! Reading a file the host left to the tool.

use crate::MAX_FILE_BYTES;
use std::path::Path;

/// A file's bytes with one open, one size query and as few reads as possible; `None` when it
/// is larger than [`MAX_FILE_BYTES`].
#[cfg(target_arch = "wasm32")]
pub(crate) fn read_file(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    wasi_read::read_file(path, MAX_FILE_BYTES)
}

/// Reading through `wasi:filesystem` directly: one `open-at` (where the host's filesystem
/// guard applies, as for any open), one `stat`, and `read`s until a short one. std's `File`
/// adds several size and position queries per file, each a host call and a syscall.
#[cfg(target_arch = "wasm32")]
mod wasi_read {
    use std::cell::OnceCell;
    use std::io::{Error, ErrorKind};
    use std::path::Path;
    use wasip2::filesystem::preopens::get_directories;
    use wasip2::filesystem::types::{Descriptor, DescriptorFlags, ErrorCode, OpenFlags, PathFlags};

    /// The most bytes asked for in one `read` (the host hands out at most 64 KiB at a time).
    const CHUNK: u64 = 64 << 10;

    thread_local! {
        /// The preopened directories, longest guest path first.
        static PREOPENS: OnceCell<Vec<(Descriptor, String)>> = const { OnceCell::new() };
    }

    fn io(code: ErrorCode) -> Error {
        let kind = match code {
            ErrorCode::NoEntry => ErrorKind::NotFound,
            ErrorCode::Access | ErrorCode::NotPermitted => ErrorKind::PermissionDenied,
            _ => ErrorKind::Other,
        };
        Error::new(kind, format!("{code:?}"))
    }

    pub(super) fn read_file(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
        let text = path
            .to_str()
            .ok_or_else(|| Error::new(ErrorKind::InvalidInput, "path is not UTF-8"))?;
        PREOPENS.with(|cell| {
            let preopens = cell.get_or_init(|| {
                let mut dirs = get_directories();
                dirs.sort_by_key(|(_, guest)| std::cmp::Reverse(guest.len()));
                dirs
            });
            let (dir, rel) = preopens
                .iter()
                .find_map(|(dir, guest)| {
                    let rest = text.strip_prefix(guest.trim_end_matches('/'))?;
                    if rest.is_empty() {
                        Some((dir, "."))
                    } else {
                        rest.strip_prefix('/').map(|r| (dir, r))
                    }
                })
                .ok_or_else(|| Error::new(ErrorKind::NotFound, "outside the preopens"))?;
            let file = dir
                .open_at(
                    PathFlags::SYMLINK_FOLLOW,
                    rel,
                    OpenFlags::empty(),
                    DescriptorFlags::READ,
                )
                .map_err(io)?;
            let size = file.stat().map_err(io)?.size;
            if size > max {
                return Ok(None);
            }
            let mut buf: Vec<u8> = Vec::new();
            loop {
                let want = (size + 1).saturating_sub(buf.len() as u64).clamp(1, CHUNK);
                let (bytes, eof) = file.read(want, buf.len() as u64).map_err(io)?;
                let got = bytes.len() as u64;
                if buf.is_empty() {
                    // Most files come in one read: keep its buffer instead of copying it.
                    buf = bytes;
                    if got == want {
                        buf.reserve((size + 1).saturating_sub(got) as usize);
                    }
                } else {
                    buf.extend_from_slice(&bytes);
                }
                if buf.len() as u64 > max {
                    return Ok(None);
                }
                // A regular file returns fewer bytes than asked only at its end.
                if eof || got < want {
                    return Ok(Some(buf));
                }
            }
        })
    }
}

/// A file's bytes with one open, one size query and as few reads as possible; `None` when it
/// is larger than [`MAX_FILE_BYTES`].
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn read_file(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > MAX_FILE_BYTES {
        return Ok(None);
    }
    let mut buf = Vec::with_capacity(size as usize + 1);
    file.read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Ok(None);
    }
    Ok(Some(buf))
}
