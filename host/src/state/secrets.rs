//! Values the host knows it must never store or show, replaced by a placeholder naming what
//! was removed in everything it scrubs (the audit's details, the observations a model and the
//! console see), in every form the value takes ([`crate::text::forms::forms`]: raw,
//! JSON-escaped, percent-encoded, base64 at any offset, hex):
//!
//! - the credentials the host brokers ([`register`], when a gate opens);
//! - the values in the workspace's deny-listed files the host can read ([`watch_workspace`]:
//!   `.env`-style `KEY=VALUE` lines, `.netrc` passwords, secret-named JSON fields, PEM bodies,
//!   one-line token files; see `secrets/values.rs`), read when a gate opens and again when a
//!   file changes (checked at most every [`REFRESH`]).
//!
//! Bounded: at most [`MAX_FILES`] files of at most [`MAX_FILE_BYTES`] each are read per
//! workspace, at most [`MAX_VALUES`] values kept from each file. A text is first screened by
//! the forms' first bytes (one hash lookup per position), so a text holding none costs one
//! pass whatever the number of values.

mod values;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

pub use values::{values_of, MAX_VALUES};

/// Shorter values are not scrubbed from free text: a two-letter "secret" would turn every such
/// pair of letters in the audit into a placeholder. They are still never given to a tool.
const MIN_SCRUBBED: usize = 4;
/// Most deny-listed files of one workspace read for their values.
pub const MAX_FILES: usize = 64;
/// Larger deny-listed files are not read for their values (a key store, a state file).
pub const MAX_FILE_BYTES: u64 = 256 << 10;
/// How often the watched workspaces' files are checked for changes (at most).
pub const REFRESH: Duration = Duration::from_secs(2);

/// Where a value came from: a brokered credential, or a workspace's file.
#[derive(Clone, PartialEq, Eq)]
enum Source {
    Brokered,
    /// The workspace root and the file's workspace-relative path.
    File(PathBuf, String),
}

struct Entry {
    form: String,
    placeholder: String,
    source: Source,
}

#[derive(Default)]
struct Known {
    /// Longest first, so a form that contains another is replaced whole.
    entries: Vec<Entry>,
    /// Length of the screening prefixes (the shortest form, at most 8).
    screen: usize,
    /// The first `screen` bytes of every form.
    prefixes: HashSet<Box<[u8]>>,
}

impl Known {
    fn add(&mut self, value: &str, placeholder: &str, source: Source) {
        if value.len() < MIN_SCRUBBED {
            return;
        }
        for form in crate::text::forms::forms(value) {
            if form.len() < MIN_SCRUBBED || self.entries.iter().any(|e| e.form == form) {
                continue;
            }
            self.entries.push(Entry {
                form,
                placeholder: placeholder.to_string(),
                source: source.clone(),
            });
        }
    }

    fn index(&mut self) {
        self.entries
            .sort_by_key(|e| std::cmp::Reverse(e.form.len()));
        self.screen = self
            .entries
            .iter()
            .map(|e| e.form.len())
            .min()
            .unwrap_or(8)
            .min(8);
        self.prefixes = self
            .entries
            .iter()
            .map(|e| Box::from(&e.form.as_bytes()[..self.screen]))
            .collect();
    }

    /// Whether some form may start somewhere in `text`.
    fn may_hold(&self, text: &str) -> bool {
        let n = self.screen;
        n > 0
            && text.len() >= n
            && text
                .as_bytes()
                .windows(n)
                .any(|w| self.prefixes.contains(w))
    }
}

fn known() -> &'static RwLock<Known> {
    static KNOWN: OnceLock<RwLock<Known>> = OnceLock::new();
    KNOWN.get_or_init(Default::default)
}

/// Replace `value` (in every form) by `placeholder` in everything scrubbed from now on (for
/// this process).
pub fn register(value: &str, placeholder: &str) {
    let mut k = known().write().unwrap_or_else(|p| p.into_inner());
    if k.entries.iter().any(|e| e.form == value) {
        return;
    }
    k.add(value, placeholder, Source::Brokered);
    k.index();
}

