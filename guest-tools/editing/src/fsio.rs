//! Reading the file to change and replacing it atomically.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use toolgate_guest::{text, ToolError};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The bytes of the file at `path`, or `None` when it does not exist. A directory is an
/// `is-directory` error; `rel` names the file in messages.
pub fn read_existing(path: &Path, rel: &str) -> Result<Option<Vec<u8>>, ToolError> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::new(
                "is-directory",
                format!(
                    "{} is a directory, not a file. Give the path of a file.",
                    toolgate_guest::names::display(rel)
                ),
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ToolError::io(rel, &e)),
    }
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ToolError::io(rel, &e)),
    }
}

/// The file's bytes as text; a binary or non-UTF-8 file is a `binary-file` error.
pub fn decode_text(bytes: Vec<u8>, rel: &str) -> Result<String, ToolError> {
    let binary = || {
        ToolError::new(
            "binary-file",
            format!(
                "{} is a binary (or not UTF-8) file; it cannot be edited as text.",
                toolgate_guest::names::display(rel)
            ),
        )
    };
    if text::is_binary(&bytes) {
        return Err(binary());
    }
    String::from_utf8(bytes).map_err(|_| binary())
}

fn temp_path(path: &Path, attempt: u32) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_string());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tag = nanos ^ (count << 48) ^ u64::from(attempt).rotate_left(32);
    path.with_file_name(format!(".{name}.toolgate-tmp-{tag:016x}"))
}

/// Replace (or create) the file at `path` with `contents` atomically: the bytes go to a
/// temporary file in the same directory, which is flushed and then renamed over `path`. On any
/// error the temporary file is removed and the target is left as it was. The existing file's
/// permissions are carried over where the platform allows it.
pub fn atomic_write(path: &Path, contents: &[u8], rel: &str) -> Result<(), ToolError> {
    let permissions = fs::metadata(path).ok().map(|m| m.permissions());
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        let tmp = temp_path(path, attempt);
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
            Err(e) => return Err(ToolError::io(rel, &e)),
        }
    };
    let result = write_all(&mut file, contents).and_then(|()| {
        drop(file);
        if let Some(perms) = permissions {
            // Best effort: WASI may not support changing permissions.
            let _ = fs::set_permissions(&tmp, perms);
        }
        fs::rename(&tmp, path)
    });
    match result {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(ToolError::io(rel, &e))
        }
    }
}

fn write_all(file: &mut File, contents: &[u8]) -> std::io::Result<()> {
    file.write_all(contents)?;
    file.flush()?;
    match file.sync_all() {
        Ok(()) => Ok(()),
        // A full disk is a real failure; anything else (a sandbox that cannot sync) is not:
        // the rename still makes the change all-or-nothing.
        Err(e) if e.kind() == ErrorKind::StorageFull => Err(e),
        Err(_) => Ok(()),
    }
}
