//! The filesystem guard as the guest's `wasi:filesystem` sees it, with the trace: every call
//! goes to [`GuardedFsView`] unchanged, and when the call has a trace (`toolgate plugin
//! test`), each path-taking call is recorded with its workspace-relative target and how it
//! ended. Without a trace a call costs one `Option` check more than the guard alone.

use super::fsguard::{join, touches_state, DirPath, GuardedFsView};
use super::trace::{self, FsEvent, FsOp, Outcome, TraceHandle};
use crate::workspace::{has_git_component, Access};
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult, ReaddirIterator};

/// [`HasData`] for the guarded (and maybe traced) `wasi:filesystem` interfaces.
pub(crate) struct TracedFs;

impl HasData for TracedFs {
    type Data<'a> = TracedFsView<'a>;
}

/// The guard's view; the trace is the guard's own (`None` for every call but a traced one).
pub(crate) struct TracedFsView<'a> {
    pub(crate) g: GuardedFsView<'a>,
}

/// Where a path names: workspace-relative, or as written when it leaves the workspace.
struct Target {
    rel: Option<String>,
    raw: String,
    /// `rel` is `None` because the path leaves the workspace (not an unguarded descriptor).
    leaves: bool,
}

impl TracedFsView<'_> {
    fn trace(&self) -> Option<TraceHandle> {
        self.g.guard.trace.clone()
    }

    /// The workspace-relative target of `path` below `fd` (the root is `.`).
    fn target(&self, fd: &Resource<Descriptor>, path: &str) -> Target {
        let (rel, leaves) = match self.g.guard.dirs.get(&fd.rep()) {
            Some(DirPath::Guarded(base)) => {
                let mut out = String::new();
                let joined = join(&mut out, base, path).ok().map(|_| out);
                let leaves = joined.is_none();
                (joined, leaves)
            }
            _ => (None, false),
        };
        Target {
            rel: rel.map(|r| if r.is_empty() { ".".into() } else { r }),
            raw: path.to_string(),
            leaves,
        }
    }

    /// Why the guard refuses `rel` for `access`, in words.
    fn why(&self, rel: &str, access: Access) -> String {
        let lexical = if touches_state(rel, access) {
            Some("under .toolgate/, the host's own state")
        } else if access == Access::Write && has_git_component(rel) {
            Some("inside .git, which tools never change")
        } else {
            self.g.guard.deny.as_ref().and_then(|d| {
                let mut end = rel.len();
                loop {
                    if d.workspace.is_secret(&rel[..end]) {
                        return Some("on the secrets deny-list");
                    }
                    end = rel[..end].rfind('/')?;
                }
            })
        };
        lexical
            .unwrap_or("reached through a symlink to something denied or outside the workspace, a second name of a secret, or not a regular file or directory")
            .to_string()
    }

    fn note<T>(&self, t: &TraceHandle, op: FsOp, at: Target, to: Option<Target>, r: &FsResult<T>) {
        let access = if op.writes() {
            Access::Write
        } else {
            Access::Read
        };
        let code = r
            .as_ref()
            .err()
            .map(|e: &FsError| e.downcast_ref().copied());
        let outcome = match (code, &at.rel) {
            (None, _) => Outcome::Ok,
            (Some(_), None) if at.leaves => Outcome::Refused("outside the workspace".into()),
            (Some(Some(ErrorCode::Access)), Some(rel)) => {
                let rel = match to.as_ref().and_then(|t| t.rel.as_deref()) {
                    Some(other) if !self.why(other, access).starts_with("reached") => other,
                    _ => rel,
                };
                Outcome::Refused(self.why(rel, access))
            }
            (Some(Some(ErrorCode::NotPermitted)), Some(_)) if op.writes() => Outcome::Refused(
                "mounted read-only: the manifest grants it in fs_read, not fs_write".into(),
            ),
            (Some(Some(c)), _) => Outcome::Failed(words(c)),
            (Some(None), _) => Outcome::Failed("failed".into()),
        };
        let path = |t: Target| t.rel.unwrap_or(t.raw);
        trace::with(Some(t), |tr| {
            tr.fs(FsEvent {
                op,
                path: path(at),
                to: to.map(path),
                outcome,
            })
        });
    }
}

