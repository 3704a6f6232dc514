//! `wasi:filesystem/preopens` and `types` on the guarded view: calls on an open descriptor pass
//! through to wasmtime-wasi, path-taking calls are checked first and (Linux) done here on the
//! object that was checked, and directory listings leave denied entries out.

#[cfg(target_os = "linux")]
use super::deny::join;
#[cfg(target_os = "linux")]
use super::locate::Reached;
#[cfg(target_os = "linux")]
use super::sys::{code, io_code, object_stat, timespec};
use super::{DirPath, GuardedFsView, Slot};
use crate::workspace::Access;
#[cfg(target_os = "linux")]
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult, ReaddirIterator};

impl preopens::Host for GuardedFsView<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let dirs = preopens::Host::get_directories(&mut self.inner)?;
        if let Some(deny) = &self.guard.deny {
            for (fd, guest) in &dirs {
                let path = match deny.preopen_rel(guest) {
                    // A preopen below the root was opened by its host path, following any
                    // symlink on it: it is judged by where it really is (one `readlink`).
                    #[cfg(target_os = "linux")]
                    Some(rel) if !rel.is_empty() => {
                        match deny.real_rel(self.inner.table.get(fd)?, &rel) {
                            None => DirPath::Guarded(rel),
                            Some(Some(real)) => DirPath::Guarded(Arc::from(real)),
                            Some(None) => DirPath::Refused,
                        }
                    }
                    Some(rel) => DirPath::Guarded(rel),
                    None => DirPath::Unguarded,
                };
                self.guard.dirs.insert(fd.rep(), path);
            }
        }
        Ok(dirs)
    }
}

impl types::Host for GuardedFsView<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.inner, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.inner, err)
    }
}

