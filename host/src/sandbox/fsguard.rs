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
//! Secrets are also refused by identity: every object `open-at` opens (file or directory)
//! whose (device, inode) is a deny-listed one's, under any name, is refused with `access` (a
//! second name, or a secret directory exchanged with a plain one by a process outside the host;
//! see `workspace/view/remember.rs`). The index is looked up once per call. A file created
//! inside a secret directory after the index was taken, opened by a path through the secret's
//! new name, is not caught here (the walk checks every directory it enters; this guard checks
//! only what it opened, not each directory on the way).
//!
//! The state directory is also matched by name at any depth (`x/.toolgate/...` is refused), a
//! symlink the guest creates must not point at anything denied, and listings leave denied
//! entries out. Without `openat2` (Linux before 5.6) or on other systems the calls go to
//! wasmtime-wasi after the lexical checks (on Linux each `open-at` is then re-checked by the
//! real path of what it opened). Not covered: hard links to a secret made outside the sandbox
//! when the secret is outside the workspace, a guest directory descriptor whose directory is
//! renamed after it was opened (its path is the one it was opened by; renaming a directory
//! that a path-based, not `**/`, extra secret pattern names an entry of can therefore expose
//! that entry), and processes outside the sandbox changing the state directory themselves.
//!
//! Fast paths (Linux): a read-only open of a plain file reached without any symlink is one
//! `openat2` (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, `O_NONBLOCK`) and one `statx` of the
//! opened descriptor, whose answer is kept for the tool's own `stat` of it. A single-component
//! path costs no system call beyond the operation itself; a longer one adds the `openat2` of
//! its directory, and a symlink on the way one more `openat2` and a `readlink`.
//!
//! Descriptors of a store without a policy ([`FsGuard`] with no [`FsDeny`]) pass straight
//! through to wasmtime-wasi.
//!
//! The parts: `deny` (the policy and the lexical path rules), `check` (a guest path matched
//! against it), `locate` (Linux: the directory or object a call acts on, opened and judged),
//! `open` (open-at), `host` (the `wasi:filesystem` interfaces on the guarded view) and `sys`
//! (system-call helpers).

mod check;
mod deny;
mod host;
#[cfg(target_os = "linux")]
mod locate;
mod open;
#[cfg(unix)]
mod stream;
#[cfg(target_os = "linux")]
mod sys;

pub use deny::FsDeny;
pub(super) use deny::{join, touches_state};

use crate::workspace::LinkSnapshot;
use std::collections::HashMap;
use std::sync::Arc;
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::p2::bindings::filesystem::types;

/// Whether filesystem calls run on the calling thread (`allow_blocking_current_thread`): the
/// WASI context is built so, and the guard builds the descriptors it opens itself the same way.
pub(crate) const BLOCKING_CURRENT_THREAD: bool = true;

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

#[cfg(test)]
#[path = "fsguard_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "fsguard_guest_tests.rs"]
mod guest_tests;
