//! Reading a secret the user keeps in a file (the bearer token file, the request-state key
//! file): only the user's own regular file, private to them, never through a symlink.

use anyhow::{bail, Context as _};
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// Read a file that must be the caller's own regular file, not readable or writable by group
/// or others, and not reached through a symlink.
pub(crate) fn read_private_file(path: &Path, what: &str) -> anyhow::Result<String> {
    let shown = path.display();
    let before = std::fs::symlink_metadata(path)
        .with_context(|| format!("cannot read the {what} {shown}"))?;
    if before.file_type().is_symlink() {
        bail!("the {what} {shown} is a symlink, which is not followed; point at the file itself");
    }
    let f = std::fs::File::open(path).with_context(|| format!("cannot open the {what} {shown}"))?;
    let meta = f
        .metadata()
        .with_context(|| format!("cannot read the {what} {shown}"))?;
    if (meta.dev(), meta.ino()) != (before.dev(), before.ino()) {
        bail!("the {what} {shown} changed while it was opened; try again");
    }
    if !meta.is_file() {
        bail!("the {what} {shown} is not a regular file");
    }
    if meta.mode() & 0o077 != 0 {
        bail!(
            "the {what} {shown} can be read or written by group or others (mode {:o}); anyone who reads it can act as you. Run `chmod 600 {shown}` (and make a new one if others may have seen it)",
            meta.mode() & 0o777
        );
    }
    #[cfg(target_os = "linux")]
    {
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            bail!(
                "the {what} {shown} belongs to user {}, not to you (user {me}); use your own file",
                meta.uid()
            );
        }
    }
    let mut text = String::new();
    f.take(64 * 1024)
        .read_to_string(&mut text)
        .with_context(|| format!("the {what} {shown} is not text"))?;
    Ok(text)
}