impl HostDescriptor for GuardedFsView<'_> {
    async fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        HostDescriptor::advise(&mut self.inner, fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        HostDescriptor::sync_data(&mut self.inner, fd).await
    }

    async fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorFlags> {
        HostDescriptor::get_flags(&mut self.inner, fd).await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        HostDescriptor::get_type(&mut self.inner, fd).await
    }

    async fn set_size(&mut self, fd: Resource<Descriptor>, size: types::Filesize) -> FsResult<()> {
        HostDescriptor::set_size(&mut self.inner, fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        HostDescriptor::set_times(&mut self.inner, fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        HostDescriptor::read(&mut self.inner, fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        HostDescriptor::write(&mut self.inner, fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<ReaddirIterator>> {
        let path = self.dir_path(&fd)?;
        let stream = HostDescriptor::read_directory(&mut self.inner, fd).await?;
        if let Some(path) = path {
            self.guard.streams.insert(stream.rep(), path);
        }
        Ok(stream)
    }

    async fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        HostDescriptor::sync(&mut self.inner, fd).await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        #[cfg(target_os = "linux")]
        if let Reached::Here(at) = self.locate(&fd, &path, Access::Write, Slot::First)? {
            at.writable()?;
            let mode = rustix::fs::Mode::from_raw_mode(0o777);
            return rustix::fs::mkdirat(&at.dir, at.name.as_str(), mode).map_err(code);
        }
        #[cfg(not(target_os = "linux"))]
        self.check(&fd, &path, Access::Write, Slot::First)?;
        HostDescriptor::create_directory_at(&mut self.inner, fd, path).await
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        if let Some((rep, _)) = &self.guard.opened_stat {
            if *rep == fd.rep() {
                if let Some((_, stat)) = self.guard.opened_stat.take() {
                    return Ok(stat);
                }
            }
        }
        HostDescriptor::stat(&mut self.inner, fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        #[cfg(target_os = "linux")]
        {
            let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
            if let Some(object) = self.locate_object(&fd, &path, follow, Access::Read)? {
                let meta = std::fs::File::from(object).metadata().map_err(io_code)?;
                return Ok(object_stat(&meta));
            }
        }
        #[cfg(not(target_os = "linux"))]
        self.check(&fd, &path, Access::Read, Slot::First)?;
        HostDescriptor::stat_at(&mut self.inner, fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{AtFlags, Timestamps};
            let times = Timestamps {
                last_access: timespec(atim)?,
                last_modification: timespec(mtim)?,
            };
            // A final symlink itself is changed in its directory; what a path leads to is
            // opened (`O_PATH`) and changed through its descriptor.
            let follow =
                path_flags.contains(types::PathFlags::SYMLINK_FOLLOW) || path.ends_with('/');
            if !follow {
                if let Reached::Here(at) = self.locate(&fd, &path, Access::Write, Slot::First)? {
                    at.writable()?;
                    return rustix::fs::utimensat(
                        &at.dir,
                        at.name.as_str(),
                        &times,
                        AtFlags::SYMLINK_NOFOLLOW,
                    )
                    .map_err(code);
                }
            } else if let Some(object) = self.locate_object(&fd, &path, true, Access::Write)? {
                use std::os::fd::AsRawFd;
                if self.guest_dir(&fd)?.1.write_not_permitted() {
                    return Err(ErrorCode::NotPermitted.into());
                }
                let proc = format!("/proc/self/fd/{}", object.as_raw_fd());
                return rustix::fs::utimensat(rustix::fs::CWD, proc, &times, AtFlags::empty())
                    .map_err(code);
            }
        }
        #[cfg(not(target_os = "linux"))]
        self.check(&fd, &path, Access::Write, Slot::First)?;
        HostDescriptor::set_times_at(&mut self.inner, fd, path_flags, path, atim, mtim).await
    }

    async fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        #[cfg(target_os = "linux")]
        {
            let from = self.locate(&fd, &old_path, Access::Write, Slot::First)?;
            let to = self.locate(&new_descriptor, &new_path, Access::Write, Slot::Second)?;
            if let (Reached::Here(from), Reached::Here(to)) = (from, to) {
                from.writable()?;
                to.writable()?;
                if old_path_flags.contains(types::PathFlags::SYMLINK_FOLLOW) {
                    return Err(ErrorCode::Invalid.into());
                }
                if from.perms != to.perms {
                    return Err(ErrorCode::NotPermitted.into());
                }
                // No second name for a second name of a secret.
                use rustix::fs::AtFlags;
                if let Ok(stat) =
                    rustix::fs::statat(&from.dir, from.bare(), AtFlags::SYMLINK_NOFOLLOW)
                {
                    #[allow(clippy::unnecessary_cast)]
                    let nlink = stat.st_nlink as u64;
                    let regular = rustix::fs::FileType::from_raw_mode(stat.st_mode)
                        == rustix::fs::FileType::RegularFile;
                    if regular && self.secret_object(stat.st_dev, stat.st_ino, nlink, false) {
                        return Err(ErrorCode::Access.into());
                    }
                }
                return rustix::fs::linkat(
                    &from.dir,
                    from.name.as_str(),
                    &to.dir,
                    to.name.as_str(),
                    AtFlags::empty(),
                )
                .map_err(code);
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.check(&fd, &old_path, Access::Write, Slot::First)?;
            self.check(&new_descriptor, &new_path, Access::Write, Slot::Second)?;
        }
        HostDescriptor::link_at(
            &mut self.inner,
            fd,
            old_path_flags,
            old_path,
            new_descriptor,
            new_path,
        )
        .await
    }

    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        self.open_at_guarded(fd, path_flags, path, oflags, flags)
            .await
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        let rep = fd.rep();
        HostDescriptor::drop(&mut self.inner, fd)?;
        self.guard.dirs.remove(&rep);
        if self
            .guard
            .opened_stat
            .as_ref()
            .is_some_and(|(r, _)| *r == rep)
        {
            self.guard.opened_stat = None;
        }
        Ok(())
    }

    async fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        #[cfg(target_os = "linux")]
        if let Reached::Here(at) = self.locate(&fd, &path, Access::Read, Slot::First)? {
            // A trailing `/` would follow the link; the kernel answers `invalid` for it.
            if at.name.ends_with('/') {
                return Err(ErrorCode::Invalid.into());
            }
            return rustix::fs::readlinkat(&at.dir, at.name.as_str(), Vec::new())
                .map_err(code)?
                .into_string()
                .map_err(|_| ErrorCode::IllegalByteSequence.into());
        }
        #[cfg(not(target_os = "linux"))]
        self.check(&fd, &path, Access::Read, Slot::First)?;
        HostDescriptor::readlink_at(&mut self.inner, fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        #[cfg(target_os = "linux")]
        if let Reached::Here(at) = self.locate(&fd, &path, Access::Write, Slot::First)? {
            at.writable()?;
            return rustix::fs::unlinkat(&at.dir, at.name.as_str(), rustix::fs::AtFlags::REMOVEDIR)
                .map_err(code);
        }
        #[cfg(not(target_os = "linux"))]
        self.check(&fd, &path, Access::Write, Slot::First)?;
        HostDescriptor::remove_directory_at(&mut self.inner, fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        #[cfg(target_os = "linux")]
        {
            let from = self.locate(&fd, &old_path, Access::Write, Slot::First)?;
            let to = self.locate(&new_fd, &new_path, Access::Write, Slot::Second)?;
            if let (Reached::Here(from), Reached::Here(to)) = (from, to) {
                from.writable()?;
                to.writable()?;
                if from.perms != to.perms {
                    return Err(ErrorCode::NotPermitted.into());
                }
                return rustix::fs::renameat(
                    &from.dir,
                    from.name.as_str(),
                    &to.dir,
                    to.name.as_str(),
                )
                .map_err(code);
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            self.check(&fd, &old_path, Access::Write, Slot::First)?;
            self.check(&new_fd, &new_path, Access::Write, Slot::Second)?;
        }
        HostDescriptor::rename_at(&mut self.inner, fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.check_symlink_target(&fd, &src_path, &dest_path)?;
        #[cfg(target_os = "linux")]
        if let Reached::Here(at) = self.locate(&fd, &dest_path, Access::Write, Slot::First)? {
            at.writable()?;
            // Reached through a symlink: the target is judged again from where the link
            // really is.
            if let (Some(real), Some(deny)) = (&at.real, self.guard.deny.clone()) {
                let dir = &real[..real.rfind('/').unwrap_or(0)];
                join(&mut self.guard.buf2, dir, &src_path).map_err(|_| ErrorCode::Access)?;
                if deny.denied(&self.guard.buf2, 0, Access::Write) {
                    return Err(ErrorCode::Access.into());
                }
            }
            return rustix::fs::symlinkat(src_path.as_str(), &at.dir, at.name.as_str())
                .map_err(code);
        }
        HostDescriptor::symlink_at(&mut self.inner, fd, src_path, dest_path).await
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        #[cfg(target_os = "linux")]
        if let Reached::Here(at) = self.locate(&fd, &path, Access::Write, Slot::First)? {
            at.writable()?;
            return rustix::fs::unlinkat(&at.dir, at.name.as_str(), rustix::fs::AtFlags::empty())
                .map_err(code);
        }
        #[cfg(not(target_os = "linux"))]
        self.check(&fd, &path, Access::Write, Slot::First)?;
        HostDescriptor::unlink_file_at(&mut self.inner, fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        // A regular file is read on the calling thread (see `stream`); anything else, and a
        // directory's error, as wasmtime-wasi does it.
        #[cfg(unix)]
        if let (true, Descriptor::File(f)) =
            (super::BLOCKING_CURRENT_THREAD, self.inner.table.get(&fd)?)
        {
            if let Some(stream) = super::stream::InlineFileStream::new(&f.file, offset) {
                let stream: DynInputStream = Box::new(stream);
                return Ok(self.inner.table.push(stream)?);
            }
        }
        HostDescriptor::read_via_stream(&mut self.inner, fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        HostDescriptor::write_via_stream(&mut self.inner, fd, offset)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        HostDescriptor::append_via_stream(&mut self.inner, fd)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        HostDescriptor::is_same_object(&mut self.inner, a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        HostDescriptor::metadata_hash(&mut self.inner, fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        #[cfg(target_os = "linux")]
        {
            let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
            if let Some(object) = self.locate_object(&fd, &path, follow, Access::Read)? {
                use std::hash::{Hash, Hasher};
                use std::os::unix::fs::MetadataExt;
                let meta = std::fs::File::from(object).metadata().map_err(io_code)?;
                // The identity hash wasmtime-wasi computes for `metadata-hash`.
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                (meta.dev(), meta.ino()).hash(&mut hasher);
                let lower = hasher.finish();
                return Ok(types::MetadataHashValue {
                    lower,
                    upper: lower ^ 4614256656552045848u64,
                });
            }
        }
        #[cfg(not(target_os = "linux"))]
        self.check(&fd, &path, Access::Read, Slot::First)?;
        HostDescriptor::metadata_hash_at(&mut self.inner, fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for GuardedFsView<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<ReaddirIterator>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        let (Some(dir), Some(deny)) = (
            self.guard.streams.get(&stream.rep()).cloned(),
            self.guard.deny.clone(),
        ) else {
            return HostDirectoryEntryStream::read_directory_entry(&mut self.inner, stream).await;
        };
        let rep = stream.rep();
        let mut stream = stream;
        loop {
            let next =
                HostDirectoryEntryStream::read_directory_entry(&mut self.inner, stream).await?;
            let Some(entry) = next else {
                return Ok(None);
            };
            let buf = &mut self.guard.buf;
            buf.clear();
            buf.push_str(&dir);
            if !buf.is_empty() {
                buf.push('/');
            }
            buf.push_str(&entry.name);
            if !deny.denied(buf, dir.len(), Access::Read) {
                return Ok(Some(entry));
            }
            crate::sandbox::trace::with(self.guard.trace.as_ref(), |t| t.hidden(&self.guard.buf));
            stream = Resource::new_borrow(rep);
        }
    }

    fn drop(&mut self, stream: Resource<ReaddirIterator>) -> wasmtime::Result<()> {
        let rep = stream.rep();
        HostDirectoryEntryStream::drop(&mut self.inner, stream)?;
        self.guard.streams.remove(&rep);
        Ok(())
    }
}
