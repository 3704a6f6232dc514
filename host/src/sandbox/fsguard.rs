//! The deny-list inside the sandbox. A preopened directory exposes everything below it, so the
//! host's own implementation of `wasi:filesystem/types` (and `preopens`) sits in front of
//! wasmtime-wasi's and refuses, with `access`, every path-taking call whose target is a secret
//! or under the host's state directory (reading files under `.toolgate/outputs/` is the one
//! exception), and leaves such entries out of directory listings.
//!
//! Every directory descriptor's workspace-relative path is tracked in a side map keyed by the
//! descriptor's resource rep: filled when the preopens are handed out and on each successful
//! `open-at`, emptied on drop. A target is `descriptor path + given path`, with `.` and `..`
//! resolved lexically (wasmtime-wasi already refuses paths that leave the preopen and absolute
//! symlinks).
//!
//! Symlinks inside the workspace can alias a denied path under another name. Three things keep
//! that closed: the state directory is matched by name at any depth (`x/.toolgate/...` is
//! refused, since `x` may be a symlink to the root) as the default secrets already are; a
//! symlink the guest creates must not point at anything denied; and on Linux a successful
//! `open-at` is checked again against the real path of what was opened (`/proc/self/fd`,
//! about one extra syscall per open), which catches symlinks that were already in the workspace
//! (`config -> .env`). Not covered: pre-existing symlinks used by the non-open calls (stat,
//! unlink, rename, ... through `link -> .ssh`), truncation by an `open-at` through such a
//! symlink before the re-check refuses it, hard links made outside the sandbox, and renaming a
//! directory that a path-based (not `**/`) extra secret pattern names an entry of.
//!
//! Fast paths (Linux): a read-only open of a plain file reached without any symlink is done
//! by the guard itself (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` and `O_NONBLOCK`,
//! then `fstat` of the opened descriptor), so its real path is the lexical one and its type is
//! its own; other opens without symlinks are checked with an `O_PATH` `openat2` + `fstat`
//! before and a same-inode `fstat` after instead of `stat-at` and the `/proc` lookup. A path
//! with a symlink on the way always takes the full checks above.
//!
//! Descriptors of a store without a policy ([`FsGuard`] with no [`FsDeny`]) pass straight
//! through to wasmtime-wasi.

use crate::gate::scope::{
    has_git_component, Access, LinkSnapshot, Workspace, GUEST_ROOT, OUTPUTS_DIR, STATE_DIR,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult, ReaddirIterator};

/// What a guest may not touch inside its preopens: built once per gate from the workspace.
pub struct FsDeny {
    workspace: Workspace,
    /// The canonical workspace root as the host sees it, for the real-path check.
    host_root: PathBuf,
    /// Where the workspace root is mounted in the guest.
    guest_root: &'static str,
    /// Re-check what `open-at` opened against its real path (Linux).
    real_path_check: bool,
}

impl std::fmt::Debug for FsDeny {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsDeny")
            .field("root", &self.host_root)
            .finish_non_exhaustive()
    }
}

/// Two policies are equal only when they are the same object.
impl PartialEq for FsDeny {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for FsDeny {}

impl FsDeny {
    /// The policy for `workspace` (its secrets plus the state directory), mounted in the guest
    /// at [`GUEST_ROOT`].
    pub fn new(workspace: Workspace) -> Self {
        let host_root = workspace.root().to_path_buf();
        FsDeny {
            workspace,
            host_root,
            guest_root: GUEST_ROOT,
            real_path_check: cfg!(target_os = "linux"),
        }
    }

    /// Skip the real-path re-check of each `open-at` (one `readlink` of `/proc/self/fd/N`, a
    /// few microseconds): lexical checks only, so a symlink already in the workspace that points
    /// at a secret can be read through.
    pub fn without_real_path_check(mut self) -> Self {
        self.real_path_check = false;
        self
    }

