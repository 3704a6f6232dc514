//! `read-via-stream` on a regular file, read on the calling thread.
//!
//! wasmtime-wasi's file input stream runs every non-blocking `read` (and every `ready`) on
//! tokio's blocking pool, even when the context allows blocking the current thread: the guest
//! gets nothing on its first `read`, polls, and the executor waits for a pool thread that
//! zeroes a 64 KiB buffer and reads. wasi-libc reads files that way (a non-blocking `read`,
//! then `poll` when it came back empty), so each `read(2)` of a plugin cost two thread
//! switches. A regular file never makes a reader wait for data to arrive, so this stream
//! reads it at once, on the calling thread, like the context's other file calls
//! ([`super::BLOCKING_CURRENT_THREAD`]). Anything else (a FIFO or a device, reachable only
//! through a preopen without a policy) keeps wasmtime-wasi's stream.
//!
//! The guest sees the same bytes, the same end of file (`closed` on the read that finds it)
//! and the same errors; only when they arrive changes.

use bytes::Bytes;
use std::cell::RefCell;
use std::sync::Arc;
use wasmtime_wasi::p2::{InputStream, Pollable, StreamError, StreamResult};

/// The most one read returns (wasmtime-wasi's `MAX_READ_SIZE_ALLOC`).
const MAX_READ: usize = 64 << 10;

thread_local! {
    /// Where reads land before the bytes read are copied out: zeroed once per thread
    /// instead of once per read. Only the `n` bytes a read wrote are ever copied out.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A regular file read from `position` on, on the calling thread.
pub(super) struct InlineFileStream {
    file: Arc<std::fs::File>,
    position: u64,
    closed: bool,
}

impl InlineFileStream {
    /// A stream over `file` from `position`, if it is a regular file (one `fstat`).
    pub(super) fn new(file: &Arc<std::fs::File>, position: u64) -> Option<Self> {
        let regular = file.metadata().is_ok_and(|m| m.file_type().is_file());
        regular.then(|| InlineFileStream {
            file: file.clone(),
            position,
            closed: false,
        })
    }
}

/// `pread` of up to `size` bytes at `offset`, retried when interrupted.
fn read_at(file: &std::fs::File, size: usize, offset: u64) -> std::io::Result<Bytes> {
    use std::os::unix::fs::FileExt as _;
    SCRATCH.with(|scratch| {
        let mut buf = scratch.borrow_mut();
        if buf.len() < MAX_READ {
            buf.resize(MAX_READ, 0);
        }
        let want = &mut buf[..size.min(MAX_READ)];
        loop {
            match file.read_at(want, offset) {
                Ok(n) => return Ok(Bytes::copy_from_slice(&want[..n])),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    })
}

impl InputStream for InlineFileStream {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if self.closed {
            return Err(StreamError::Closed);
        }
        if size == 0 {
            return Ok(Bytes::new());
        }
        match read_at(&self.file, size, self.position) {
            Ok(b) if b.is_empty() => {
                self.closed = true;
                Err(StreamError::Closed)
            }
            Ok(b) => {
                self.position += b.len() as u64;
                Ok(b)
            }
            Err(e) => {
                self.closed = true;
                Err(StreamError::LastOperationFailed(e.into()))
            }
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for InlineFileStream {
    /// Always ready: a regular file has its bytes (or its end) at hand.
    async fn ready(&mut self) {}
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn file_with(bytes: &[u8]) -> (tempfile::NamedTempFile, Arc<std::fs::File>) {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(bytes).unwrap();
        let file = Arc::new(std::fs::File::open(tmp.path()).unwrap());
        (tmp, file)
    }

    fn closed(r: StreamResult<Bytes>) -> bool {
        matches!(r, Err(StreamError::Closed))
    }

    #[test]
    fn reads_a_file_in_pieces_from_the_offset_then_reports_the_end() {
        let (_tmp, file) = file_with(b"hello world");
        let mut s = InlineFileStream::new(&file, 2).unwrap();
        assert!(s.read(0).unwrap().is_empty());
        assert_eq!(&s.read(4).unwrap()[..], b"llo ");
        assert_eq!(&s.read(100).unwrap()[..], b"world");
        assert!(closed(s.read(100)));
        assert!(closed(s.read(100)), "it stays closed");
        assert!(closed(s.read(0)));
    }

    #[test]
    fn one_read_returns_at_most_64_kib_and_skip_moves_on() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (_tmp, file) = file_with(&data);
        let mut s = InlineFileStream::new(&file, 0).unwrap();
        let first = s.read(1 << 20).unwrap();
        assert_eq!(&first[..], &data[..MAX_READ]);
        assert_eq!(s.skip(10).unwrap(), 10);
        let mut rest = Vec::new();
        loop {
            match s.read(1 << 20) {
                Ok(b) => rest.extend_from_slice(&b),
                Err(StreamError::Closed) => break,
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(rest, &data[MAX_READ + 10..]);
    }

    #[test]
    fn an_empty_file_is_at_its_end_and_a_later_read_sees_what_was_appended_before_it() {
        let (mut tmp, file) = file_with(b"");
        let mut s = InlineFileStream::new(&file, 0).unwrap();
        assert!(closed(s.read(10)));
        tmp.write_all(b"late").unwrap();
        let mut s = InlineFileStream::new(&file, 0).unwrap();
        assert_eq!(&s.read(10).unwrap()[..], b"late");
    }

    #[test]
    fn only_regular_files_are_read_inline() {
        let dir = tempfile::tempdir().unwrap();
        let handle = Arc::new(std::fs::File::open(dir.path()).unwrap());
        assert!(InlineFileStream::new(&handle, 0).is_none());
    }
}
