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
//! Symlinks inside the workspace can alias a denied path under another name, and a symlink
//! can be swapped in between a check and the call it allowed. So on Linux every path-taking
//! call on a guarded descriptor is done by the guard itself, on the object it checked:
//!
//! - The directory that holds the target is opened once, beneath the guest's descriptor
//!   (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, `O_PATH`); a single-component
//!   path uses the guest's descriptor itself, with no system call. With no symlink on the way
//!   the lexical check stands. With one, the directory is opened again following it
//!   (`RESOLVE_BENEATH` only) and the target is judged by the real path of that descriptor
//!   (`/proc/self/fd`) plus the final component; outside the workspace is refused.
//! - The call is then made relative to that descriptor with the final component:
//!   `mkdirat` (create-directory-at), `unlinkat` (unlink-file-at, and remove-directory-at with
//!   `AT_REMOVEDIR`), `renameat` (rename-at; both ends located and judged), `linkat` without
//!   following (link-at; both ends, and no new name for a second name of a secret),
//!   `symlinkat` (symlink-at; the target judged again from the link's real directory),
//!   `readlinkat` (readlink-at), `utimensat` with `AT_SYMLINK_NOFOLLOW` (set-times-at without
//!   following). A rename, exchange or symlink swap of a component on the way after the check
//!   changes nothing: the directory is already open, and the final component is never
//!   followed.
//! - Calls on what a path leads to (stat-at, metadata-hash-at, set-times-at following
//!   symlinks) open the object itself with `O_PATH` the same way (`O_NOFOLLOW` when the guest
//!   does not follow) and use that descriptor (`statx`, `utimensat` through its
//!   `/proc/self/fd` entry).
//! - open-at opens the final component in the located directory with `O_NOFOLLOW` and
//!   `O_NONBLOCK`. A final symlink, when the guest follows symlinks, is read with `readlinkat`
//!   and its target located and judged like a new path (up to 40 links), so a file is created
//!   only where the check allowed it, including through a dangling symlink. The opened
//!   object's type is checked (regular files and directories only) and a second name of a
//!   secret refused before anything is changed; truncation is an `ftruncate` after those
//!   checks, never `O_TRUNC`. The descriptor is built as wasmtime-wasi builds it (the guest
//!   descriptor's permissions, the open mode), and its errors are wasmtime-wasi's
//!   (`not-permitted` on a read-only preopen, `exist`, `not-directory`, ...); denied is
//!   `access`.
//! - A preopen below the workspace root was opened by its host path when the call started;
//!   its real path is read once (`/proc/self/fd`) and it is judged by that, so a directory
//!   swapped for a symlink to the state directory before that open is the state directory.
//!
//! The state directory is also matched by name at any depth (`x/.toolgate/...` is refused), a
//! symlink the guest creates must not point at anything denied, and listings leave denied
//! entries out. Without `openat2` (Linux before 5.6) or on other systems the calls go to
//! wasmtime-wasi after the lexical checks, with the real-path re-check of each `open-at` as
//! before. Not covered: hard links to a secret made outside the sandbox when the secret is
//! outside the workspace, a guest directory descriptor whose directory is renamed after it was
//! opened (its path is the one it was opened by; renaming a directory that a path-based, not
//! `**/`, extra secret pattern names an entry of can therefore expose that entry), and
//! processes outside the sandbox changing the state directory themselves.
//!
//! Fast paths (Linux): a read-only open of a plain file reached without any symlink is one
//! `openat2` (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, `O_NONBLOCK`) and one `statx` of the
//! opened descriptor, whose answer is kept for the tool's own `stat` of it. A single-component
//! path costs no system call beyond the operation itself; a longer one adds the `openat2` of
//! its directory, and a symlink on the way one more `openat2` and a `readlink`.
//!
//! Descriptors of a store without a policy ([`FsGuard`] with no [`FsDeny`]) pass straight
//! through to wasmtime-wasi.

use crate::workspace::{
    has_git_component, Access, LinkSnapshot, Workspace, GUEST_ROOT, OUTPUTS_DIR, STATE_DIR,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, FsError, FsResult, ReaddirIterator};

#[cfg(target_os = "linux")]
mod sys;
#[cfg(target_os = "linux")]
use sys::{code, file_stat, io_code, object_stat, split_last, timespec};