/// `text` with every registered value (in every form) replaced (`None`: none was in it).
pub fn scrub_known(text: &str) -> Option<String> {
    refresh_if_due();
    let k = known().read().unwrap_or_else(|p| p.into_inner());
    if !k.may_hold(text) {
        return None;
    }
    let mut out: Option<String> = None;
    for e in &k.entries {
        let current = out.as_deref().unwrap_or(text);
        if current.contains(e.form.as_str()) {
            out = Some(current.replace(e.form.as_str(), &e.placeholder));
        }
    }
    out
}

/// The workspace-relative paths of the deny-listed files of a workspace now, or `None` once
/// the workspace is no longer watched (its gate is gone).
pub type SecretPaths = Box<dyn Fn() -> Option<Vec<String>> + Send + Sync>;

struct Watched {
    root: PathBuf,
    paths: SecretPaths,
    /// Each read file's (path, size, mtime, inode) when it was read.
    seen: Vec<(String, u64, i128, u64)>,
}

fn watched() -> &'static Mutex<(Vec<Watched>, Option<Instant>)> {
    static WATCHED: OnceLock<Mutex<(Vec<Watched>, Option<Instant>)>> = OnceLock::new();
    WATCHED.get_or_init(Default::default)
}

/// Register the values of the deny-listed files of the workspace at `root` now, and again
/// whenever they change (`paths` lists them; see the module docs).
pub fn watch_workspace(root: PathBuf, paths: SecretPaths) {
    let mut w = Watched {
        root,
        paths,
        seen: Vec::new(),
    };
    refresh(&mut w);
    let mut all = watched().lock().unwrap_or_else(|p| p.into_inner());
    all.0.push(w);
}

fn refresh_if_due() {
    let Ok(mut all) = watched().try_lock() else {
        // Another thread is refreshing (or this one is, through a scrub inside it).
        return;
    };
    let (list, last) = &mut *all;
    if list.is_empty() || last.is_some_and(|t| t.elapsed() < REFRESH) {
        return;
    }
    *last = Some(Instant::now());
    list.retain_mut(refresh);
}

/// Read `w`'s files again when any changed; `false` when it is no longer watched.
fn refresh(w: &mut Watched) -> bool {
    let Some(mut paths) = (w.paths)() else {
        return false;
    };
    paths.sort();
    paths.dedup();
    paths.truncate(MAX_FILES);
    let now: Vec<(String, u64, i128, u64)> = paths
        .iter()
        .filter_map(|rel| {
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::symlink_metadata(w.root.join(rel)).ok()?;
            meta.is_file().then(|| {
                let mtime =
                    i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
                (rel.clone(), meta.len(), mtime, meta.ino())
            })
        })
        .collect();
    if now == w.seen {
        return true;
    }
    let mut fresh = Known::default();
    for (rel, len, _, _) in &now {
        if *len > MAX_FILE_BYTES {
            continue;
        }
        let Some(text) = read_secret(&w.root, rel) else {
            continue;
        };
        for (value, label) in values_of(rel, &text) {
            let placeholder = format!("[secret value from {rel}:{label}]");
            fresh.add(
                &value,
                &placeholder,
                Source::File(w.root.clone(), rel.clone()),
            );
        }
    }
    w.seen = now;
    let mut k = known().write().unwrap_or_else(|p| p.into_inner());
    k.entries
        .retain(|e| !matches!(&e.source, Source::File(root, _) if *root == w.root));
    for e in fresh.entries {
        if !k.entries.iter().any(|x| x.form == e.form) {
            k.entries.push(e);
        }
    }
    k.index();
    true
}

/// The text of the regular file `rel` below `root` (never through a symlink, never blocking
/// on a FIFO), at most [`MAX_FILE_BYTES`]; `None` when it cannot be read as such.
fn read_secret(root: &std::path::Path, rel: &str) -> Option<String> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use std::io::Read;
    let dir = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let fd = rustix::fs::openat2(
        &dir,
        rel,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
    )
    .ok()?;
    let file = std::fs::File::from(fd);
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
#[path = "secrets/tests.rs"]
mod tests;
