//! The host-assisted walk (`toolgate:fs/walk@0.1.0`): the walking tools (`ls`, `glob`) ask the
//! host for the list of entries below a directory instead of walking it through WASI one
//! `readdir`/`stat`/failed `open` at a time; the tool still opens every file itself through
//! `wasi:filesystem`, where the filesystem guard applies. The same [`Walker`] drives grep's
//! read-ahead ([`super::read_ahead`]), which also reads the plain files it finds.
//!
//! The host decides what may be listed: only below the call's own preopens (the start path is
//! resolved the way the guest's libc resolves it, by the longest matching preopen), never via
//! `..`, an absolute path or a symlink leading out of that preopen, never a denied name (the
//! same [`FsDeny`] the filesystem guard applies to `readdir`), and denied directories are not
//! entered. Symlinks are listed as entries (the guest could list them too) but never followed.
//!
//! The semantics are those of the guests' own walk (`guest-tools/sdk/src/walk.rs`, the `ignore`
//! crate): hidden files included, `.ignore` then `.gitignore` honoured (each directory's and
//! those of the start's parents that lie inside a preopen; a closer file wins, a `.ignore` match
//! wins over any `.gitignore` match), no repository needed, no global excludes, default ignores
//! pruned, the caller's extra globs pruned, names in byte order, depth first.
//!
//! Pages are bounded (entries, bytes and time) so a huge tree cannot fill the guest's memory or
//! keep it in a host call past its deadline; a cut page says so and carries a resume point.

use super::fsguard::FsDeny;
use super::wasi::Preopen;
use crate::gate::scope::{Access, GUEST_ROOT};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

/// The WIT bindings of `toolgate:fs@0.1.0`.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/fs/since_v0.1.0",
        world: "walk-host",
    });
}

use bindings::toolgate::fs::walk as w;

/// The interface a walking tool imports (any version).
pub const WALK_INTERFACE_PREFIX: &str = "toolgate:fs/walk";

/// Directory names never entered (as the guests' `DEFAULT_IGNORES`).
pub const DEFAULT_IGNORES: &[&str] = &[".git", "node_modules", "target", "dist", ".toolgate"];

/// Most entries in one page.
const PAGE_ENTRIES: usize = 50_000;
/// Most path bytes in one page.
const PAGE_BYTES: usize = 8 << 20;
/// Longest time spent in one page: the guest's epoch deadline cannot interrupt a host call, so
/// the host returns to the guest at least this often.
const PAGE_TIME: Duration = Duration::from_secs(1);
/// Larger ignore files are skipped (and counted as an error).
const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;

/// What one call's walk may see: its preopens and deny-list.
#[derive(Default, Clone)]
pub(crate) struct WalkScope {
    pub(crate) preopens: Vec<Preopen>,
    pub(crate) deny: Option<Arc<FsDeny>>,
}

impl w::Host for super::CallState {
    fn list_entries(&mut self, start: String, options: w::Options) -> Result<w::Listing, String> {
        let cancel = super::current_cancel_flag();
        self.walk.list(&start, &options, cancel.as_deref())
    }
}

/// A start path resolved inside a preopen.
struct Start {
    /// Its canonical host path.
    host: PathBuf,
    /// Its real workspace-relative path (for the deny-list), `None` when unguarded.
    real_rel: Option<String>,
    /// Its lexical workspace-relative path as the guest names it (for the extra globs).
    lexical_rel: String,
}

/// One directory being listed.
struct Dir {
    host: PathBuf,
    /// Path relative to the start (`""` for the start).
    sub: String,
    /// Real workspace-relative path (for the deny-list).
    real_rel: Option<String>,
    depth: u32,
    children: Vec<(String, Kind)>,
    next: usize,
    ignore: Gitignore,
    gitignore: Gitignore,
    /// Whether this directory lies on the resume point's path (its children up to the
    /// resume point were returned already).
    on_resume: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    Other,
}

/// One entry a [`Walker`] found.
pub(crate) struct Found {
    /// Path relative to the start, `/`-separated.
    pub(crate) sub: String,
    /// The host path (below a canonical directory; the last component may be a symlink).
    pub(crate) host: PathBuf,
    pub(crate) is_dir: bool,
    /// Level below the start (the start's own entries are 1).
    pub(crate) depth: u32,
    /// Modification time when asked for (`with_mtime`) and the entry is not a directory.
    pub(crate) mtime_ns: Option<u64>,
}

