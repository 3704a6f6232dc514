//! `open-at` on the guarded view: the one-step open of a plain file, the open done here on what
//! was checked (Linux), and the checked open through wasmtime-wasi otherwise.

#[cfg(target_os = "linux")]
use super::locate::{DirFd, Reached};
#[cfg(target_os = "linux")]
use super::sys::{code, file_stat, io_code};
use super::{DirPath, GuardedFsView, Slot};
use crate::workspace::Access;
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{self, ErrorCode, HostDescriptor};
use wasmtime_wasi::p2::FsResult;

/// Whether entry `name` of `dir` is a symlink itself.
#[cfg(target_os = "linux")]
fn is_symlink(dir: &DirFd, name: &str) -> bool {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink
    })
}

/// Symlinks followed by one `open-at` at most, as the kernel allows.
#[cfg(target_os = "linux")]
const MAX_SYMLINKS: u32 = 40;

impl GuardedFsView<'_> {
    /// `open-at` on the guarded view: checked for what the open can do, then opened here on
    /// what was checked (Linux, a guarded descriptor), or through wasmtime-wasi with the
    /// object's type, a second name of a secret and its real path checked around the open.
    pub(super) async fn open_at_guarded(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let access = if open_writes(oflags, flags) {
            Access::Write
        } else {
            Access::Read
        };
        let guarded = self.check(&fd, &path, access, Slot::First)?;
        // The common case, reading a plain file: open it here in one step.
        #[cfg(target_os = "linux")]
        if guarded && oflags == types::OpenFlags::empty() && flags == types::DescriptorFlags::READ {
            if let Some(opened) = self.open_plain_file(&fd, &path)? {
                return Ok(opened);
            }
        }
        // Everything else on a guarded descriptor: opened here on what was checked.
        #[cfg(target_os = "linux")]
        if guarded {
            if let Some(opened) = self.open_here(&fd, &path, path_flags, oflags, flags, access)? {
                return Ok(opened);
            }
        }
        // Below: no `openat2` (or not Linux), or an unguarded descriptor.
        // Opening a FIFO blocks until a writer comes (and reading a device may never end),
        // inside a host call the epoch deadline cannot interrupt: only regular files,
        // directories and symlinks to them are opened.
        // A regular file with several links: refused when it cannot be identified once opened.
        let mut several_links = false;
        let probe = Resource::new_borrow(fd.rep());
        match HostDescriptor::stat_at(&mut self.inner, probe, path_flags, path.clone()).await {
            Ok(stat)
                if !matches!(
                    stat.type_,
                    types::DescriptorType::RegularFile | types::DescriptorType::Directory
                ) =>
            {
                return Err(ErrorCode::Access.into());
            }
            Ok(stat)
                if guarded
                    && stat.type_ == types::DescriptorType::RegularFile
                    && stat.link_count > 1 =>
            {
                // Its inode is not known before the open, and an open for writing could
                // truncate a secret: a write to a file with several links is refused.
                if access == Access::Write {
                    return Err(ErrorCode::Access.into());
                }
                several_links = true;
            }
            _ => {}
        }
        let opened =
            HostDescriptor::open_at(&mut self.inner, fd, path_flags, path, oflags, flags).await?;
        if !guarded {
            if self.guard.deny.is_some() {
                self.guard.dirs.insert(opened.rep(), DirPath::Unguarded);
            }
            return Ok(opened);
        }
        // What was opened must not be a secret under another name (a second name, or one
        // exchanged with or renamed to a plain name).
        #[allow(clippy::unnecessary_cast)]
        let id = match self.inner.table.get(&opened)? {
            Descriptor::File(f) => {
                use std::os::unix::fs::MetadataExt;
                f.file
                    .metadata()
                    .ok()
                    .map(|m| (m.dev(), m.ino(), m.nlink(), false))
            }
            Descriptor::Dir(d) => {
                use std::os::fd::AsFd;
                rustix::fs::fstat(d.dir.as_fd())
                    .ok()
                    .map(|st| (st.st_dev as u64, st.st_ino as u64, 1, true))
            }
        };
        let secret = match id {
            Some((dev, ino, nlink, dir)) => self.secret_object(dev, ino, nlink, dir),
            None => several_links,
        };
        if secret {
            self.inner.table.delete(opened)?;
            return Err(ErrorCode::Access.into());
        }
        let descriptor = self.inner.table.get(&opened)?;
        let is_dir = matches!(descriptor, Descriptor::Dir(_));
        #[cfg(target_os = "linux")]
        let real = match self.guard.deny.as_ref() {
            Some(deny) => deny.real_rel(descriptor, &self.guard.buf),
            None => None,
        };
        #[cfg(not(target_os = "linux"))]
        let real: Option<Option<String>> = None;
        let path = match real {
            None => None,
            Some(Some(real))
                if !self
                    .guard
                    .deny
                    .as_ref()
                    .is_some_and(|d| d.denied(&real, 0, access)) =>
            {
                Some(real)
            }
            // Reached through a symlink to something denied, or outside the workspace.
            Some(_) => {
                self.inner.table.delete(opened)?;
                return Err(ErrorCode::Access.into());
            }
        };
        if is_dir {
            let rel: Arc<str> = match path {
                Some(real) => Arc::from(real),
                None => Arc::from(self.guard.buf.as_str()),
            };
            self.guard.dirs.insert(opened.rep(), DirPath::Guarded(rel));
        }
        Ok(opened)
    }

    /// Open `path` below directory `fd` for reading when it is a regular file reached without
    /// any symlink: one `openat2` (beneath the directory, no symlinks, non-blocking so a FIFO
    /// cannot hang the call) and one `fstat` of what was opened. No symlink on the way means its
    /// real path is the lexical one the caller already checked; the type is the opened file's
    /// own, so nothing can be swapped in between. Opened the way wasmtime-wasi opens a file for
    /// reading (read mode, the directory's permissions). `Ok(None)`: not such a file (a symlink,
    /// a directory, missing, ...), take the general path; `Err`: a FIFO, socket or device.
    #[cfg(target_os = "linux")]
    fn open_plain_file(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> FsResult<Option<Resource<Descriptor>>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let (opened, perms) = {
            let Ok(Descriptor::Dir(dir)) = self.inner.table.get(fd) else {
                return Ok(None);
            };
            let Ok(opened) = crate::fsutil::openat2_retry(
                &*dir.dir,
                path,
                OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY,
                Mode::empty(),
                ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
            ) else {
                return Ok(None);
            };
            (opened, dir.perms)
        };
        // One `statx` of what was opened: its type decides, and the answer is kept for the
        // tool's own `stat` of the new descriptor.
        let file = std::fs::File::from(opened);
        let Ok(meta) = file.metadata() else {
            return Ok(None);
        };
        let kind = meta.file_type();
        if kind.is_dir() {
            return Ok(None);
        }
        if !kind.is_file() {
            return Err(ErrorCode::Access.into());
        }
        {
            use std::os::unix::fs::MetadataExt;
            if self.secret_object(meta.dev(), meta.ino(), meta.nlink(), false) {
                return Err(ErrorCode::Access.into());
            }
        }
        let file = wasmtime_wasi::filesystem::File::new(
            file,
            perms,
            wasmtime_wasi::OpenMode::READ,
            super::BLOCKING_CURRENT_THREAD,
        );
        let opened = self.inner.table.push(Descriptor::File(file))?;
        self.guard.opened_stat = Some((opened.rep(), file_stat(&meta)));
        Ok(Some(opened))
    }

    /// `open-at` done here on a guarded descriptor: the final component is opened relative to
    /// the directory [`Self::locate`] opened, never following a symlink (`O_NOFOLLOW`); a final
    /// symlink, when the guest follows symlinks, is read here and its target located and
    /// judged the same way, so a file is created only where the check allowed it. Truncation
    /// is done after the checks (`ftruncate`), never by the open. `None`: no `openat2`.
    #[cfg(target_os = "linux")]
    fn open_here(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        path_flags: types::PathFlags,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
        access: Access,
    ) -> FsResult<Option<Resource<Descriptor>>> {
        use rustix::fs::{Mode, OFlags};
        use rustix::io::Errno;
        use std::os::unix::fs::MetadataExt;
        use types::{DescriptorFlags as D, OpenFlags as O};
        use wasmtime_wasi::OpenMode;
        // What wasmtime-wasi refuses before it opens anything.
        if flags
            .intersects(D::FILE_INTEGRITY_SYNC | D::DATA_INTEGRITY_SYNC | D::REQUESTED_WRITE_SYNC)
        {
            return Err(ErrorCode::Unsupported.into());
        }
        if oflags.contains(O::DIRECTORY)
            && oflags.intersects(O::CREATE | O::EXCLUSIVE | O::TRUNCATE)
        {
            return Err(ErrorCode::Invalid.into());
        }
        let write = oflags.intersects(O::CREATE | O::TRUNCATE) || flags.contains(D::WRITE);
        let read = flags.contains(D::READ) || !flags.contains(D::WRITE);
        let mut open_mode = OpenMode::empty();
        let mut kflags = OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::NOFOLLOW;
        match (read, write) {
            (true, true) => kflags |= OFlags::RDWR,
            (false, true) => kflags |= OFlags::WRONLY,
            _ => kflags |= OFlags::RDONLY,
        }
        if read {
            open_mode |= OpenMode::READ;
        }
        if write {
            open_mode |= OpenMode::WRITE;
        }
        let exclusive = oflags.contains(O::CREATE) && oflags.contains(O::EXCLUSIVE);
        if oflags.contains(O::CREATE) {
            kflags |= OFlags::CREATE;
            if exclusive {
                kflags |= OFlags::EXCL;
            }
        }
        if oflags.contains(O::DIRECTORY) {
            kflags |= OFlags::DIRECTORY;
        }
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        let mut current = path.to_string();
        let mut hops = 0;
        let (opened, real, perms) = loop {
            let at = match self.locate(fd, &current, access, Slot::First)? {
                Reached::Here(at) => at,
                Reached::Inner if hops == 0 => return Ok(None),
                Reached::Inner => return Err(ErrorCode::Access.into()),
            };
            if write && at.perms.write_not_permitted() {
                return Err(ErrorCode::NotPermitted.into());
            }
            // A trailing `/` asks for a directory and follows a final symlink.
            let trailing = at.name.ends_with('/');
            let mut k = kflags;
            if trailing {
                k |= OFlags::DIRECTORY;
            }
            match rustix::fs::openat(&at.dir, at.bare(), k, Mode::from_raw_mode(0o666)) {
                Ok(opened) => break (opened, at.real, at.perms),
                // The final component is a symlink (`O_DIRECTORY` makes that `not-directory`).
                Err(e @ (Errno::LOOP | Errno::NOTDIR))
                    if (follow || trailing)
                        && !exclusive
                        && (e == Errno::LOOP || is_symlink(&at.dir, at.bare())) =>
                {
                    hops += 1;
                    if hops > MAX_SYMLINKS {
                        return Err(ErrorCode::Loop.into());
                    }
                    let target = rustix::fs::readlinkat(&at.dir, at.bare(), Vec::new())
                        .map_err(code)?
                        .into_string()
                        .map_err(|_| ErrorCode::IllegalByteSequence)?;
                    // wasmtime-wasi refuses absolute symlinks as escapes.
                    if target.starts_with('/') {
                        return Err(ErrorCode::NotPermitted.into());
                    }
                    let lead = current.len() - at.name.len();
                    current.truncate(lead);
                    current.push_str(&target);
                    if trailing {
                        current.push('/');
                    }
                }
                Err(e) => return Err(code(e)),
            }
        };
        // One `statx` of what was opened: only regular files and directories, and no second
        // name of a secret, before anything is truncated.
        let file = std::fs::File::from(opened);
        let meta = file.metadata().map_err(io_code)?;
        let kind = meta.file_type();
        if !(kind.is_file() || kind.is_dir()) {
            return Err(ErrorCode::Access.into());
        }
        if self.secret_object(meta.dev(), meta.ino(), meta.nlink(), kind.is_dir()) {
            return Err(ErrorCode::Access.into());
        }
        if kind.is_file() && oflags.contains(O::TRUNCATE) {
            file.set_len(0).map_err(io_code)?;
        }
        let blocking = super::BLOCKING_CURRENT_THREAD;
        if kind.is_dir() {
            let rel: Arc<str> = match real {
                Some(real) => Arc::from(real),
                None => Arc::from(self.guard.buf.as_str()),
            };
            let dir = wasmtime_wasi::filesystem::Dir::new(file, perms, open_mode, blocking);
            let opened = self.inner.table.push(Descriptor::Dir(dir))?;
            self.guard.dirs.insert(opened.rep(), DirPath::Guarded(rel));
            return Ok(Some(opened));
        }
        let stat = (!write).then(|| file_stat(&meta));
        let file = wasmtime_wasi::filesystem::File::new(file, perms, open_mode, blocking);
        let opened = self.inner.table.push(Descriptor::File(file))?;
        if let Some(stat) = stat {
            self.guard.opened_stat = Some((opened.rep(), stat));
        }
        Ok(Some(opened))
    }
}

/// Whether an open can create, change or remove anything.
fn open_writes(oflags: types::OpenFlags, flags: types::DescriptorFlags) -> bool {
    oflags.intersects(
        types::OpenFlags::CREATE | types::OpenFlags::TRUNCATE | types::OpenFlags::EXCLUSIVE,
    ) || flags.intersects(types::DescriptorFlags::WRITE | types::DescriptorFlags::MUTATE_DIRECTORY)
}
