//! The network namespace every network-less command shares on a privileged host.

use rustix::fd::OwnedFd;

/// One empty network namespace (no interface up; `lo` stays down and no command has the
/// capability to raise it) that every network-less command joins with `setns`, instead of
/// creating and tearing down a namespace per command (~0.4 ms each here, plus the kernel's
/// asynchronous cleanup). Sharing it is only safe with Landlock's scopes (ABI 6): abstract
/// unix sockets are per network namespace, and the scope keeps each command from connecting
/// to another's. Made once, in a thread of its own that then exits.
pub(in crate::exec::confine) fn shared_empty() -> Option<rustix::fd::BorrowedFd<'static>> {
    use rustix::fd::AsFd;
    static NETNS: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    NETNS
        .get_or_init(|| {
            std::thread::spawn(|| -> Option<OwnedFd> {
                // SAFETY: only this short-lived thread moves to a new network namespace; no
                // file-table or filesystem-context sharing changes (no CLONE_FILES/FS).
                #[allow(unsafe_code)]
                unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }
                    .ok()?;
                let f = std::fs::File::open("/proc/thread-self/ns/net").ok()?;
                Some(OwnedFd::from(f))
            })
            .join()
            .ok()
            .flatten()
        })
        .as_ref()
        .map(|fd| fd.as_fd())
}