/// How a [`Walker`] walks (the WIT `options` without the paging).
#[derive(Default, Clone)]
pub(crate) struct WalkOptions {
    pub(crate) max_depth: Option<u32>,
    pub(crate) ignore: Vec<String>,
    pub(crate) no_ignore_files: bool,
    pub(crate) with_mtime: bool,
    /// Entries up to and including this path (relative to the start) are not returned.
    pub(crate) resume: Option<String>,
}

/// A walk in progress, one entry at a time (depth first, names in byte order).
pub(crate) struct Walker {
    scope: WalkScope,
    start: Start,
    extra: Option<globset::GlobSet>,
    resume: Vec<String>,
    options: WalkOptions,
    /// Ignore matchers of the start's parents inside a preopen, outermost first.
    parents: Vec<(Gitignore, Gitignore)>,
    stack: Vec<Dir>,
    /// Directories and ignore files that could not be read so far.
    pub(crate) errors: u32,
    real_buf: String,
    visited: usize,
}

impl Walker {
    /// Start walking below `start` (a guest path), or say why it cannot be walked.
    pub(crate) fn new(scope: WalkScope, start: &str, options: WalkOptions) -> Result<Self, String> {
        let start = scope.resolve(start)?;
        let extra = build_extra(&options.ignore);
        let resume: Vec<String> = options
            .resume
            .as_deref()
            .map(|r| {
                r.split('/')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let mut errors = 0u32;
        let use_ignore_files = !options.no_ignore_files;
        let mut parents: Vec<(Gitignore, Gitignore)> = Vec::new();
        if use_ignore_files {
            let mut ancestors: Vec<&Path> = start
                .host
                .ancestors()
                .skip(1)
                .take_while(|a| scope.preopens.iter().any(|p| a.starts_with(&p.host)))
                .collect();
            ancestors.reverse();
            for a in ancestors {
                parents.push((
                    scope.ignore_file(a, ".ignore", &mut errors),
                    scope.ignore_file(a, ".gitignore", &mut errors),
                ));
            }
        }
        let children = read_children(&start.host).map_err(|e| {
            format!(
                "{} could not be listed: {e}",
                display_rel(&start.lexical_rel)
            )
        })?;
        let (ignore, gitignore) = if use_ignore_files {
            scope.ignore_files(&start.host, &children, &mut errors)
        } else {
            (Gitignore::empty(), Gitignore::empty())
        };
        let stack = vec![Dir {
            ignore,
            gitignore,
            host: start.host.clone(),
            sub: String::new(),
            real_rel: start.real_rel.clone(),
            depth: 0,
            children,
            next: 0,
            on_resume: !resume.is_empty(),
        }];
        Ok(Walker {
            scope,
            start,
            extra,
            resume,
            options,
            parents,
            stack,
            errors,
            real_buf: String::new(),
            visited: 0,
        })
    }

    /// Whether entries are left after the last one returned.
    pub(crate) fn more(&self) -> bool {
        self.stack.iter().any(|d| d.next < d.children.len())
    }

    /// The next entry, `None` at the end; an error when `cancel` was set.
    pub(crate) fn next(
        &mut self,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<Option<Found>, String> {
        let use_ignore_files = !self.options.no_ignore_files;
        while let Some(top) = self.stack.last_mut() {
            let Some((name, kind)) = top.children.get(top.next).cloned() else {
                self.stack.pop();
                continue;
            };
            top.next += 1;
            let top = &*top;
            let depth = top.depth + 1;
            self.visited += 1;
            if self.visited.is_multiple_of(1024)
                && cancel.is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Err("the call was cancelled".to_string());
            }
            // Where the entry stands relative to the resume point.
            let mut emit = true;
            let mut child_on_resume = false;
            if top.on_resume {
                let i = top.depth as usize;
                match self.resume.get(i).map(|r| name.as_str().cmp(r)) {
                    Some(std::cmp::Ordering::Less) => continue,
                    Some(std::cmp::Ordering::Equal) => {
                        emit = false;
                        child_on_resume = i + 1 < self.resume.len();
                    }
                    _ => {}
                }
            }
            let is_dir = kind == Kind::Dir;
            if let Some(max) = self.options.max_depth {
                if depth > max {
                    continue;
                }
            }
            if is_dir && DEFAULT_IGNORES.contains(&name.as_str()) {
                continue;
            }
            let host = top.host.join(&name);
            let sub = join_rel(&top.sub, &name);
            if let Some(set) = &self.extra {
                let lexical = join_rel(&self.start.lexical_rel, &sub);
                if set.is_match(&name) || set.is_match(&lexical) {
                    continue;
                }
            }
            let real_rel = match (&self.scope.deny, &top.real_rel) {
                (Some(deny), Some(parent)) => {
                    self.real_buf.clear();
                    self.real_buf.push_str(parent);
                    if !self.real_buf.is_empty() {
                        self.real_buf.push('/');
                    }
                    self.real_buf.push_str(&name);
                    if deny.denied(&self.real_buf, parent.len(), Access::Read) {
                        continue;
                    }
                    Some(self.real_buf.clone())
                }
                _ => None,
            };
            if use_ignore_files && ignored(&self.stack, &self.parents, &host, is_dir) {
                continue;
            }
            let descend = is_dir && self.options.max_depth.is_none_or(|max| depth < max);
            let mut found = None;
            if emit {
                let mtime_ns = if self.options.with_mtime && !is_dir {
                    std::fs::symlink_metadata(&host)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                        .and_then(|d| u64::try_from(d.as_nanos()).ok())
                } else {
                    None
                };
                found = Some(Found {
                    sub: sub.clone(),
                    host: host.clone(),
                    is_dir,
                    depth,
                    mtime_ns,
                });
            }
            if descend {
                match read_children(&host) {
                    Ok(children) => {
                        let (ignore, gitignore) = if use_ignore_files {
                            self.scope.ignore_files(&host, &children, &mut self.errors)
                        } else {
                            (Gitignore::empty(), Gitignore::empty())
                        };
                        self.stack.push(Dir {
                            host,
                            sub,
                            real_rel,
                            depth,
                            children,
                            next: 0,
                            ignore,
                            gitignore,
                            on_resume: child_on_resume,
                        });
                    }
                    Err(_) => self.errors += 1,
                }
            }
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}

impl WalkScope {
    fn list(
        &self,
        start: &str,
        options: &w::Options,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<w::Listing, String> {
        self.list_paged(start, options, cancel, PAGE_ENTRIES)
    }

    /// [`WalkScope::list`] with pages of at most `page_entries` entries.
    fn list_paged(
        &self,
        start: &str,
        options: &w::Options,
        cancel: Option<&std::sync::atomic::AtomicBool>,
        page_entries: usize,
    ) -> Result<w::Listing, String> {
        let began = Instant::now();
        let mut walker = Walker::new(
            self.clone(),
            start,
            WalkOptions {
                max_depth: options.max_depth,
                ignore: options.ignore.clone(),
                no_ignore_files: options.no_ignore_files,
                with_mtime: options.with_mtime,
                resume: options.resume.clone(),
            },
        )?;
        let mut listing = w::Listing {
            entries: Vec::new(),
            errors: 0,
            truncated: false,
            resume: None,
        };
        let mut bytes = 0usize;
        while let Some(found) = walker.next(cancel)? {
            bytes += found.sub.len() + 32;
            let full = listing.entries.len() + 1 >= page_entries
                || bytes >= PAGE_BYTES
                || began.elapsed() >= PAGE_TIME;
            let sub = found.sub;
            if full && walker.more() {
                listing.truncated = true;
                listing.resume = Some(sub.clone());
            }
            listing.entries.push(w::Entry {
                path: sub,
                is_dir: found.is_dir,
                depth: found.depth,
                mtime_ns: found.mtime_ns,
            });
            if full {
                break;
            }
        }
        listing.errors = walker.errors;
        Ok(listing)
    }

    /// Resolve the guest's `start` to a directory inside one of the call's preopens.
    fn resolve(&self, start: &str) -> Result<Start, String> {
        if !start.starts_with('/') {
            return Err(format!(
                "`{start}` is not an absolute sandbox path: pass the directory as the tool sees it, e.g. {GUEST_ROOT}/src"
            ));
        }
        let parts: Vec<&str> = start
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if parts.contains(&"..") {
            return Err(format!(
                "`{start}` contains `..`: pass the directory itself, inside the workspace"
            ));
        }
        let guest = format!("/{}", parts.join("/"));
        let lexical_rel = match guest.strip_prefix(GUEST_ROOT) {
            Some("") => String::new(),
            Some(rest) if rest.starts_with('/') => rest[1..].to_string(),
            _ => guest.clone(),
        };
        // A denied name is refused before the filesystem is asked anything, so the answer does
        // not tell whether it exists.
        if let Some(deny) = &self.deny {
            if deny.denied(&lexical_rel, 0, Access::Read) {
                return Err(format!(
                    "`{start}` is denied to tools (a secret or the host's state directory)"
                ));
            }
        }
        let preopen = self
            .preopens
            .iter()
            .filter(|p| {
                let g: Vec<&str> = p.guest.split('/').filter(|c| !c.is_empty()).collect();
                parts.starts_with(&g)
            })
            .max_by_key(|p| p.guest.split('/').filter(|c| !c.is_empty()).count())
            .ok_or_else(|| {
                format!("`{start}` is outside every directory this call was granted: walk inside {GUEST_ROOT}")
            })?;
        let depth = preopen.guest.split('/').filter(|c| !c.is_empty()).count();
        let mut host = preopen.host.clone();
        for part in &parts[depth..] {
            host.push(part);
        }
        let root = preopen
            .host
            .canonicalize()
            .map_err(|e| format!("`{start}` cannot be listed: {e}"))?;
        let canonical = host
            .canonicalize()
            .map_err(|e| format!("`{start}` cannot be listed: {e}"))?;
        if !canonical.starts_with(&root) {
            return Err(format!(
                "`{start}` leads outside the directory this call was granted (a symlink?): walk the real directory inside the workspace"
            ));
        }
        if !canonical.is_dir() {
            return Err(format!("`{start}` is not a directory"));
        }
        let real_rel = match &self.deny {
            Some(deny) => {
                let rel = canonical
                    .strip_prefix(deny.host_root())
                    .map_err(|_| {
                        format!("`{start}` is outside the workspace and cannot be listed")
                    })?
                    .to_str()
                    .ok_or_else(|| format!("`{start}` is not valid UTF-8"))?
                    .to_string();
                if deny.denied(&rel, 0, Access::Read) {
                    return Err(format!(
                        "`{start}` is denied to tools (a secret or the host's state directory)"
                    ));
                }
                Some(rel)
            }
            None => None,
        };
        Ok(Start {
            host: canonical,
            real_rel,
            lexical_rel,
        })
    }

    /// The `.ignore` and `.gitignore` matchers of directory `dir`, whose entries are
    /// `children` (only names present there are looked at).
    fn ignore_files(
        &self,
        dir: &Path,
        children: &[(String, Kind)],
        errors: &mut u32,
    ) -> (Gitignore, Gitignore) {
        let mut read = |name: &str| {
            if children
                .binary_search_by(|(n, _)| n.as_str().cmp(name))
                .is_ok()
            {
                self.ignore_file(dir, name, errors)
            } else {
                Gitignore::empty()
            }
        };
        (read(".ignore"), read(".gitignore"))
    }

    /// One ignore file's matcher, read only when the guest could read it too: a regular file
    /// (or a symlink to one) inside a preopen, not denied, not too large.
    fn ignore_file(&self, dir: &Path, name: &str, errors: &mut u32) -> Gitignore {
        let path = dir.join(name);
        // Opened without blocking (a FIFO put there would otherwise hang the host call), then
        // judged by what was actually opened: a regular file whose real path is inside a
        // preopen and not denied, so a symlink or a swap cannot make the host read elsewhere.
        let Some(file) = open_nonblocking(&path) else {
            return Gitignore::empty();
        };
        let Ok(meta) = file.metadata() else {
            return Gitignore::empty();
        };
        if !meta.is_file() {
            return Gitignore::empty();
        }
        let Some(real) = real_path(&file, &path) else {
            return Gitignore::empty();
        };
        let inside = self.preopens.iter().any(|p| real.starts_with(&p.host));
        let allowed = inside
            && match &self.deny {
                Some(deny) => real
                    .strip_prefix(deny.host_root())
                    .ok()
                    .and_then(Path::to_str)
                    .is_some_and(|rel| !deny.denied(rel, 0, Access::Read)),
                None => true,
            };
        if !allowed {
            return Gitignore::empty();
        }
        if meta.len() > MAX_IGNORE_FILE_BYTES {
            *errors += 1;
            return Gitignore::empty();
        }
        let mut text = Vec::new();
        {
            use std::io::Read as _;
            if (&file)
                .take(MAX_IGNORE_FILE_BYTES + 1)
                .read_to_end(&mut text)
                .is_err()
                || text.len() as u64 > MAX_IGNORE_FILE_BYTES
            {
                *errors += 1;
                return Gitignore::empty();
            }
        }
        let mut builder = GitignoreBuilder::new(dir);
        let text = String::from_utf8_lossy(&text);
        for (i, line) in text.lines().enumerate() {
            let line = if i == 0 {
                line.trim_start_matches('\u{feff}')
            } else {
                line
            };
            if builder.add_line(Some(path.clone()), line).is_err() {
                *errors += 1;
            }
        }
        builder.build().unwrap_or_else(|_| {
            *errors += 1;
            Gitignore::empty()
        })
    }
}

/// Whether the ignore files of the walked directories and the start's parents skip `path`:
/// the closest `.ignore` that has an opinion decides, else the closest `.gitignore`.
fn ignored(stack: &[Dir], parents: &[(Gitignore, Gitignore)], path: &Path, is_dir: bool) -> bool {
    let levels = || {
        stack
            .iter()
            .rev()
            .map(|d| (&d.ignore, &d.gitignore))
            .chain(parents.iter().rev().map(|(i, g)| (i, g)))
    };
    for (ignore, _) in levels() {
        match ignore.matched(path, is_dir) {
            Match::None => {}
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
        }
    }
    for (_, gitignore) in levels() {
        match gitignore.matched(path, is_dir) {
            Match::None => {}
            Match::Ignore(_) => return true,
            Match::Whitelist(_) => return false,
        }
    }
    false
}

/// A directory's entries in name order. Names that are not UTF-8 are left out (a WASI guest
/// cannot name them either).
///
/// `dir` is a canonical path (the start was canonicalised and only real directories are
/// descended into), so it has no symlink anywhere; it is opened so that any symlink on the way
/// fails. A directory swapped for a symlink between its listing and its turn (by a process
/// racing the walk) is then skipped instead of followed out of the workspace.
#[cfg(target_os = "linux")]
fn read_children(dir: &Path) -> std::io::Result<Vec<(String, Kind)>> {
    use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
    let fd = match rustix::fs::openat2(
        rustix::fs::CWD,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => fd,
        // No `openat2` (Linux before 5.6): the last component at least must not be a symlink.
        Err(rustix::io::Errno::NOSYS) => rustix::fs::openat(
            rustix::fs::CWD,
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?,
        Err(e) => return Err(e.into()),
    };
    let listing = rustix::fs::Dir::new(fd)?;
    let mut children = Vec::new();
    for entry in listing {
        let Ok(entry) = entry else { continue };
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        // The entry's own type, never following a symlink: a symlink to a directory is not a
        // directory. Filesystems that do not report it are asked without following.
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            FileType::Unknown => {
                std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.file_type().is_dir())
            }
            _ => false,
        };
        children.push((
            name.to_string(),
            if is_dir { Kind::Dir } else { Kind::Other },
        ));
    }
    children.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(children)
}

#[cfg(not(target_os = "linux"))]
fn read_children(dir: &Path) -> std::io::Result<Vec<(String, Kind)>> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        // `file_type` does not follow symlinks: a symlink to a directory is not a directory.
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => Kind::Dir,
            _ => Kind::Other,
        };
        children.push((name, kind));
    }
    children.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(children)
}

/// Open `path` for reading without blocking on a FIFO.
fn open_nonblocking(path: &Path) -> Option<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    options.open(path).ok()
}