/// An error code in plain words.
fn words(c: ErrorCode) -> String {
    match c {
        ErrorCode::NoEntry => "not found".into(),
        ErrorCode::Exist => "already exists".into(),
        ErrorCode::NotDirectory => "not a directory".into(),
        ErrorCode::IsDirectory => "is a directory".into(),
        ErrorCode::NotEmpty => "not empty".into(),
        ErrorCode::NotPermitted => "not permitted".into(),
        ErrorCode::Loop => "too many symlinks".into(),
        other => format!("{other:?}").to_ascii_lowercase(),
    }
}

/// Run the guard's `$call`; with a trace, record it as `$op` on `$fd`/`$path`.
macro_rules! traced {
    ($self:ident, $op:expr, $fd:expr, $path:expr, $call:expr) => {{
        match $self.trace() {
            None => $call.await,
            Some(t) => {
                let at = $self.target(&$fd, &$path);
                let r = $call.await;
                $self.note(&t, $op, at, None, &r);
                r
            }
        }
    }};
}

impl preopens::Host for TracedFsView<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        preopens::Host::get_directories(&mut self.g)
    }
}

impl types::Host for TracedFsView<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.g, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.g, err)
    }
}

type D = Resource<Descriptor>;

impl HostDescriptor for TracedFsView<'_> {
    async fn advise(
        &mut self,
        fd: D,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        HostDescriptor::advise(&mut self.g, fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: D) -> FsResult<()> {
        HostDescriptor::sync_data(&mut self.g, fd).await
    }

    async fn get_flags(&mut self, fd: D) -> FsResult<types::DescriptorFlags> {
        HostDescriptor::get_flags(&mut self.g, fd).await
    }

    async fn get_type(&mut self, fd: D) -> FsResult<types::DescriptorType> {
        HostDescriptor::get_type(&mut self.g, fd).await
    }

    async fn set_size(&mut self, fd: D, size: types::Filesize) -> FsResult<()> {
        HostDescriptor::set_size(&mut self.g, fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: D,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        HostDescriptor::set_times(&mut self.g, fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: D,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        HostDescriptor::read(&mut self.g, fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: D,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        HostDescriptor::write(&mut self.g, fd, buf, offset).await
    }

    async fn read_directory(&mut self, fd: D) -> FsResult<Resource<ReaddirIterator>> {
        traced!(
            self,
            FsOp::List,
            fd,
            ".",
            HostDescriptor::read_directory(&mut self.g, Resource::new_borrow(fd.rep()))
        )
    }

    async fn sync(&mut self, fd: D) -> FsResult<()> {
        HostDescriptor::sync(&mut self.g, fd).await
    }

    async fn create_directory_at(&mut self, fd: D, path: String) -> FsResult<()> {
        traced!(
            self,
            FsOp::Create,
            fd,
            path,
            HostDescriptor::create_directory_at(&mut self.g, fd, path)
        )
    }

    async fn stat(&mut self, fd: D) -> FsResult<types::DescriptorStat> {
        HostDescriptor::stat(&mut self.g, fd).await
    }

    async fn stat_at(
        &mut self,
        fd: D,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        traced!(
            self,
            FsOp::Stat,
            fd,
            path,
            HostDescriptor::stat_at(&mut self.g, fd, path_flags, path)
        )
    }

    async fn set_times_at(
        &mut self,
        fd: D,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        traced!(
            self,
            FsOp::SetTimes,
            fd,
            path,
            HostDescriptor::set_times_at(&mut self.g, fd, path_flags, path, atim, mtim)
        )
    }

    async fn link_at(
        &mut self,
        fd: D,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: D,
        new_path: String,
    ) -> FsResult<()> {
        let Some(t) = self.trace() else {
            return HostDescriptor::link_at(
                &mut self.g,
                fd,
                old_path_flags,
                old_path,
                new_descriptor,
                new_path,
            )
            .await;
        };
        let (from, to) = (
            self.target(&fd, &old_path),
            self.target(&new_descriptor, &new_path),
        );
        let r = HostDescriptor::link_at(
            &mut self.g,
            fd,
            old_path_flags,
            old_path,
            new_descriptor,
            new_path,
        )
        .await;
        self.note(&t, FsOp::Link, from, Some(to), &r);
        r
    }

    async fn open_at(
        &mut self,
        fd: D,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<D> {
        let Some(t) = self.trace() else {
            return HostDescriptor::open_at(&mut self.g, fd, path_flags, path, oflags, flags).await;
        };
        use types::{DescriptorFlags as F, OpenFlags as O};
        let writes = oflags.intersects(O::CREATE | O::TRUNCATE | O::EXCLUSIVE)
            || flags.intersects(F::WRITE | F::MUTATE_DIRECTORY);
        let op = if oflags.contains(O::EXCLUSIVE) {
            FsOp::Create
        } else if oflags.contains(O::CREATE) {
            // Tracing only: one guarded `stat` tells a new file from an existing one.
            let probe = Resource::new_borrow(fd.rep());
            let flags = types::PathFlags::SYMLINK_FOLLOW;
            match HostDescriptor::stat_at(&mut self.g, probe, flags, path.clone()).await {
                Ok(_) => FsOp::Write,
                Err(_) => FsOp::Create,
            }
        } else if writes {
            FsOp::Write
        } else if oflags.contains(O::DIRECTORY) {
            FsOp::List
        } else {
            FsOp::Read
        };
        let at = self.target(&fd, &path);
        let r = HostDescriptor::open_at(&mut self.g, fd, path_flags, path, oflags, flags).await;
        // A directory opened to read is recorded when it is listed.
        let dir_read = r
            .as_ref()
            .is_ok_and(|d| !writes && matches!(self.g.inner.table.get(d), Ok(Descriptor::Dir(_))));
        if !dir_read {
            self.note(&t, op, at, None, &r);
        }
        r
    }

    fn drop(&mut self, fd: D) -> wasmtime::Result<()> {
        HostDescriptor::drop(&mut self.g, fd)
    }

    async fn readlink_at(&mut self, fd: D, path: String) -> FsResult<String> {
        traced!(
            self,
            FsOp::Readlink,
            fd,
            path,
            HostDescriptor::readlink_at(&mut self.g, fd, path)
        )
    }

    async fn remove_directory_at(&mut self, fd: D, path: String) -> FsResult<()> {
        traced!(
            self,
            FsOp::Remove,
            fd,
            path,
            HostDescriptor::remove_directory_at(&mut self.g, fd, path)
        )
    }

    async fn rename_at(
        &mut self,
        fd: D,
        old_path: String,
        new_fd: D,
        new_path: String,
    ) -> FsResult<()> {
        let Some(t) = self.trace() else {
            return HostDescriptor::rename_at(&mut self.g, fd, old_path, new_fd, new_path).await;
        };
        let (from, to) = (self.target(&fd, &old_path), self.target(&new_fd, &new_path));
        let r = HostDescriptor::rename_at(&mut self.g, fd, old_path, new_fd, new_path).await;
        self.note(&t, FsOp::Rename, from, Some(to), &r);
        r
    }

    async fn symlink_at(&mut self, fd: D, src_path: String, dest_path: String) -> FsResult<()> {
        traced!(
            self,
            FsOp::Symlink,
            fd,
            dest_path,
            HostDescriptor::symlink_at(&mut self.g, fd, src_path, dest_path)
        )
    }

    async fn unlink_file_at(&mut self, fd: D, path: String) -> FsResult<()> {
        traced!(
            self,
            FsOp::Remove,
            fd,
            path,
            HostDescriptor::unlink_file_at(&mut self.g, fd, path)
        )
    }

    fn read_via_stream(
        &mut self,
        fd: D,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        HostDescriptor::read_via_stream(&mut self.g, fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: D,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        HostDescriptor::write_via_stream(&mut self.g, fd, offset)
    }

    fn append_via_stream(&mut self, fd: D) -> FsResult<Resource<DynOutputStream>> {
        HostDescriptor::append_via_stream(&mut self.g, fd)
    }

    async fn is_same_object(&mut self, a: D, b: D) -> wasmtime::Result<bool> {
        HostDescriptor::is_same_object(&mut self.g, a, b).await
    }

    async fn metadata_hash(&mut self, fd: D) -> FsResult<types::MetadataHashValue> {
        HostDescriptor::metadata_hash(&mut self.g, fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: D,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        traced!(
            self,
            FsOp::Stat,
            fd,
            path,
            HostDescriptor::metadata_hash_at(&mut self.g, fd, path_flags, path)
        )
    }
}

impl HostDirectoryEntryStream for TracedFsView<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<ReaddirIterator>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        HostDirectoryEntryStream::read_directory_entry(&mut self.g, stream).await
    }

    fn drop(&mut self, stream: Resource<ReaddirIterator>) -> wasmtime::Result<()> {
        HostDirectoryEntryStream::drop(&mut self.g, stream)
    }
}