    /// Whether `rel` (workspace-relative, normalised, `/`-separated, empty for the root) is off
    /// limits for `access`. `verified` is the length of a prefix of `rel`, ending at a component
    /// boundary, already known to be clean with all its ancestors; only longer ancestors are
    /// matched against the secrets.
    pub fn denied(&self, rel: &str, verified: usize, access: Access) -> bool {
        if touches_state(rel, access) {
            return true;
        }
        // Git internals are host state: nothing below a `.git`, nor a `.git` itself, is
        // created, changed, renamed, linked or removed (SPEC §9).
        if access == Access::Write && has_git_component(rel) {
            return true;
        }
        let mut end = rel.len();
        while end > verified {
            let candidate = &rel[..end];
            if self.workspace.is_secret(candidate) {
                return true;
            }
            match candidate.rfind('/') {
                Some(i) => end = i,
                None => break,
            }
        }
        false
    }

    /// Whether a regular file with identity `(dev, ino)` and `nlink` links is a second name
    /// of a deny-listed file (see [`Workspace::linked_secret`]; free for `nlink <= 1`).
    pub(crate) fn linked_secret(
        &self,
        snapshot: &mut LinkSnapshot,
        dev: u64,
        ino: u64,
        nlink: u64,
    ) -> bool {
        self.workspace
            .linked_secret(snapshot, dev, ino, nlink)
            .is_some()
    }

    /// The canonical workspace root as the host sees it.
    pub(crate) fn host_root(&self) -> &std::path::Path {
        &self.host_root
    }

    /// The workspace-relative path of a preopen the guest sees at `guest`, or `None` when it is
    /// not below the workspace mount (such a preopen is not filtered).
    fn preopen_rel(&self, guest: &str) -> Option<Arc<str>> {
        let rest = guest.strip_prefix(self.guest_root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let mut rel = String::new();
        join(&mut rel, "", rest.trim_start_matches('/')).ok()?;
        Some(Arc::from(rel))
    }

    /// The workspace-relative path of an open file, from the kernel's view of it, when it is not
    /// `lexical`. `None` when it is the same or cannot be told; `Some(None)` when it is outside
    /// the workspace.
    #[cfg(target_os = "linux")]
    fn real_rel(&self, fd: &Descriptor, lexical: &str) -> Option<Option<String>> {
        use std::os::fd::AsRawFd;
        if !self.real_path_check {
            return None;
        }
        let raw = match fd {
            Descriptor::File(f) => f.file.as_raw_fd(),
            Descriptor::Dir(d) => d.dir.as_raw_fd(),
        };
        let real = std::fs::read_link(format!("/proc/self/fd/{raw}")).ok()?;
        let Ok(rest) = real.strip_prefix(&self.host_root) else {
            return Some(None);
        };
        let rest = rest.to_string_lossy();
        (rest != lexical).then(|| Some(rest.into_owned()))
    }
}

/// Whether `rel` goes through a directory named [`STATE_DIR`] (at any depth: a symlink inside
/// the workspace may lead to the real one under another name) other than to read a file below
/// its `outputs/`.
fn touches_state(rel: &str, access: Access) -> bool {
    let outputs = &OUTPUTS_DIR[STATE_DIR.len()..];
    let mut from = 0;
    while let Some(i) = rel[from..].find(STATE_DIR) {
        let start = from + i;
        let end = start + STATE_DIR.len();
        let rest = &rel[end..];
        if (start == 0 || rel.as_bytes()[start - 1] == b'/')
            && (rest.is_empty() || rest.starts_with('/'))
        {
            let output_read = access == Access::Read
                && rest
                    .strip_prefix(outputs)
                    .and_then(|r| r.strip_prefix('/'))
                    .is_some_and(|r| !r.is_empty());
            if !output_read {
                return true;
            }
        }
        from = end;
    }
    false
}

/// Append `path` to `base` in `out`, resolving `.` and `..` lexically. Returns the length of the
/// prefix of `out` that is `base` or an ancestor of it (already checked when the base was
/// opened). Absolute paths and paths leaving the workspace are refused with `not-permitted`,
/// as wasmtime-wasi would refuse them.
fn join(out: &mut String, base: &str, path: &str) -> Result<usize, ErrorCode> {
    if path.starts_with('/') {
        return Err(ErrorCode::NotPermitted);
    }
    out.clear();
    out.push_str(base);
    let mut verified = out.len();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.is_empty() {
                    return Err(ErrorCode::NotPermitted);
                }
                let cut = out.rfind('/').unwrap_or(0);
                out.truncate(cut);
                verified = verified.min(cut);
            }
            name => {
                if !out.is_empty() {
                    out.push('/');
                }
                out.push_str(name);
            }
        }
    }
    Ok(verified)
}