/// The real path of an open file (Linux: what the kernel says the descriptor is).
#[cfg(target_os = "linux")]
fn real_path(file: &std::fs::File, _path: &Path) -> Option<PathBuf> {
    use std::os::fd::AsRawFd as _;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
fn real_path(_file: &std::fs::File, path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()
}

fn join_rel(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}/{name}")
    }
}

fn display_rel(rel: &str) -> &str {
    if rel.is_empty() {
        "."
    } else {
        rel
    }
}

/// The caller's extra globs (a pattern that does not parse is skipped, as the guests do).
fn build_extra(patterns: &[String]) -> Option<globset::GlobSet> {
    if patterns.is_empty() {
        return None;
    }
    let mut set = globset::GlobSetBuilder::new();
    for p in patterns {
        if let Ok(g) = globset::Glob::new(p.trim_end_matches('/')) {
            set.add(g);
        }
    }
    set.build().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::gate::scope::Workspace;

    fn opts() -> w::Options {
        w::Options {
            max_depth: None,
            ignore: Vec::new(),
            no_ignore_files: false,
            with_mtime: false,
            resume: None,
        }
    }

    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A workspace with secrets, ignore files, default ignores and symlinks; the scope
    /// preopens the workspace (or `only`, a subdirectory) at the guest root.
    fn fixture(only: Option<&str>) -> (tempfile::TempDir, tempfile::TempDir, PathBuf, WalkScope) {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        put(&root, ".env", "S=1");
        put(&root, ".gitignore", "*.log\ngen/\n");
        put(&root, "src/.ignore", "!keep.log\n");
        put(&root, "src/keep.log", "");
        put(&root, "src/drop.log", "");
        put(&root, "src/main.rs", "");
        put(&root, "src/b/.gitignore", "x.rs\n");
        put(&root, "src/b/x.rs", "");
        put(&root, "src/b/y.rs", "");
        put(&root, "src/.ssh/id_ed25519", "");
        put(&root, "gen/out.rs", "");
        put(&root, "node_modules/m/index.js", "");
        put(&root, "target/debug/x", "");
        put(&root, ".git/config", "");
        put(&root, ".toolgate/outputs/call-1.txt", "");
        put(&root, ".toolgate/grants.toml", "");
        put(&root, "certs/server.pem", "");
        put(&root, "docs/a.md", "");
        put(&root, ".github/ci.yml", "");
        put(outside.path(), "secret.txt", "outside");
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        std::os::unix::fs::symlink("src", root.join("alias")).unwrap();
        let (host, guest) = match only {
            Some(sub) => (root.join(sub), format!("{GUEST_ROOT}/{sub}")),
            None => (root.clone(), GUEST_ROOT.to_string()),
        };
        let scope = WalkScope {
            preopens: vec![Preopen {
                host,
                guest,
                writable: false,
            }],
            deny: Some(Arc::new(FsDeny::new(Workspace::new(&root, &[]).unwrap()))),
        };
        (dir, outside, root, scope)
    }

    fn names(listing: &w::Listing) -> Vec<String> {
        listing
            .entries
            .iter()
            .map(|e| {
                if e.is_dir {
                    format!("{}/", e.path)
                } else {
                    e.path.clone()
                }
            })
            .collect()
    }

    #[test]
    fn lists_like_the_guest_walk() {
        let (_d, _o, _root, scope) = fixture(None);
        let l = scope.list("/workspace", &opts(), None).unwrap();
        assert_eq!(
            names(&l),
            [
                ".github/",
                ".github/ci.yml",
                ".gitignore",
                "alias",
                "certs/",
                "docs/",
                "docs/a.md",
                "out",
                "src/",
                "src/.ignore",
                "src/b/",
                "src/b/.gitignore",
                "src/b/y.rs",
                "src/keep.log",
                "src/main.rs",
            ]
        );
        assert!(!l.truncated && l.errors == 0);
        // Parent ignore files count for a start below the root; depth is below the start.
        let l = scope.list("/workspace/src/b", &opts(), None).unwrap();
        assert_eq!(names(&l), [".gitignore", "y.rs"]);
        assert_eq!(l.entries[0].depth, 1);
        let mut o = opts();
        o.max_depth = Some(1);
        o.ignore = vec!["docs".into(), "*.yml".into()];
        let l = scope.list("/workspace", &o, None).unwrap();
        assert_eq!(
            names(&l),
            [".github/", ".gitignore", "alias", "certs/", "out", "src/"]
        );
        let mut o = opts();
        o.no_ignore_files = true;
        let l = scope.list("/workspace/src", &o, None).unwrap();
        assert!(names(&l).contains(&"drop.log".to_string()));
        assert!(names(&l).contains(&"b/x.rs".to_string()));
    }

    #[test]
    fn refuses_starts_outside_the_grant() {
        let (_d, outside, _root, scope) = fixture(None);
        for start in [
            "/",
            "/etc",
            "/workspacex",
            "workspace",
            "src",
            "/workspace/..",
            "/workspace/src/../..",
            "/workspace/src/../docs",
            "/workspace/out",
            "/workspace/.toolgate",
            "/workspace/.toolgate/outputs",
            "/workspace/src/.ssh",
            "/workspace/.env",
            "/workspace/missing",
        ] {
            let e = scope.list(start, &opts(), None).unwrap_err();
            assert!(e.contains(start), "{start}: {e}");
        }
        let outside = outside.path().to_string_lossy().into_owned();
        assert!(scope.list(&outside, &opts(), None).is_err());
        // A symlink to a directory inside the workspace is walked as its target.
        let l = scope.list("/workspace/alias/b", &opts(), None).unwrap();
        assert_eq!(names(&l), [".gitignore", "y.rs"]);
    }

    #[test]
    fn lists_only_inside_the_call_grant() {
        let (_d, _o, _root, scope) = fixture(Some("src"));
        assert!(scope.list("/workspace", &opts(), None).is_err());
        assert!(scope.list("/workspace/docs", &opts(), None).is_err());
        // The root's .gitignore lies outside the preopen: the guest could not read it either.
        let l = scope.list("/workspace/src", &opts(), None).unwrap();
        assert_eq!(
            names(&l),
            [
                ".ignore",
                "b/",
                "b/.gitignore",
                "b/y.rs",
                "drop.log",
                "keep.log",
                "main.rs"
            ]
        );
    }

    #[test]
    fn pages_resume_where_they_stopped() {
        let (_d, _o, _root, scope) = fixture(None);
        let whole = names(&scope.list("/workspace", &opts(), None).unwrap());
        let mut got = Vec::new();
        let mut o = opts();
        loop {
            let l = scope.list_paged("/workspace", &o, None, 2).unwrap();
            assert!(l.entries.len() <= 2);
            got.extend(names(&l));
            if !l.truncated {
                break;
            }
            o.resume = l.resume.clone();
        }
        assert_eq!(got, whole);
    }

    #[test]
    fn ignore_files_are_read_only_where_the_guest_could_read_them() {
        let (_d, outside, root, scope) = fixture(None);
        // Rules from outside the workspace or from a secret are never applied.
        put(outside.path(), "rules", "*.md\n");
        put(&root, "notes/.env", "*.md\n");
        put(&root, "notes/a.md", "");
        std::os::unix::fs::symlink(outside.path().join("rules"), root.join("docs/.gitignore"))
            .unwrap();
        std::os::unix::fs::symlink(".env", root.join("notes/.gitignore")).unwrap();
        let l = scope.list("/workspace/docs", &opts(), None).unwrap();
        assert_eq!(names(&l), [".gitignore", "a.md"]);
        let l = scope.list("/workspace/notes", &opts(), None).unwrap();
        assert_eq!(names(&l), [".gitignore", "a.md"]);
        // A FIFO named .ignore does not hang the walk.
        let status = std::process::Command::new("mkfifo")
            .arg(root.join("src/b/.ignore"))
            .status()
            .unwrap();
        assert!(status.success());
        let l = scope.list("/workspace/src/b", &opts(), None).unwrap();
        assert_eq!(names(&l), [".gitignore", ".ignore", "y.rs"]);
    }

    #[test]
    fn reports_mtimes_when_asked() {
        let (_d, _o, _root, scope) = fixture(None);
        let mut o = opts();
        o.with_mtime = true;
        let l = scope.list("/workspace/docs", &o, None).unwrap();
        assert!(l.entries[0].mtime_ns.is_some_and(|t| t > 0));
        let l = scope.list("/workspace", &o, None).unwrap();
        assert!(l.entries.iter().all(|e| e.is_dir == e.mtime_ns.is_none()));
    }

    /// A directory reached through a symlink (as a racing process could swap one in) is not
    /// listed: the walk opens directories with no symlink anywhere on their path.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_directory_behind_a_symlink_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret-name.txt"), "x").unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/a.txt"), "a").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("swapped")).unwrap();
        let names =
            |p: &Path| read_children(p).map(|c| c.into_iter().map(|(n, _)| n).collect::<Vec<_>>());
        assert_eq!(names(&root.join("real")).unwrap(), ["a.txt"]);
        assert!(names(&root.join("swapped")).is_err());
        std::os::unix::fs::symlink(root.join("real"), root.join("link-in")).unwrap();
        assert!(names(&root.join("link-in")).is_err());
        let kinds = read_children(&root).unwrap();
        assert!(kinds.iter().any(|(n, k)| n == "real" && *k == Kind::Dir));
        assert!(kinds
            .iter()
            .any(|(n, k)| n == "swapped" && *k == Kind::Other));
    }
}
