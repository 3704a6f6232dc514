//! The host's layout inside a workspace: where its own files live (`.toolgate/`), the path
//! the workspace has inside a guest, and the checks that keep the host's own writes there.
//!
//! A repository may commit a `.toolgate` symlink, FIFO or hard link to attack the host:
//! [`ensure_state_dir`] and [`check_state_file`] refuse them before the host writes a byte.

use crate::fsutil::{describe, write_atomic};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where the workspace root is mounted inside every sandbox.
pub const GUEST_ROOT: &str = "/workspace";

/// The directory under the workspace that holds the host's own state.
pub const STATE_DIR: &str = ".toolgate";

/// The one place under [`STATE_DIR`] a tool may read: saved full outputs.
pub const OUTPUTS_DIR: &str = ".toolgate/outputs";

/// The workspace's own policy layer, under [`STATE_DIR`] (obeyed only once trusted).
pub const POLICY_FILE: &str = "policy.toml";

/// The project grants, under [`STATE_DIR`] (signed entries only).
pub const GRANTS_FILE: &str = "grants.toml";

/// The state database (audit, reads, history, session grants), under [`STATE_DIR`].
pub const STATE_DB: &str = "state.db";

/// Installed plugins, under [`STATE_DIR`].
pub const PLUGINS_DIR: &str = "plugins";

/// Why a directory the host keeps its own files in cannot be used.
fn not_a_real_dir(path: &Path, what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is {what}, not a directory; toolgate keeps its state only in a real directory \
             inside the workspace and never follows a link there. Delete or rename it (a fresh \
             one is made on the next call), e.g. `rm {}`",
            path.display(),
            path.display()
        ),
    )
}

/// Make sure `dir`, a directory the host keeps its own files in (`<workspace>/.toolgate`,
/// `.toolgate/plugins`, ...), is a real directory: each component from the nearest
/// `.toolgate` ancestor down is created when missing and refused when it is a symlink or
/// anything but a directory, so a planted `.toolgate -> ~/.ssh` (a repository may commit
/// one) never leads the host's writes out of the workspace. Directories above that (the
/// workspace itself, the user's state directory) are created as needed.
pub fn ensure_state_dir(dir: &Path) -> std::io::Result<()> {
    let components: Vec<&std::ffi::OsStr> = dir.iter().collect();
    let from = components
        .iter()
        .rposition(|c| *c == std::ffi::OsStr::new(STATE_DIR))
        .unwrap_or(components.len().saturating_sub(1));
    let mut at: PathBuf = components[..from].iter().collect();
    if !at.as_os_str().is_empty() {
        std::fs::create_dir_all(&at)?;
    }
    for c in &components[from..] {
        at.push(c);
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::create_dir(&at) {
                Ok(()) => std::fs::symlink_metadata(&at)?,
                // mkdir(2) never follows a symlink at its last component: a dangling link
                // planted there makes it fail, and the check below names the link.
                Err(made) => std::fs::symlink_metadata(&at).map_err(|_| made)?,
            },
            Err(e) => return Err(e),
        };
        if !meta.is_dir() {
            return Err(not_a_real_dir(&at, describe(meta.file_type())));
        }
    }
    Ok(())
}

/// The `.gitignore` in `.toolgate/`: the state database keeps file contents and the audit,
/// so it must not show in `git status` or be committed by `git add -A`. A `.toolgate/` the
/// host made gets `*`; one the repository already had (a committed policy) gets only the
/// host's own runtime files, so the team's committed files stay visible. An existing
/// `.gitignore`, or anything planted at that name, is left as it is (created with
/// `O_EXCL | O_NOFOLLOW`: never written through a link). Called once the state database
/// opened, so a refused workspace gets nothing written.
pub fn ensure_gitignore(dir: &Path, created: bool) {
    if dir.file_name() != Some(std::ffi::OsStr::new(STATE_DIR)) {
        return;
    }
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let text = if created {
        "# Written by toolgate: .toolgate/ holds its state database (file contents, the audit).\n*\n"
    } else {
        "# Written by toolgate: its own runtime files (the state database keeps file contents).\nstate.db\nstate.db-*\noutputs/\n.toolgate-tmp-*\n"
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o644)
        .open(dir.join(".gitignore"));
    if let Ok(mut f) = file {
        if let Err(e) = f.write_all(text.as_bytes()) {
            tracing::warn!(error = %e, dir = %dir.display(), "writing .toolgate/.gitignore failed");
        }
    }
}