/// Where a directory descriptor is.
#[derive(Clone)]
enum DirPath {
    /// Below the workspace: workspace-relative, empty for the root.
    Guarded(Arc<str>),
    /// A preopen outside the workspace mount: not filtered.
    Unguarded,
}

/// Per-call filesystem guard state, kept in the store next to the WASI context.
#[derive(Default)]
pub(crate) struct FsGuard {
    deny: Option<Arc<FsDeny>>,
    /// Directory descriptor rep -> its path.
    dirs: HashMap<u32, DirPath>,
    /// Directory-entry-stream rep -> the listed directory's workspace-relative path.
    streams: HashMap<u32, Arc<str>>,
    /// Scratch buffer for joined paths.
    buf: String,
    /// A second scratch buffer (the other side of rename/link, symlink targets).
    buf2: String,
    /// The last directory found clean (it and all its ancestors are no secret), so a run of
    /// opens in one directory matches only each file's own name.
    clean_dir: String,
    /// The `stat` the guard took of the file it opened last itself (descriptor rep, stat):
    /// a tool that opens a file and asks its size at once (grep, read) gets it without a second
    /// system call. Used once, and forgotten when that descriptor is dropped.
    opened_stat: Option<(u32, types::DescriptorStat)>,
    /// The secrets' inodes for this call, looked up on the first file with several links.
    links: LinkSnapshot,
}

impl FsGuard {
    /// A guard enforcing `deny`, or passing everything through when `None`.
    pub(crate) fn new(deny: Option<Arc<FsDeny>>) -> Self {
        FsGuard {
            deny,
            ..FsGuard::default()
        }
    }
}

/// [`HasData`] for the guarded `wasi:filesystem` interfaces.
pub(crate) struct GuardedFs;

impl HasData for GuardedFs {
    type Data<'a> = GuardedFsView<'a>;
}

/// wasmtime-wasi's filesystem view plus this call's guard.
pub(crate) struct GuardedFsView<'a> {
    pub(crate) inner: WasiFilesystemCtxView<'a>,
    pub(crate) guard: &'a mut FsGuard,
}

/// Which buffer to join into.
#[derive(Clone, Copy)]
enum Slot {
    First,
    Second,
}

