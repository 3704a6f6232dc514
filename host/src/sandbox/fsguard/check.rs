//! The lexical checks on the guarded view: a guest path joined to its directory descriptor's
//! path and matched against the deny-list, a new symlink's target, a second name of a secret.

use super::deny::join;
use super::{DirPath, GuardedFsView, Slot};
use crate::workspace::Access;
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;
use wasmtime_wasi::p2::FsResult;

impl GuardedFsView<'_> {
    /// The path of directory descriptor `rep`: `Ok(None)` when unguarded (no policy, or a
    /// preopen outside the workspace).
    pub(super) fn dir_path(&self, fd: &Resource<Descriptor>) -> FsResult<Option<Arc<str>>> {
        if self.guard.deny.is_none() {
            return Ok(None);
        }
        match self.guard.dirs.get(&fd.rep()) {
            Some(DirPath::Guarded(p)) => Ok(Some(p.clone())),
            Some(DirPath::Unguarded) => Ok(None),
            Some(DirPath::Refused) => Err(ErrorCode::Access.into()),
            // Not a directory we handed out: a file (the call fails as wasmtime-wasi would
            // fail it) or something unknown (refused).
            None => match self.inner.table.get(fd)? {
                Descriptor::File(_) => Err(ErrorCode::NotDirectory.into()),
                Descriptor::Dir(_) => Err(ErrorCode::Access.into()),
            },
        }
    }

    /// Check `path` relative to descriptor `fd` for `access`; the joined path is left in the
    /// chosen buffer. `Ok(false)` when the descriptor is unguarded.
    pub(super) fn check(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        access: Access,
        slot: Slot,
    ) -> FsResult<bool> {
        let Some(base) = self.dir_path(fd)? else {
            return Ok(false);
        };
        let Some(deny) = self.guard.deny.clone() else {
            return Ok(false);
        };
        let guard = &mut *self.guard;
        let buf = match slot {
            Slot::First => &mut guard.buf,
            Slot::Second => &mut guard.buf2,
        };
        let mut verified = join(buf, &base, path)?;
        let parent = buf.rfind('/').unwrap_or(0);
        if parent > verified && buf[..parent] == guard.clean_dir[..] {
            verified = parent;
        }
        if deny.denied(buf, verified, access) {
            return Err(ErrorCode::Access.into());
        }
        if parent > 0 && buf[..parent] != guard.clean_dir[..] {
            guard.clean_dir.clear();
            guard.clean_dir.push_str(&buf[..parent]);
        }
        Ok(true)
    }

    /// Check the target of a symlink created at `dest` (relative to `fd`): it must not lead to
    /// anything denied (as if written through).
    pub(super) fn check_symlink_target(
        &mut self,
        fd: &Resource<Descriptor>,
        target: &str,
        dest: &str,
    ) -> FsResult<()> {
        if !self.check(fd, dest, Access::Write, Slot::First)? {
            return Ok(());
        }
        let Some(deny) = self.guard.deny.clone() else {
            return Ok(());
        };
        if target.starts_with('/') {
            return Err(ErrorCode::Access.into());
        }
        let guard = &mut *self.guard;
        let link_dir = &guard.buf[..guard.buf.rfind('/').unwrap_or(0)];
        join(&mut guard.buf2, link_dir, target).map_err(|_| ErrorCode::Access)?;
        if deny.denied(&guard.buf2, 0, Access::Write) {
            return Err(ErrorCode::Access.into());
        }
        Ok(())
    }

    /// Whether an opened object is a secret under another name: a directory or regular file
    /// whose identity is a deny-listed one's (a second name, or a secret exchanged with or
    /// renamed to a plain name; see [`FsDeny::secret_identity`]).
    pub(super) fn secret_object(&mut self, dev: u64, ino: u64, nlink: u64, is_dir: bool) -> bool {
        let Some(deny) = self.guard.deny.clone() else {
            return false;
        };
        deny.secret_identity(&mut self.guard.links, dev, ino, nlink, is_dir)
    }
}
