//! Linux: where a path-taking call acts. The directory that holds the target, or the object
//! itself, is opened beneath the guest's descriptor, and judged by its real path when a
//! symlink was on the way.

use super::sys::{code, split_last};
use super::{GuardedFsView, Slot};
use crate::workspace::Access;
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::FsResult;

/// A directory the guard acts in.
pub(super) enum DirFd {
    /// The guest's own directory descriptor (the path had a single component).
    Guest(Arc<std::fs::File>),
    /// A directory the guard opened (`O_PATH`) beneath the guest's.
    Own(rustix::fd::OwnedFd),
}

impl std::os::fd::AsFd for DirFd {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            DirFd::Guest(f) => f.as_fd(),
            DirFd::Own(f) => f.as_fd(),
        }
    }
}

/// Where a path-taking call acts once its target is checked: entry `name` of directory `dir`.
pub(super) struct At {
    pub(super) dir: DirFd,
    /// The final component, trailing `/` kept (`.` when the path names `dir` itself).
    pub(super) name: String,
    /// The target's workspace-relative real path when a symlink was on the way to `dir`
    /// (`None`: the lexical path the guard checked, left in its buffer).
    pub(super) real: Option<String>,
    /// The guest descriptor's permissions.
    pub(super) perms: wasmtime_wasi::FsPerms,
}

impl At {
    /// `not-permitted` on a read-only preopen, as wasmtime-wasi answers every change there.
    pub(super) fn writable(&self) -> FsResult<()> {
        if self.perms.write_not_permitted() {
            return Err(ErrorCode::NotPermitted.into());
        }
        Ok(())
    }

    /// The final component without a trailing `/`.
    pub(super) fn bare(&self) -> &str {
        self.name.trim_end_matches('/')
    }
}

/// How a path-taking call goes ahead (Linux).
pub(super) enum Reached {
    /// Through wasmtime-wasi: no policy, or no `openat2` in this kernel (the lexical check,
    /// if any, has passed).
    Inner,
    /// Here, on the object that was checked.
    Here(At),
}

impl GuardedFsView<'_> {
    /// The guest directory descriptor's handle and permissions.
    pub(super) fn guest_dir(
        &self,
        fd: &Resource<Descriptor>,
    ) -> FsResult<(Arc<std::fs::File>, wasmtime_wasi::FsPerms)> {
        match self.inner.table.get(fd)? {
            Descriptor::Dir(d) => Ok((d.dir.clone(), d.perms)),
            Descriptor::File(_) => Err(ErrorCode::NotDirectory.into()),
        }
    }

    /// The workspace-relative real path of `opened` joined with `name` (a final component or
    /// empty), refused when it is outside the workspace or denied for `access`. `None` when
    /// the real-path check is off.
    pub(super) fn judge_real(
        &self,
        opened: &rustix::fd::OwnedFd,
        name: &str,
        access: Access,
    ) -> FsResult<Option<String>> {
        use std::os::fd::AsRawFd;
        let Some(deny) = self.guard.deny.as_ref() else {
            return Ok(None);
        };
        if !deny.real_path_check {
            return Ok(None);
        }
        // What cannot be told is refused.
        let real = std::fs::read_link(format!("/proc/self/fd/{}", opened.as_raw_fd()))
            .map_err(|_| ErrorCode::Access)?;
        let rest = real
            .strip_prefix(&deny.host_root)
            .map_err(|_| ErrorCode::Access)?;
        let mut rel = rest.to_str().ok_or(ErrorCode::Access)?.to_string();
        let name = name.trim_end_matches('/');
        if !name.is_empty() && name != "." {
            if !rel.is_empty() {
                rel.push('/');
            }
            rel.push_str(name);
        }
        if deny.denied(&rel, 0, access) {
            return Err(ErrorCode::Access.into());
        }
        Ok(Some(rel))
    }

    /// Check `path` below `fd` for `access` and open the directory that holds its target,
    /// beneath `fd`: with no symlink on the way (`RESOLVE_NO_SYMLINKS`) the lexical check
    /// stands; with one, the directory is opened following it (`RESOLVE_BENEATH` only) and the
    /// target is judged again by the real path of what was opened. A single-component path
    /// acts in `fd` itself (no system call). The caller then acts on the final component
    /// relative to that directory, so nothing renamed or swapped on the way in between changes
    /// what it acts on.
    pub(super) fn locate(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        access: Access,
        slot: Slot,
    ) -> FsResult<Reached> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        let guarded = self.check(fd, path, access, slot)?;
        if self.guard.deny.is_none() {
            return Ok(Reached::Inner);
        }
        let (dir, perms) = self.guest_dir(fd)?;
        let (lead, name) = split_last(path);
        if lead.is_empty() || lead == "." {
            return Ok(Reached::Here(At {
                dir: DirFd::Guest(dir),
                name: name.to_string(),
                real: None,
                perms,
            }));
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let strict =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let (opened, real) =
            match crate::fsutil::openat2_retry(&*dir, lead, flags, Mode::empty(), strict) {
                Ok(opened) => (opened, None),
                Err(Errno::NOSYS) => return Ok(Reached::Inner),
                Err(Errno::LOOP) => {
                    let opened = crate::fsutil::openat2_retry(
                        &*dir,
                        lead,
                        flags,
                        Mode::empty(),
                        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
                    )
                    .map_err(code)?;
                    let real = if guarded {
                        self.judge_real(&opened, name, access)?
                    } else {
                        None
                    };
                    (opened, real)
                }
                Err(e) => return Err(code(e)),
            };
        Ok(Reached::Here(At {
            dir: DirFd::Own(opened),
            name: name.to_string(),
            real,
            perms,
        }))
    }

    /// Check `path` below `fd` for `access` and open the object it names itself (`O_PATH`,
    /// beneath `fd`, following a final symlink when `follow`), judged as [`Self::locate`]
    /// judges a directory. `None`: go through wasmtime-wasi (no policy, an unguarded
    /// descriptor, or no `openat2`).
    pub(super) fn locate_object(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        access: Access,
    ) -> FsResult<Option<rustix::fd::OwnedFd>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        use rustix::io::Errno;
        if !self.check(fd, path, access, Slot::First)? {
            return Ok(None);
        }
        let (dir, _) = self.guest_dir(fd)?;
        let mut flags = OFlags::PATH | OFlags::CLOEXEC;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let strict =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match crate::fsutil::openat2_retry(&*dir, path, flags, Mode::empty(), strict) {
            Ok(opened) => Ok(Some(opened)),
            Err(Errno::NOSYS) => Ok(None),
            Err(Errno::LOOP) => {
                let opened = crate::fsutil::openat2_retry(
                    &*dir,
                    path,
                    flags,
                    Mode::empty(),
                    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
                )
                .map_err(code)?;
                self.judge_real(&opened, "", access)?;
                Ok(Some(opened))
            }
            Err(e) => Err(code(e)),
        }
    }
}
