//! The user namespace a command's namespaces are made in when the host is not privileged (an
//! ordinary user, or root without CAP_SYS_ADMIN): the child that made it maps the caller's uid
//! and gid to themselves, never to root outside, and denies `setgroups` (the kernel requires
//! that before an unprivileged gid map). Inside it the child holds every capability of that
//! namespace only, which it needs to build the view; it drops them all before the command
//! runs, exactly as on the privileged path.

use rustix::fs::{Mode, OFlags};
use std::ffi::CStr;

/// The three files a new user namespace's creator writes, prepared in the parent (the child
/// only makes system calls).
#[derive(Clone, Debug)]
pub(crate) struct Maps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl Maps {
    /// The calling process's effective uid and gid, each mapped to itself.
    pub(crate) fn of_caller() -> Maps {
        let line = |id: u32| format!("{id} {id} 1\n").into_bytes();
        Maps {
            uid_map: line(rustix::process::geteuid().as_raw()),
            gid_map: line(rustix::process::getegid().as_raw()),
        }
    }

    /// In the child that just made the user namespace: deny `setgroups`, then write the uid
    /// and gid maps of its own process. Only system calls.
    pub(crate) fn write_self(&self) -> std::io::Result<()> {
        match write(c"/proc/self/setgroups", b"deny") {
            // Kernels before 3.19 have no such file (and need none).
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            r => r?,
        }
        write(c"/proc/self/uid_map", &self.uid_map)?;
        write(c"/proc/self/gid_map", &self.gid_map)?;
        Ok(())
    }
}

/// Write `data` to `path` in one `write` (the map files take exactly one).
fn write(path: &CStr, data: &[u8]) -> std::io::Result<()> {
    let fd = rustix::fs::open(path, OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    let n = rustix::io::write(&fd, data)?;
    if n != data.len() {
        return Err(std::io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

/// The tasks (threads included) of this process's real user now, as `RLIMIT_NPROC` counts
/// them outside any user namespace of its own: every process whose `/proc` entry this user
/// owns, by its thread count. A snapshot: tasks started or ended meanwhile are not in it.
pub(crate) fn user_tasks() -> u32 {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut tasks: u32 = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        if !name
            .to_str()
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        if !e.metadata().is_ok_and(|m| m.uid() == uid) {
            continue;
        }
        let threads = std::fs::read_dir(e.path().join("task")).map_or(1, |t| t.count());
        tasks = tasks.saturating_add(u32::try_from(threads).unwrap_or(u32::MAX));
    }
    tasks
}

/// `RLIMIT_NPROC` for the calling process (and what it forks): counted per user namespace on
/// Linux 5.14 and later, so in a command's own user namespace it bounds exactly the command's
/// tasks. Only system calls.
pub(in crate::exec::confine) fn limit_tasks(max: u32) -> std::io::Result<()> {
    let limit = rustix::process::Rlimit {
        current: Some(u64::from(max)),
        maximum: Some(u64::from(max)),
    };
    rustix::process::setrlimit(rustix::process::Resource::Nproc, limit)?;
    Ok(())
}
