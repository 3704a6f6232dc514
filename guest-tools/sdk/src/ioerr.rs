//! I/O errors in plain words: no errno numbers (WASI's differ from the host's, and neither
//! means anything to a model), and, for a missing path, a sibling with a close name.

use crate::Context;
use std::io::{Error, ErrorKind};
use std::path::Path;

/// The most entries of a parent directory looked at for a suggestion: a suggestion is a
/// courtesy, never worth a long listing.
const MAX_SIBLINGS: usize = 4096;

/// `err` in plain words, as said after a path: `not found`, `permission denied`, ... For a
/// kind without a phrase, the error's own text without any ` (os error N)` tail.
pub fn plain_io_error(err: &Error) -> String {
    let phrase = match err.kind() {
        ErrorKind::NotFound => "not found",
        ErrorKind::PermissionDenied => "permission denied",
        ErrorKind::IsADirectory => "is a directory, not a file",
        ErrorKind::NotADirectory => "a part of the path is not a directory",
        ErrorKind::AlreadyExists => "already exists",
        ErrorKind::DirectoryNotEmpty => "the directory is not empty",
        ErrorKind::ReadOnlyFilesystem => "the filesystem is read-only",
        ErrorKind::StorageFull => "the disk is full",
        ErrorKind::QuotaExceeded => "the disk quota is used up",
        ErrorKind::InvalidFilename => "the name is too long or not valid",
        ErrorKind::ResourceBusy => "is in use",
        ErrorKind::ExecutableFileBusy => "is a program that is running",
        ErrorKind::UnexpectedEof => "ended before it could be read whole",
        ErrorKind::Interrupted => "the operation was interrupted; try again",
        _ => "",
    };
    if !phrase.is_empty() {
        return phrase.to_string();
    }
    strip_os_error(&err.to_string())
}

/// `text` without a trailing ` (os error N)`.
fn strip_os_error(text: &str) -> String {
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text.to_string(),
    }
}

/// A sibling of the missing `path` (a sandbox path; `rel` is the same path relative to the
/// workspace) whose name is close to its name, as a workspace-relative path: one suggestion
/// at most, never a name on the deny-list. Lists only the parent directory.
pub fn did_you_mean(cx: &Context, path: &Path, rel: &str) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let rel_parent = match rel.rfind('/') {
        Some(at) => &rel[..=at],
        None => "",
    };
    let mut best: Option<(usize, String)> = None;
    for entry in std::fs::read_dir(parent).ok()?.take(MAX_SIBLINGS) {
        let Ok(entry) = entry else { continue };
        let Ok(candidate) = entry.file_name().into_string() else {
            continue;
        };
        let Some(score) = closeness(name, &candidate) else {
            continue;
        };
        let candidate_rel = format!("{rel_parent}{candidate}");
        if cx.is_denied(&candidate_rel) {
            continue;
        }
        let better = match &best {
            None => true,
            Some((s, r)) => score < *s || (score == *s && candidate_rel < *r),
        };
        if better {
            best = Some((score, candidate_rel));
        }
    }
    best.map(|(_, r)| r)
}

/// [`did_you_mean`] as a message tail: ` (did you mean src/foo.rs.bak?)`, or empty.
pub fn hint(cx: &Context, path: &Path, rel: &str) -> String {
    match did_you_mean(cx, path, rel) {
        Some(r) => format!(" (did you mean {}?)", crate::names::display(&r)),
        None => String::new(),
    }
}

/// How far `candidate` is from the wanted `name` (smaller is closer), or `None` when it is
/// not close: a small edit distance, or one name extending the other (`foo.rs` and
/// `foo.rs.bak`, `foo` and `foo.rs`).
pub(crate) fn closeness(name: &str, candidate: &str) -> Option<usize> {
    if name == candidate || name.chars().count() < 3 {
        return None;
    }
    let a: Vec<char> = name.chars().collect();
    let b: Vec<char> = candidate.chars().collect();
    let allowed = if a.len() <= 5 { 1 } else { 2 };
    if a.len() <= 64 && b.len() <= 64 {
        let d = edit_distance(&a, &b);
        if d <= allowed {
            return Some(d);
        }
    }
    let (short, long) = if a.len() <= b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    if short.len() >= 3 && long.starts_with(short) {
        return Some(allowed + long.len() - short.len());
    }
    None
}

/// Levenshtein distance.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
#[path = "ioerr_tests.rs"]
mod tests;
