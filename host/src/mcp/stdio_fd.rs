//! Stdin and stdout for the stdio transport, driven by the runtime's reactor when they are
//! pipes or sockets (what an MCP client starts a server with). tokio's own `stdin()` and
//! `stdout()` hand every read and every write to its blocking thread pool: two thread
//! switches per message each way, measured as ~12 context switches per `tools/call` and ~6
//! per `ping`. Here a line is read and an answer written by the worker that handles it.
//!
//! The descriptors are duplicated and made non-blocking; the flag belongs to the open file
//! (shared with fd 0/1), so the original flags are put back when the transport is dropped.
//! Anything that is not a pipe or a socket (a terminal, a file) keeps tokio's stdio.
//! Lines are written whole under one lock ([`write_line`]), so messages never interleave.

use rmcp::service::{RoleServer, TxJsonRpcMessage};
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::sync::Mutex;

/// Stdin, readable by the runtime.
pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// Stdout, writable by the runtime.
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// The process's stdin and stdout for the transport.
pub fn stdio() -> (Reader, Writer) {
    let stdin: Reader = match Fd::new(io::stdin().as_fd()) {
        Some(fd) => Box::new(fd),
        None => Box::new(tokio::io::stdin()),
    };
    let stdout: Writer = match Fd::new(io::stdout().as_fd()) {
        Some(fd) => Box::new(fd),
        None => Box::new(tokio::io::stdout()),
    };
    (stdin, stdout)
}

/// A duplicate of a pipe or socket descriptor, non-blocking, registered with the reactor.
pub struct Fd {
    io: AsyncFd<File>,
    /// The open file's flags before, put back on drop.
    flags: rustix::fs::OFlags,
}

impl Fd {
    /// `fd` as a non-blocking reactor descriptor; `None` (use tokio's stdio) when it is not a
    /// pipe or a socket, or any step fails.
    pub fn new(fd: std::os::fd::BorrowedFd<'_>) -> Option<Fd> {
        use rustix::fs::{fcntl_getfl, fcntl_setfl, fstat, FileType, OFlags};
        let kind = FileType::from_raw_mode(fstat(fd).ok()?.st_mode);
        if !matches!(kind, FileType::Fifo | FileType::Socket) {
            return None;
        }
        let owned: OwnedFd = fd.try_clone_to_owned().ok()?;
        let flags = fcntl_getfl(&owned).ok()?;
        fcntl_setfl(&owned, flags | OFlags::NONBLOCK).ok()?;
        // SAFETY: the `File` owns the duplicate and lives inside the `AsyncFd`, so the
        // descriptor stays open and names the same open file until the `AsyncFd` is dropped.
        #[allow(unsafe_code)]
        let registered = unsafe { AsyncFd::register(File::from(owned)) };
        match registered {
            Ok(io) => Some(Fd { io, flags }),
            Err(e) => {
                // Not pollable after all: undo the flag, fall back to tokio's stdio.
                tracing::debug!(error = %e, "stdio descriptor not pollable; using tokio's stdio");
                let _ = fcntl_setfl(fd, flags);
                None
            }
        }
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        let _ = rustix::fs::fcntl_setfl(self.io.get_ref(), self.flags);
    }
}

impl AsyncRead for Fd {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.io.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|f| f.get_ref().read(unfilled)) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Fd {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.io.poll_write_ready(cx))?;
            match ready.try_io(|f| f.get_ref().write(data)) {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is buffered here: every write went to the descriptor.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Write `bytes` (whole lines) under the writer's lock, and flush.
pub(super) async fn write_line<W: AsyncWrite + Unpin>(
    write: &Mutex<W>,
    bytes: &[u8],
) -> std::io::Result<()> {
    let mut w = write.lock().await;
    w.write_all(bytes).await?;
    w.flush().await
}

/// Write `message` as one line.
pub(super) async fn write_message<W: AsyncWrite + Unpin>(
    write: &Mutex<W>,
    message: &TxJsonRpcMessage<RoleServer>,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(message)?;
    bytes.push(b'\n');
    write_line(write, &bytes).await
}

#[cfg(test)]
#[path = "stdio_fd_tests.rs"]
mod tests;