impl GuardedFsView<'_> {
    /// The path of directory descriptor `rep`: `Ok(None)` when unguarded (no policy, or a
    /// preopen outside the workspace).
    fn dir_path(&self, fd: &Resource<Descriptor>) -> FsResult<Option<Arc<str>>> {
        if self.guard.deny.is_none() {
            return Ok(None);
        }
        match self.guard.dirs.get(&fd.rep()) {
            Some(DirPath::Guarded(p)) => Ok(Some(p.clone())),
            Some(DirPath::Unguarded) => Ok(None),
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
    fn check(
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
    fn check_symlink_target(
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
}

/// What a look at an open's target before the open found.
#[derive(Clone, Copy)]
enum Precheck {
    /// A regular file or directory reached without any symlink: its device and inode.
    Plain((u64, u64)),
    /// Something that must not be opened (a FIFO, socket or device).
    Refuse,
    /// Not known (a symlink on the way, a missing file, no `openat2`): check the slow way.
    Unknown,
}

/// Whether the opened descriptor is the file `id` (device, inode) names.
#[cfg(target_os = "linux")]
fn same_file(descriptor: &Descriptor, id: (u64, u64)) -> bool {
    use std::os::unix::fs::MetadataExt;
    let meta = match descriptor {
        Descriptor::File(f) => f.file.metadata(),
        Descriptor::Dir(d) => d.dir.metadata(),
    };
    meta.is_ok_and(|m| (m.dev(), m.ino()) == id)
}

impl GuardedFsView<'_> {
    /// Look at `path` below directory `fd` without opening it for real: one `openat2` with
    /// `O_PATH` that may not leave the directory or pass any symlink, and one `fstat`. A plain
    /// regular file or directory then needs neither wasmtime-wasi's `stat-at` (four syscalls)
    /// nor, once opened, the real-path lookup through `/proc` (a same-inode `fstat` does).
    #[cfg(target_os = "linux")]
    fn precheck(&mut self, fd: &Resource<Descriptor>, path: &str) -> Precheck {
        use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
        let Ok(Descriptor::Dir(dir)) = self.inner.table.get(fd) else {
            return Precheck::Unknown;
        };
        let Ok(target) = rustix::fs::openat2(
            &*dir.dir,
            path,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) else {
            return Precheck::Unknown;
        };
        match rustix::fs::fstat(&target) {
            Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
                // A second name of a secret is refused before it is opened (an open for
                // writing could truncate it).
                #[allow(clippy::unnecessary_cast)]
                FileType::RegularFile
                    if self.linked(stat.st_dev, stat.st_ino, stat.st_nlink as u64) =>
                {
                    Precheck::Refuse
                }
                FileType::RegularFile | FileType::Directory => {
                    Precheck::Plain((stat.st_dev, stat.st_ino))
                }
                _ => Precheck::Refuse,
            },
            Err(_) => Precheck::Unknown,
        }
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
            let Ok(opened) = rustix::fs::openat2(
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
            if self.linked(meta.dev(), meta.ino(), meta.nlink()) {
                return Err(ErrorCode::Access.into());
            }
        }
        let file = wasmtime_wasi::filesystem::File::new(
            file,
            perms,
            wasmtime_wasi::OpenMode::READ,
            super::wasi::BLOCKING_CURRENT_THREAD,
        );
        let opened = self.inner.table.push(Descriptor::File(file))?;
        self.guard.opened_stat = Some((opened.rep(), file_stat(&meta)));
        Ok(Some(opened))
    }

    #[cfg(not(target_os = "linux"))]
    fn precheck(&mut self, _fd: &Resource<Descriptor>, _path: &str) -> Precheck {
        Precheck::Unknown
    }

    /// Whether a regular file is a second name of a secret (free with one link).
    fn linked(&mut self, dev: u64, ino: u64, nlink: u64) -> bool {
        if nlink <= 1 {
            return false;
        }
        let Some(deny) = self.guard.deny.clone() else {
            return false;
        };
        deny.linked_secret(&mut self.guard.links, dev, ino, nlink)
    }
}

/// A regular file's `stat` as wasmtime-wasi reports it (its `status-change-timestamp` is the
/// birth time, as there).
#[cfg(target_os = "linux")]
fn file_stat(meta: &std::fs::Metadata) -> types::DescriptorStat {
    use std::os::unix::fs::MetadataExt;
    let at = |t: std::io::Result<std::time::SystemTime>| {
        let d = t.ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some(types::Datetime {
            seconds: d.as_secs(),
            nanoseconds: d.subsec_nanos(),
        })
    };
    types::DescriptorStat {
        type_: types::DescriptorType::RegularFile,
        link_count: meta.nlink(),
        size: meta.len(),
        data_access_timestamp: at(meta.accessed()),
        data_modification_timestamp: at(meta.modified()),
        status_change_timestamp: at(meta.created()),
    }
}

/// Whether an open can create, change or remove anything.
fn open_writes(oflags: types::OpenFlags, flags: types::DescriptorFlags) -> bool {
    oflags.intersects(
        types::OpenFlags::CREATE | types::OpenFlags::TRUNCATE | types::OpenFlags::EXCLUSIVE,
    ) || flags.intersects(types::DescriptorFlags::WRITE | types::DescriptorFlags::MUTATE_DIRECTORY)
}

impl preopens::Host for GuardedFsView<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let dirs = preopens::Host::get_directories(&mut self.inner)?;
        if let Some(deny) = &self.guard.deny {
            for (fd, guest) in &dirs {
                let path = match deny.preopen_rel(guest) {
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
        self.check(&fd, &old_path, Access::Write, Slot::First)?;
        self.check(&new_descriptor, &new_path, Access::Write, Slot::Second)?;
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
        // Opening a FIFO blocks until a writer comes (and reading a device may never end),
        // inside a host call the epoch deadline cannot interrupt: only regular files,
        // directories and symlinks to them are opened.
        let pre = if guarded {
            self.precheck(&fd, &path)
        } else {
            Precheck::Unknown
        };
        // A regular file with several links reached the slow way: checked against the
        // secrets' inodes once opened.
        let mut several_links = false;
        match pre {
            Precheck::Refuse => return Err(ErrorCode::Access.into()),
            Precheck::Plain(_) => {}
            Precheck::Unknown => {
                let probe = Resource::new_borrow(fd.rep());
                match HostDescriptor::stat_at(&mut self.inner, probe, path_flags, path.clone())
                    .await
                {
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
                        // Its inode is not known before the open, and an open for writing
                        // could truncate a secret: a write through a symlink (or on a kernel
                        // without `openat2`) to a file with several links is refused.
                        if access == Access::Write && self.guard.deny.is_some() {
                            return Err(ErrorCode::Access.into());
                        }
                        several_links = true;
                    }
                    _ => {}
                }
            }
        }
        let opened =
            HostDescriptor::open_at(&mut self.inner, fd, path_flags, path, oflags, flags).await?;
        if !guarded {
            if self.guard.deny.is_some() {
                self.guard.dirs.insert(opened.rep(), DirPath::Unguarded);
            }
            return Ok(opened);
        }
        if several_links {
            let id = match self.inner.table.get(&opened)? {
                Descriptor::File(f) => {
                    use std::os::unix::fs::MetadataExt;
                    f.file
                        .metadata()
                        .ok()
                        .map(|m| (m.dev(), m.ino(), m.nlink()))
                }
                Descriptor::Dir(_) => None,
            };
            if id.is_none_or(|(dev, ino, nlink)| self.linked(dev, ino, nlink)) {
                self.inner.table.delete(opened)?;
                return Err(ErrorCode::Access.into());
            }
        }
        let descriptor = self.inner.table.get(&opened)?;
        let is_dir = matches!(descriptor, Descriptor::Dir(_));
        #[cfg(target_os = "linux")]
        let real = match (self.guard.deny.as_ref(), pre) {
            // The path had no symlink a moment ago and what was opened is that same file: its
            // real path is the lexical one, already checked.
            (Some(_), Precheck::Plain(id)) if same_file(descriptor, id) => None,
            (Some(deny), _) => deny.real_rel(descriptor, &self.guard.buf),
            (None, _) => None,
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
        self.check(&fd, &path, Access::Read, Slot::First)?;
        HostDescriptor::readlink_at(&mut self.inner, fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
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
        self.check(&fd, &old_path, Access::Write, Slot::First)?;
        self.check(&new_fd, &new_path, Access::Write, Slot::Second)?;
        HostDescriptor::rename_at(&mut self.inner, fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.check_symlink_target(&fd, &src_path, &dest_path)?;
        HostDescriptor::symlink_at(&mut self.inner, fd, src_path, dest_path).await
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.check(&fd, &path, Access::Write, Slot::First)?;
        HostDescriptor::unlink_file_at(&mut self.inner, fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::{wit, Capabilities, GuestResult, Limits, Preopen, Sandbox};
    use serde_json::{json, Value};

    fn deny(dir: &std::path::Path) -> FsDeny {
        FsDeny::new(Workspace::new(dir, &["config/secrets.yaml".to_string()]).unwrap())
    }

    #[test]
    fn join_resolves_dots_and_refuses_escapes() {
        let mut out = String::new();
        assert_eq!(join(&mut out, "", "a/./b//c"), Ok(0));
        assert_eq!(out, "a/b/c");
        assert_eq!(join(&mut out, "src", "x.rs"), Ok(3));
        assert_eq!(out, "src/x.rs");
        assert_eq!(join(&mut out, "src/sub", "../.env"), Ok(3));
        assert_eq!(out, "src/.env");
        assert_eq!(join(&mut out, "src/a", "../../.env"), Ok(0));
        assert_eq!(out, ".env");
        assert_eq!(
            join(&mut out, "src", "../../.env"),
            Err(ErrorCode::NotPermitted)
        );
        assert_eq!(join(&mut out, "src", "."), Ok(3));
        assert_eq!(out, "src");
        assert_eq!(join(&mut out, "", "../x"), Err(ErrorCode::NotPermitted));
        assert_eq!(
            join(&mut out, "src", "/etc/passwd"),
            Err(ErrorCode::NotPermitted)
        );
    }

    #[test]
    fn deny_table() {
        let dir = tempfile::tempdir().unwrap();
        let d = deny(dir.path());
        let cases: &[(&str, Access, bool)] = &[
            ("", Access::Read, false),
            ("src/main.rs", Access::Read, false),
            ("src/main.rs", Access::Write, false),
            (".env", Access::Read, true),
            ("a/b/.env.local", Access::Read, true),
            (".ssh", Access::Read, true),
            (".ssh/config", Access::Read, true),
            ("deep/.aws/x/y", Access::Read, true),
            ("keys/server.pem", Access::Read, true),
            ("src/id_map.rs", Access::Read, false),
            ("config/secrets.yaml", Access::Read, true),
            ("config/other.yaml", Access::Read, false),
            (".toolgate", Access::Read, true),
            (".toolgate/grants.toml", Access::Read, true),
            (".toolgate/grants.toml", Access::Write, true),
            (".toolgate/outputs", Access::Read, true),
            (".toolgate/outputs/x.txt", Access::Read, false),
            (".toolgate/outputs/x.txt", Access::Write, true),
            (".toolgatex/y", Access::Write, false),
            ("x.toolgate/y", Access::Write, false),
            (".toolgate/outputsx", Access::Read, true),
            ("alias/.toolgate/grants.toml", Access::Write, true),
            ("alias/.toolgate/outputs/x.txt", Access::Read, false),
            ("alias/.toolgate/outputs/x.txt", Access::Write, true),
        ];
        for (rel, access, denied) in cases {
            assert_eq!(d.denied(rel, 0, *access), *denied, "{rel} {access:?}");
        }
        // Git internals: never written (any `.git` component, any case), still read.
        for rel in [
            ".git",
            ".git/hooks/pre-commit",
            ".git/config",
            "src/.git/config",
            "vendor/lib/.git",
            ".GIT/config",
            "a/.Git",
        ] {
            assert!(d.denied(rel, 0, Access::Write), "{rel}");
            assert!(!d.denied(rel, 0, Access::Read), "{rel}");
        }
        for rel in [
            ".gitignore",
            ".github/ci.yml",
            "src/.gitkeep",
            "x.git/y",
            "git/x",
        ] {
            assert!(!d.denied(rel, 0, Access::Write), "{rel}");
        }
        // An already verified prefix is not matched again.
        assert!(d.denied("keys.pem/readme", 0, Access::Read));
        assert!(!d.denied("keys.pem/readme", 8, Access::Read));
    }

    #[test]
    fn preopen_paths() {
        let dir = tempfile::tempdir().unwrap();
        let d = deny(dir.path());
        assert_eq!(d.preopen_rel("/workspace").as_deref(), Some(""));
        assert_eq!(d.preopen_rel("/workspace/src/a").as_deref(), Some("src/a"));
        assert_eq!(d.preopen_rel("/workspacex"), None);
        assert_eq!(d.preopen_rel("/tmp"), None);
    }

    fn hostile() -> Vec<u8> {
        let file = format!(
            "{}/toolgate_tool_test_hostile.wasm",
            crate::tools::registry::GUEST_ARTIFACT_DIR
        );
        std::fs::read(file).unwrap()
    }

    /// Run the hostile guest's `probe` mode with the workspace root preopened writable.
    async fn probe(root: &std::path::Path, guarded: bool, ops: Value) -> Vec<Value> {
        let cache = tempfile::tempdir().unwrap();
        let sandbox = Sandbox::new(Some(cache.path().to_path_buf())).unwrap();
        let limits = Limits::default();
        let loaded = sandbox.load("test-hostile", &hostile()).unwrap();
        let caps = Capabilities {
            preopens: vec![Preopen {
                host: root.to_path_buf(),
                guest: GUEST_ROOT.to_string(),
                writable: true,
            }],
            deny: guarded.then(|| Arc::new(deny(root))),
            exec: None,
            ..Capabilities::default()
        };
        let context = wit::CallContext {
            workspace_root: GUEST_ROOT.to_string(),
            max_output_bytes: 1 << 20,
            denied_globs: Vec::new(),
        };
        let input = json!({"mode": "probe", "ops": ops}).to_string();
        let result = sandbox
            .call(&loaded, &caps, &limits, &input, &context)
            .await
            .unwrap();
        let GuestResult::Output(out) = result else {
            panic!("the probe failed");
        };
        let data: Value = serde_json::from_str(&out.data).unwrap();
        data["results"].as_array().unwrap().clone()
    }

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join(".env"), "SECRET=1").unwrap();
        std::fs::write(root.join("notes.txt"), "hello").unwrap();
        std::fs::create_dir_all(root.join(".toolgate/outputs")).unwrap();
        std::fs::write(root.join(".toolgate/outputs/call-1.txt"), "saved").unwrap();
        std::fs::write(root.join(".toolgate/grants.toml"), "").unwrap();
        std::fs::create_dir_all(root.join("src/.ssh")).unwrap();
        std::fs::write(root.join("src/.ssh/id_ed25519"), "key").unwrap();
        std::fs::write(root.join("src/lib.rs"), "// lib").unwrap();
        std::os::unix::fs::symlink(".env", root.join("innocent")).unwrap();
        std::os::unix::fs::symlink("..", root.join("src/up")).unwrap();
        (dir, root)
    }

    fn ok(results: &[Value], i: usize) -> bool {
        results[i]["ok"].as_bool().unwrap()
    }

    #[tokio::test]
    async fn writable_root_preopen_is_filtered() {
        let (_dir, root) = workspace();
        let ops = json!([
            {"op": "read", "path": "/workspace/.env"},
            {"op": "write", "path": "/workspace/.toolgate/x"},
            {"op": "write", "path": "/workspace/.toolgate/grants.toml"},
            {"op": "read", "path": "/workspace/.toolgate/outputs/call-1.txt"},
            {"op": "write", "path": "/workspace/.toolgate/outputs/call-2.txt"},
            {"op": "read", "path": "/workspace/notes.txt"},
            {"op": "write", "path": "/workspace/new.txt"},
            {"op": "list", "path": "/workspace"},
            {"op": "list", "path": "/workspace/src"},
            {"op": "read", "path": "/workspace/src/.ssh/id_ed25519"},
            {"op": "read", "path": "/workspace/src/../.env"},
            {"op": "stat", "path": "/workspace/.env"},
            {"op": "remove", "path": "/workspace/.env"},
            {"op": "rename", "path": "/workspace/.env", "to": "/workspace/plain"},
            {"op": "rename", "path": "/workspace/notes.txt", "to": "/workspace/.toolgate/n"},
            {"op": "symlink", "path": "/workspace/link", "target": ".env"},
            {"op": "symlink", "path": "/workspace/src/link", "target": "../.toolgate/outputs/call-1.txt"},
            {"op": "read", "path": "/workspace/innocent"},
            {"op": "mkdir", "path": "/workspace/.ssh"},
            {"op": "mkdir", "path": "/workspace/made"},
            {"op": "symlink", "path": "/workspace/here", "target": "."},
            {"op": "write", "path": "/workspace/here/.toolgate/grants.toml"},
            {"op": "rename", "path": "/workspace/new.txt", "to": "/workspace/src/up/.toolgate/grants.toml"},
            {"op": "read", "path": "/workspace/src/up/.env"},
            {"op": "read", "path": "/workspace/src/up/notes.txt"},
        ]);
        let r = probe(&root, true, ops).await;
        let expect = [
            false, false, false, true, false, true, true, true, true, false, false, false, false,
            false, false, false, false, false, false, true,
        ];
        for (i, want) in expect.iter().enumerate() {
            assert_eq!(ok(&r, i), *want, "{}", r[i]);
        }
        assert_eq!(r[3]["detail"], "saved");
        let top: Vec<&str> = r[7]["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            !top.contains(&".env") && !top.contains(&".toolgate"),
            "{top:?}"
        );
        assert!(
            top.contains(&"notes.txt") && top.contains(&"src"),
            "{top:?}"
        );
        assert_eq!(r[8]["entries"], json!(["lib.rs", "up"]));
        assert!(
            r[0]["detail"].as_str().unwrap().contains("ermission"),
            "{}",
            r[0]
        );
        assert!(!root.join(".toolgate/x").exists());
        assert_eq!(
            std::fs::read_to_string(root.join(".toolgate/grants.toml")).unwrap(),
            ""
        );
        assert!(root.join(".env").exists() && !root.join("plain").exists());
        assert!(!root.join("link").exists() && !root.join("src/link").exists());
        assert!(root.join("new.txt").exists() && root.join("made").is_dir());
    }

    #[tokio::test]
    async fn without_a_policy_everything_passes() {
        let (_dir, root) = workspace();
        let ops = json!([
            {"op": "read", "path": "/workspace/.env"},
            {"op": "list", "path": "/workspace"},
        ]);
        let r = probe(&root, false, ops).await;
        assert!(ok(&r, 0) && ok(&r, 1), "{r:?}");
        assert!(r[1]["entries"].as_array().unwrap().contains(&json!(".env")));
    }

    /// Every write-ish operation on a path with a `.git` component is refused, the same
    /// operations elsewhere work, and reading `.git` still works.
    #[tokio::test]
    async fn git_internals_are_refused_to_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let ws = "/workspace";
        let r = probe(
            &root,
            true,
            json!([
                {"op": "write", "path": format!("{ws}/.git/hooks/pre-commit")},
                {"op": "write", "path": format!("{ws}/.git/config")},
                {"op": "mkdir", "path": format!("{ws}/.git/x")},
                {"op": "mkdir", "path": format!("{ws}/d/.git")},
                {"op": "rename", "path": format!("{ws}/a.txt"), "to": format!("{ws}/.git/hooks/post-checkout")},
                {"op": "rename", "path": format!("{ws}/.git/config"), "to": format!("{ws}/config.bak")},
                {"op": "rename", "path": format!("{ws}/d"), "to": format!("{ws}/.GIT")},
                {"op": "symlink", "path": format!("{ws}/.git/hooks/pre-push"), "target": "../../a.txt"},
                {"op": "symlink", "path": format!("{ws}/hooks"), "target": ".git/hooks"},
                {"op": "remove", "path": format!("{ws}/.git/config")},
                {"op": "write", "path": format!("{ws}/sub/.Git")},
                // Allowed: reading git internals, and the same writes elsewhere.
                {"op": "read", "path": format!("{ws}/.git/config")},
                {"op": "list", "path": format!("{ws}/.git")},
                {"op": "write", "path": format!("{ws}/b.txt")},
                {"op": "mkdir", "path": format!("{ws}/d/e")},
                {"op": "rename", "path": format!("{ws}/a.txt"), "to": format!("{ws}/c.txt")},
            ]),
        )
        .await;
        for (i, result) in r.iter().enumerate() {
            assert_eq!(result["ok"], json!(i >= 11), "{i}: {result}");
        }
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(
            std::fs::read_dir(root.join(".git/hooks")).unwrap().count(),
            0
        );
        assert!(!root.join(".GIT").exists());
        assert!(!root.join("hooks").exists());
    }

    /// A hard link to a secret is the secret: not opened for reading or writing, by any path;
    /// a hard link between ordinary files works as before.
    #[tokio::test]
    async fn a_hard_link_to_a_secret_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join(".env"), "KEY=hunter2").unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::hard_link(root.join(".env"), root.join("src/notes.txt")).unwrap();
        std::os::unix::fs::symlink("src/notes.txt", root.join("via-link")).unwrap();
        std::fs::write(root.join("a.txt"), "plain").unwrap();
        std::fs::hard_link(root.join("a.txt"), root.join("b.txt")).unwrap();
        let ws = "/workspace";
        let r = probe(
            &root,
            true,
            json!([
                {"op": "read", "path": format!("{ws}/src/notes.txt")},
                {"op": "read", "path": format!("{ws}/src/../src/notes.txt")},
                {"op": "read", "path": format!("{ws}/via-link")},
                {"op": "write", "path": format!("{ws}/src/notes.txt")},
                {"op": "write", "path": format!("{ws}/via-link")},
                {"op": "read", "path": format!("{ws}/b.txt")},
                {"op": "write", "path": format!("{ws}/b.txt")},
            ]),
        )
        .await;
        for (i, result) in r.iter().enumerate() {
            assert_eq!(result["ok"], json!(i >= 5), "{i}: {result}");
            assert!(!result.to_string().contains("hunter2"), "{result}");
        }
        assert_eq!(
            std::fs::read_to_string(root.join(".env")).unwrap(),
            "KEY=hunter2"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "probe"
        );
    }
}
