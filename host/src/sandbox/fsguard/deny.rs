//! The policy: what a guest may not touch inside its preopens ([`FsDeny`]), and the lexical
//! rules a guest path is joined and matched by.

use crate::workspace::{
    has_git_component, Access, LinkSnapshot, Workspace, GUEST_ROOT, OUTPUTS_DIR, STATE_DIR,
};
use std::path::PathBuf;
use std::sync::Arc;
#[cfg(target_os = "linux")]
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

/// What a guest may not touch inside its preopens: built once per gate from the workspace.
pub struct FsDeny {
    pub(in crate::sandbox) workspace: Workspace,
    /// The canonical workspace root as the host sees it, for the real-path check.
    pub(super) host_root: PathBuf,
    /// Where the workspace root is mounted in the guest.
    guest_root: &'static str,
    /// Re-check what `open-at` opened against its real path (Linux).
    pub(super) real_path_check: bool,
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
        // created, changed, renamed, linked or removed.
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

    /// Whether a directory or regular file with identity `(dev, ino)` is a deny-listed one
    /// under any name (see [`Workspace::secret_identity`]).
    pub(crate) fn secret_identity(
        &self,
        snapshot: &mut LinkSnapshot,
        dev: u64,
        ino: u64,
        nlink: u64,
        is_dir: bool,
    ) -> bool {
        self.workspace
            .secret_identity(snapshot, dev, ino, nlink, is_dir)
            .is_some()
    }

    /// A snapshot of where the secrets are, looked up now (see [`Workspace::snapshot`]).
    pub(crate) fn snapshot(&self) -> LinkSnapshot {
        let mut snapshot = LinkSnapshot::default();
        let _ = self.workspace.snapshot(&mut snapshot);
        snapshot
    }

    /// The deny-listed files' paths now (see [`Workspace::secret_file_paths`]).
    pub fn secret_file_paths(&self) -> Vec<String> {
        self.workspace.secret_file_paths()
    }

    /// Find where the secrets are now (see [`Workspace::index_secrets`]).
    pub fn index_secrets(&self) -> Result<(), String> {
        self.workspace.index_secrets()
    }

    /// The canonical workspace root as the host sees it.
    pub(crate) fn host_root(&self) -> &std::path::Path {
        &self.host_root
    }

    /// The workspace-relative path of a preopen the guest sees at `guest`, or `None` when it is
    /// not below the workspace mount (such a preopen is not filtered).
    pub(super) fn preopen_rel(&self, guest: &str) -> Option<Arc<str>> {
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
    pub(super) fn real_rel(&self, fd: &Descriptor, lexical: &str) -> Option<Option<String>> {
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
pub(in crate::sandbox) fn touches_state(rel: &str, access: Access) -> bool {
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
pub(in crate::sandbox) fn join(
    out: &mut String,
    base: &str,
    path: &str,
) -> Result<usize, ErrorCode> {
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