/// Write one of the host's own files under `.toolgate/` (a saved full output, ...): its
/// directories checked by [`ensure_state_dir`], then [`write_atomic`].
pub fn write_state_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        ensure_state_dir(dir)?;
    }
    write_atomic(path, bytes)
}

/// Refuse a host state file (the state database and its `-wal`/`-shm` companions) that exists
/// as anything but a regular file with one name: a symlink, directory, FIFO or device, or a
/// hard link whose other name may be a file outside the workspace.
pub fn check_state_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if !m.is_file() => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is {}, not a regular file; toolgate never reads or writes its state \
                 through one. Delete it (a fresh one is made on the next call), e.g. `rm -r {}`",
                path.display(),
                describe(m.file_type()),
                path.display()
            ),
        )),
        Ok(m) if m.nlink() > 1 => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} has {} names (hard links); toolgate writes its state only to a file of \
                 its own. Delete it (a fresh one is made on the next call) or copy it to a \
                 new file",
                path.display(),
                m.nlink()
            ),
        )),
        Ok(_) => Ok(()),
    }
}

/// The largest policy, grants or trust file toolgate reads (they are hand-sized).
pub const MAX_STATE_FILE_BYTES: u64 = 4 << 20;

/// Read a host state file: a regular file reached without following a symlink at its last
/// component, at most [`MAX_STATE_FILE_BYTES`]. `Ok(None)` when it does not exist. The
/// error text names the file and says how to repair it.
pub fn read_state_file(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    // A workspace's state directory must be a real directory: a repository may ship
    // `.toolgate -> somewhere` to have its files read (or later written) elsewhere.
    if let Some(dir) = path
        .parent()
        .filter(|d| d.file_name() == Some(std::ffi::OsStr::new(crate::workspace::STATE_DIR)))
    {
        match std::fs::symlink_metadata(dir) {
            Ok(m) if !m.is_dir() => {
                return Err(format!(
                    "{} cannot be read: {} is {}, not a directory; toolgate keeps its state only in a real directory inside the workspace (delete or rename it, e.g. `rm {}`)",
                    path.display(),
                    dir.display(),
                    crate::fsutil::describe(m.file_type()),
                    dir.display()
                ))
            }
            _ => {}
        }
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!(
                "{} is a symlink; toolgate refuses to follow it (replace it with a regular file or delete it)",
                path.display()
            ))
        }
        Err(e) => {
            return Err(format!(
                "{} cannot be read: {}",
                path.display(),
                crate::fsutil::plain_error(&e)
            ))
        }
    };
    let meta = file.metadata().map_err(|e| {
        format!(
            "{} cannot be read: {}",
            path.display(),
            crate::fsutil::plain_error(&e)
        )
    })?;
    if !meta.is_file() {
        return Err(format!(
            "{} is not a regular file ({}); delete it or replace it with a regular file",
            path.display(),
            kind_of(&meta)
        ));
    }
    if meta.len() > MAX_STATE_FILE_BYTES {
        return Err(format!(
            "{} is {} bytes, more than the {} toolgate reads for such a file; shorten or delete it",
            path.display(),
            meta.len(),
            MAX_STATE_FILE_BYTES
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_STATE_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            format!(
                "{} cannot be read: {}",
                path.display(),
                crate::fsutil::plain_error(&e)
            )
        })?;
    Ok(Some(bytes))
}

/// A plain name for what a non-regular file is.
pub fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