/// What a guest may not touch inside its preopens: built once per gate from the workspace.
pub struct FsDeny {
    pub(super) workspace: Workspace,
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
pub(super) fn touches_state(rel: &str, access: Access) -> bool {
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
pub(super) fn join(out: &mut String, base: &str, path: &str) -> Result<usize, ErrorCode> {
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
pub(super) enum DirPath {
    /// Below the workspace: workspace-relative, empty for the root.
    Guarded(Arc<str>),
    /// A preopen outside the workspace mount: not filtered.
    Unguarded,
    /// A preopen below the workspace mount whose real directory is outside the workspace (a
    /// symlink swapped in before it was opened): every call through it is refused.
    Refused,
}

/// Per-call filesystem guard state, kept in the store next to the WASI context.
#[derive(Default)]
pub(crate) struct FsGuard {
    pub(super) deny: Option<Arc<FsDeny>>,
    /// Directory descriptor rep -> its path.
    pub(super) dirs: HashMap<u32, DirPath>,
    /// What this call touched, when it is traced (`toolgate plugin test`).
    pub(super) trace: Option<super::trace::TraceHandle>,
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

impl GuardedFsView<'_> {
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

/// A directory the guard acts in.
#[cfg(target_os = "linux")]
enum DirFd {
    /// The guest's own directory descriptor (the path had a single component).
    Guest(Arc<std::fs::File>),
    /// A directory the guard opened (`O_PATH`) beneath the guest's.
    Own(rustix::fd::OwnedFd),
}

#[cfg(target_os = "linux")]
impl std::os::fd::AsFd for DirFd {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            DirFd::Guest(f) => f.as_fd(),
            DirFd::Own(f) => f.as_fd(),
        }
    }
}

/// Where a path-taking call acts once its target is checked: entry `name` of directory `dir`.
#[cfg(target_os = "linux")]
struct At {
    dir: DirFd,
    /// The final component, trailing `/` kept (`.` when the path names `dir` itself).
    name: String,
    /// The target's workspace-relative real path when a symlink was on the way to `dir`
    /// (`None`: the lexical path the guard checked, left in its buffer).
    real: Option<String>,
    /// The guest descriptor's permissions.
    perms: wasmtime_wasi::FsPerms,
}

#[cfg(target_os = "linux")]
impl At {
    /// `not-permitted` on a read-only preopen, as wasmtime-wasi answers every change there.
    fn writable(&self) -> FsResult<()> {
        if self.perms.write_not_permitted() {
            return Err(ErrorCode::NotPermitted.into());
        }
        Ok(())
    }

    /// The final component without a trailing `/`.
    fn bare(&self) -> &str {
        self.name.trim_end_matches('/')
    }
}

/// How a path-taking call goes ahead (Linux).
#[cfg(target_os = "linux")]
enum Reached {
    /// Through wasmtime-wasi: no policy, or no `openat2` in this kernel (the lexical check,
    /// if any, has passed).
    Inner,
    /// Here, on the object that was checked.
    Here(At),
}

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

#[cfg(target_os = "linux")]
impl GuardedFsView<'_> {
    /// The guest directory descriptor's handle and permissions.
    fn guest_dir(
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
    fn judge_real(
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
    fn locate(
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
    fn locate_object(
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

    /// `open-at` done here on a guarded descriptor: the final component is opened relative to
    /// the directory [`Self::locate`] opened, never following a symlink (`O_NOFOLLOW`); a final
    /// symlink, when the guest follows symlinks, is read here and its target located and
    /// judged the same way, so a file is created only where the check allowed it. Truncation
    /// is done after the checks (`ftruncate`), never by the open. `None`: no `openat2`.
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
        if kind.is_file() && self.linked(meta.dev(), meta.ino(), meta.nlink()) {
            return Err(ErrorCode::Access.into());
        }
        if kind.is_file() && oflags.contains(O::TRUNCATE) {
            file.set_len(0).map_err(io_code)?;
        }
        let blocking = super::wasi::BLOCKING_CURRENT_THREAD;
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
                    if regular && self.linked(stat.st_dev, stat.st_ino, nlink) {
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
        // A regular file with several links: checked against the secrets' inodes once opened.
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
            super::trace::with(self.guard.trace.as_ref(), |t| t.hidden(&self.guard.buf));
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
            .call(
                &loaded,
                &caps,
                &limits,
                &input,
                &context,
                &crate::cancel::CancelToken::never(),
            )
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

    /// Everything under `dir`, not following symlinks: path -> contents (`dir` for
    /// directories, `-> target` for symlinks).
    fn listing(dir: &std::path::Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                let meta = path.symlink_metadata().unwrap();
                let what = if meta.is_dir() {
                    stack.push(path.clone());
                    "dir".to_string()
                } else if meta.file_type().is_symlink() {
                    format!("-> {}", std::fs::read_link(&path).unwrap().display())
                } else {
                    std::fs::read_to_string(&path).unwrap()
                };
                out.push((rel, what));
            }
        }
        out.sort();
        out
    }

    /// Every path operation through a symlink to the state directory (`x2 -> .toolgate`, or
    /// `src/up -> ..` then `x2`) is refused and leaves it exactly as it was; the same
    /// operations through a symlink to an ordinary directory (`lnk -> src`) work.
    #[tokio::test]
    async fn operations_through_a_symlink_act_on_what_was_checked() {
        let (_dir, root) = workspace();
        std::os::unix::fs::symlink(".toolgate", root.join("x2")).unwrap();
        std::os::unix::fs::symlink("src", root.join("lnk")).unwrap();
        std::fs::write(root.join(".toolgate/grants.toml"), "# grants").unwrap();
        std::fs::write(root.join(".toolgate/state.db"), "audit").unwrap();
        std::fs::write(root.join("mine.txt"), "mine").unwrap();
        let before = listing(&root.join(".toolgate"));
        let ws = "/workspace";
        let refused = json!([
            {"op": "rename", "path": format!("{ws}/mine.txt"), "to": format!("{ws}/x2/grants.toml")},
            {"op": "rename", "path": format!("{ws}/x2/grants.toml"), "to": format!("{ws}/stolen.toml")},
            {"op": "rename", "path": format!("{ws}/mine.txt"), "to": format!("{ws}/src/up/x2/grants.toml")},
            {"op": "remove", "path": format!("{ws}/x2/state.db")},
            {"op": "remove", "path": format!("{ws}/src/up/x2/state.db")},
            {"op": "rmdir", "path": format!("{ws}/x2/outputs")},
            {"op": "mkdir", "path": format!("{ws}/x2/policy.toml")},
            {"op": "mkdir", "path": format!("{ws}/x2/outputs/x")},
            {"op": "symlink", "path": format!("{ws}/x2/evil"), "target": "../src"},
            {"op": "link", "path": format!("{ws}/x2/hard"), "target": format!("{ws}/mine.txt")},
            {"op": "link", "path": format!("{ws}/stolen"), "target": format!("{ws}/x2/grants.toml")},
            {"op": "write", "path": format!("{ws}/x2/grants.toml")},
            {"op": "write", "path": format!("{ws}/x2/new.toml")},
            {"op": "write", "path": format!("{ws}/x2/outputs/call-1.txt")},
            {"op": "stat", "path": format!("{ws}/x2/state.db")},
            {"op": "stat-follow", "path": format!("{ws}/x2/state.db")},
            {"op": "stat-follow", "path": format!("{ws}/x2/")},
            {"op": "readlink", "path": format!("{ws}/x2/state.db")},
            {"op": "read", "path": format!("{ws}/x2/grants.toml")},
            {"op": "list", "path": format!("{ws}/x2")},
            {"op": "write", "path": format!("{ws}/src/up/x2/grants.toml")},
        ]);
        let n = refused.as_array().unwrap().len();
        let r = probe(&root, true, refused).await;
        for (i, result) in r.iter().enumerate() {
            assert!(!ok(&r, i), "{i}: {result}");
            let detail = result["detail"].as_str().unwrap();
            assert!(detail.contains("ermission denied"), "{i}: {result}");
        }
        assert_eq!(r.len(), n);
        assert_eq!(listing(&root.join(".toolgate")), before);
        assert!(!root.join("stolen.toml").exists() && !root.join("stolen").exists());
        assert_eq!(
            std::fs::read_to_string(root.join("mine.txt")).unwrap(),
            "mine"
        );

        let r = probe(
            &root,
            true,
            json!([
                {"op": "mkdir", "path": format!("{ws}/lnk/made")},
                {"op": "rename", "path": format!("{ws}/mine.txt"), "to": format!("{ws}/lnk/mine.txt")},
                {"op": "stat", "path": format!("{ws}/lnk/mine.txt")},
                {"op": "stat-follow", "path": format!("{ws}/lnk")},
                {"op": "link", "path": format!("{ws}/lnk/hard.txt"), "target": format!("{ws}/lnk/mine.txt")},
                {"op": "symlink", "path": format!("{ws}/lnk/l2"), "target": "lib.rs"},
                {"op": "readlink", "path": format!("{ws}/lnk/l2")},
                {"op": "read", "path": format!("{ws}/lnk/l2")},
                {"op": "remove", "path": format!("{ws}/lnk/hard.txt")},
                {"op": "rmdir", "path": format!("{ws}/lnk/made")},
                {"op": "write", "path": format!("{ws}/lnk/w.txt")},
                {"op": "read", "path": format!("{ws}/lnk/up/notes.txt")},
                {"op": "write", "path": format!("{ws}/lnk/up/notes.txt")},
                {"op": "stat", "path": format!("{ws}/x2")},
                {"op": "read", "path": format!("{ws}/x2/outputs/call-1.txt")},
                {"op": "rename", "path": format!("{ws}/lnk/w.txt"), "to": format!("{ws}/src/up/w2.txt")},
            ]),
        )
        .await;
        for (i, result) in r.iter().enumerate() {
            assert!(ok(&r, i), "{i}: {result}");
        }
        assert_eq!(r[2]["detail"], "4 bytes");
        assert_eq!(r[6]["detail"], "lib.rs");
        assert_eq!(r[7]["detail"], "// lib");
        assert_eq!(r[11]["detail"], "hello");
        assert_eq!(r[14]["detail"], "saved");
        assert_eq!(
            std::fs::read_to_string(root.join("src/mine.txt")).unwrap(),
            "mine"
        );
        assert!(!root.join("src/made").exists() && !root.join("src/hard.txt").exists());
        assert_eq!(
            std::fs::read_to_string(root.join("w2.txt")).unwrap(),
            "probe"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("notes.txt")).unwrap(),
            "probe"
        );
        assert_eq!(listing(&root.join(".toolgate")), before);
    }

    /// A directory exchanged (`RENAME_EXCHANGE`) with a symlink to the state directory over
    /// and over while a guest on a writable root preopen writes, renames onto, makes and
    /// removes entries below its name: nothing ever lands in `.toolgate/`.
    #[tokio::test]
    async fn a_swap_during_path_calls_changes_no_state() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::{Duration, Instant};
        let (_dir, root) = workspace();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(".toolgate", root.join("sl")).unwrap();
        let before = listing(&root.join(".toolgate"));
        let stop = Arc::new(AtomicBool::new(false));
        let racer = {
            let stop = stop.clone();
            let dir = std::fs::File::open(&root).unwrap();
            std::thread::spawn(move || {
                let exchange = || {
                    rustix::fs::renameat_with(
                        &dir,
                        "sub",
                        &dir,
                        "sl",
                        rustix::fs::RenameFlags::EXCHANGE,
                    )
                    .unwrap()
                };
                let deadline = Instant::now() + Duration::from_secs(10);
                let mut swaps = 0u64;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    exchange();
                    swaps += 1;
                }
                if swaps % 2 == 1 {
                    exchange();
                }
                swaps
            })
        };
        let ws = "/workspace";
        let mut ops = Vec::new();
        for i in 0..100 {
            ops.extend([
                json!({"op": "write", "path": format!("{ws}/sub/policy.toml")}),
                json!({"op": "mkdir", "path": format!("{ws}/sub/d{i}")}),
                json!({"op": "write", "path": format!("{ws}/mine{i}.txt")}),
                json!({"op": "rename", "path": format!("{ws}/mine{i}.txt"), "to": format!("{ws}/sub/grants.toml")}),
                json!({"op": "symlink", "path": format!("{ws}/sub/l{i}"), "target": "x"}),
                json!({"op": "remove", "path": format!("{ws}/sub/policy.toml")}),
                json!({"op": "remove", "path": format!("{ws}/sub/grants.toml")}),
                json!({"op": "remove", "path": format!("{ws}/sub/l{i}")}),
                json!({"op": "rmdir", "path": format!("{ws}/sub/d{i}")}),
            ]);
        }
        let ops = Value::Array(ops);
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut calls = 0;
        let mut written = 0;
        let mut changed = None;
        while Instant::now() < deadline {
            let r = probe(&root, true, ops.clone()).await;
            written += r
                .iter()
                .step_by(9)
                .filter(|x| x["ok"] == json!(true))
                .count();
            calls += 1;
            let now = listing(&root.join(".toolgate"));
            if now != before {
                changed = Some(now);
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = racer.join().unwrap();
        assert!(swaps > 100, "only {swaps} swaps");
        assert_eq!(changed, None, "after {calls} calls and {swaps} swaps");
        // The race was real: some writes landed in the real directory, others were refused.
        assert!(
            written > 0 && written < calls * 100,
            "{written} of {calls}00 written"
        );
        assert_eq!(listing(&root.join(".toolgate")), before);
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
