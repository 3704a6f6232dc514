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
//! The host acts on what it checked: every directory is opened once, from its parent's
//! descriptor, with `O_NOFOLLOW` (the start from the preopen's root, one component at a time),
//! listed from that descriptor, and its children are entered and read (ignore files, and the
//! read-ahead's files) by `openat` on it, never by path. An opened child must be the object the
//! listing named (its inode is the listed one, on the same filesystem): a name exchanged or
//! renamed over between the listing and the open (`renameat2(RENAME_EXCHANGE)` of `d` and
//! `.aws`) is skipped and counted as an error, so nothing is read under a name that was judged
//! for another object.
//!
//! The semantics are those of the guests' own walk (`guest-tools/sdk/src/walk.rs`, the `ignore`
//! crate): hidden files included, `.ignore` then `.gitignore` honoured (each directory's and
//! those of the start's parents that lie inside a preopen; a closer file wins, a `.ignore` match
//! wins over any `.gitignore` match), no repository needed, no global excludes, default ignores
//! pruned, the caller's extra globs pruned, names in byte order, depth first.
//!
//! Ignore files are host work inside the call's limits: a walk keeps at most
//! `[limits] ignore_patterns` patterns and `ignore_bytes` bytes of them (fewer when the call's
//! memory is small), compiles them in chunks and stops at the call's deadline or cancellation;
//! a file whose patterns were cut is named (`data.ignore_files_cut`) and the walk goes on with
//! the patterns it kept.
//!
//! Pages are bounded (entries, bytes and time) so a huge tree cannot fill the guest's memory or
//! keep it in a host call past its deadline; a cut page says so and carries a resume point.

use super::fsguard::FsDeny;
use super::wasi::Preopen;
use crate::workspace::{Access, GUEST_ROOT};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use rustix::fd::{AsFd as _, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// Directory names never entered (the guests' own walk prunes the same list).
pub use toolgate_walk_rules::DEFAULT_IGNORES;

/// Most entries in one page.
const PAGE_ENTRIES: usize = 50_000;
/// Most path bytes in one page.
const PAGE_BYTES: usize = 8 << 20;
/// Longest time spent in one page: the guest's epoch deadline cannot interrupt a host call, so
/// the host returns to the guest at least this often.
const PAGE_TIME: Duration = Duration::from_secs(1);
/// Larger ignore files are skipped (and counted as an error).
const MAX_IGNORE_FILE_BYTES: u64 = 1 << 20;
/// Patterns compiled at a time: the deadline and cancellation are checked between chunks (a
/// compiled chunk is one matcher; a file of many chunks matches as one, the last match wins).
const IGNORE_CHUNK: usize = 1024;
/// Host memory a compiled ignore pattern costs, per byte of its text (measured: ~360 for
/// patterns globset compiles to regexes, such as `dir-1/**/*.gen-1`; see the lib test
/// `ignore_memory_per_byte`). The walk's byte budget keeps the compiled patterns within a
/// quarter of the call's memory limit (512 MiB: ~370 KB of patterns).
const IGNORE_MEMORY_PER_BYTE: usize = 360;

/// What one call's walk may see: its preopens and deny-list; and the call's limits for ignore
/// files.
#[derive(Clone)]
pub(crate) struct WalkScope {
    pub(crate) preopens: Vec<Preopen>,
    pub(crate) deny: Option<Arc<FsDeny>>,
    /// Most ignore patterns one walk keeps (`[limits] ignore_patterns`).
    pub(crate) ignore_patterns: usize,
    /// Most bytes of ignore patterns one walk keeps (`[limits] ignore_bytes`).
    pub(crate) ignore_bytes: usize,
    /// The call's memory limit: the compiled patterns are counted against it.
    pub(crate) memory_bytes: usize,
    /// The call's deadline: compiling stops there.
    pub(crate) deadline: Option<Instant>,
    /// The ignore files whose patterns were cut, as the workspace names them (shared by the
    /// call's walks; the sandbox puts them in the observation's `data.ignore_files_cut`).
    pub(crate) cut: Arc<Mutex<Vec<String>>>,
}

impl Default for WalkScope {
    fn default() -> Self {
        let limits = super::Limits::default();
        WalkScope {
            preopens: Vec::new(),
            deny: None,
            ignore_patterns: limits.ignore_patterns,
            ignore_bytes: limits.ignore_bytes,
            memory_bytes: limits.max_memory_bytes,
            deadline: None,
            cut: Arc::default(),
        }
    }
}

impl WalkScope {
    /// The ignore files cut so far in this call (each once, in the order they were met).
    pub(crate) fn ignore_files_cut(&self) -> Vec<String> {
        self.cut.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl w::Host for super::CallState {
    fn list_entries(&mut self, start: String, options: w::Options) -> Result<w::Listing, String> {
        self.walk.list(&start, &options, self.cancel.flag())
    }
}

/// A start path resolved inside a preopen.
struct Start {
    /// Its canonical host path.
    host: PathBuf,
    /// The canonical root of the outermost preopen holding it (the walk opens its way down
    /// from there).
    top: PathBuf,
    /// Its real workspace-relative path (for the deny-list), `None` when unguarded.
    real_rel: Option<String>,
    /// Its lexical workspace-relative path as the guest names it (for the extra globs).
    lexical_rel: String,
}

/// An open directory, shared by the walk and the entries found in it.
pub(crate) type DirFd = Arc<OwnedFd>;

/// One listed name.
#[derive(Clone)]
struct Child {
    name: String,
    kind: Kind,
    /// The inode the listing gave (what an open of the name must find).
    ino: u64,
}

/// One directory being listed.
struct Dir {
    fd: DirFd,
    /// Its filesystem (an opened child on another one is a mount point, not a swap).
    dev: u64,
    host: PathBuf,
    /// Path relative to the start (`""` for the start).
    sub: String,
    /// Real workspace-relative path (for the deny-list).
    real_rel: Option<String>,
    depth: u32,
    children: Vec<Child>,
    next: usize,
    ignore: Matcher,
    gitignore: Matcher,
    /// Whether this directory lies on the resume point's path (its children up to the
    /// resume point were returned already).
    on_resume: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    Other,
}

/// One ignore file's patterns, compiled in chunks (in file order).
#[derive(Default)]
struct Matcher(Vec<Gitignore>);

impl Matcher {
    /// The file's verdict: the last matching pattern's.
    fn matched(&self, path: &Path, is_dir: bool) -> Match<()> {
        for chunk in self.0.iter().rev() {
            match chunk.matched(path, is_dir) {
                Match::None => {}
                Match::Ignore(_) => return Match::Ignore(()),
                Match::Whitelist(_) => return Match::Whitelist(()),
            }
        }
        Match::None
    }
}

/// What a walk may still spend on ignore files.
struct Budget {
    patterns: usize,
    bytes: usize,
    deadline: Option<Instant>,
}

impl Budget {
    fn new(scope: &WalkScope) -> Self {
        Budget {
            patterns: scope.ignore_patterns,
            bytes: scope
                .ignore_bytes
                .min(scope.memory_bytes / 4 / IGNORE_MEMORY_PER_BYTE),
            deadline: scope.deadline,
        }
    }

    fn late(&self, cancel: Option<&std::sync::atomic::AtomicBool>) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
            || cancel.is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// One entry a [`Walker`] found.
pub(crate) struct Found {
    /// Path relative to the start, `/`-separated.
    pub(crate) sub: String,
    /// The directory it was listed in (open it with `openat` on this, never by path).
    pub(crate) dir: DirFd,
    /// Its name in `dir`.
    pub(crate) name: String,
    /// The inode the listing gave: an open of `name` must find this one.
    pub(crate) ino: u64,
    /// The filesystem of `dir`.
    pub(crate) dev: u64,
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
    parents: Vec<(Matcher, Matcher)>,
    stack: Vec<Dir>,
    /// Directories and ignore files that could not be read so far (and names that no longer
    /// were what the listing named when opened).
    pub(crate) errors: u32,
    budget: Budget,
    real_buf: String,
    listing_buf: Vec<std::mem::MaybeUninit<u8>>,
    visited: usize,
}

impl Walker {
    /// Start walking below `start` (a guest path), or say why it cannot be walked.
    #[cfg(test)]
    pub(crate) fn new(scope: WalkScope, start: &str, options: WalkOptions) -> Result<Self, String> {
        Self::new_cancellable(scope, start, options, None)
    }

    /// [`Walker::new`], stopping the ignore files' compilation when `cancel` is set.
    #[allow(clippy::unnecessary_cast)]
    pub(crate) fn new_cancellable(
        scope: WalkScope,
        start: &str,
        options: WalkOptions,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<Self, String> {
        let start = scope.resolve(start)?;
        let extra = toolgate_walk_rules::extra_globs(&options.ignore);
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
        let mut budget = Budget::new(&scope);
        let use_ignore_files = !options.no_ignore_files;
        let cannot = |e: std::io::Error| {
            format!(
                "{} could not be listed: {e}",
                display_rel(&start.lexical_rel)
            )
        };
        // Down from the outermost preopen's root to the start, one component at a time and
        // never through a symlink, reading the parents' ignore files on the way.
        let mut fd = open_root(&start.top).map_err(cannot)?;
        let mut host = start.top.clone();
        let mut parents: Vec<(Matcher, Matcher)> = Vec::new();
        let below: Vec<String> = start
            .host
            .strip_prefix(&start.top)
            .unwrap_or(Path::new(""))
            .components()
            .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
            .collect();
        for part in &below {
            if use_ignore_files {
                let real = scope.real_rel_of(&host);
                let dev = fstat_dev(&fd);
                let mut read = |name: &str| {
                    scope.ignore_file(
                        IgnoreAt {
                            dir: fd.as_fd(),
                            dev,
                            host: &host,
                            real_rel: real.as_deref(),
                            name,
                            ino: None,
                        },
                        &mut errors,
                        &mut budget,
                        cancel,
                    )
                };
                parents.push((read(".ignore"), read(".gitignore")));
            }
            fd = rustix::fs::openat(
                &fd,
                part.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| cannot(e.into()))?;
            host.push(part);
        }
        let stat = rustix::fs::fstat(&fd).map_err(|e| cannot(e.into()))?;
        let dev = stat.st_dev as u64;
        let mut listing_buf = Vec::new();
        let children = read_children(fd.as_fd(), &mut listing_buf, &mut errors).map_err(cannot)?;
        let fd: DirFd = Arc::new(fd);
        let (ignore, gitignore) = if use_ignore_files {
            scope.ignore_files(
                &fd,
                dev,
                &start.host,
                start.real_rel.as_deref(),
                &children,
                &mut errors,
                &mut budget,
                cancel,
            )
        } else {
            (Matcher::default(), Matcher::default())
        };
        let stack = vec![Dir {
            fd,
            dev,
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
            budget,
            real_buf: String::new(),
            listing_buf,
            visited: 0,
        })
    }

    /// Whether entries are left after the last one returned.
    pub(crate) fn more(&self) -> bool {
        self.stack.iter().any(|d| d.next < d.children.len())
    }

    /// The next entry, `None` at the end; an error when `cancel` was set.
    #[allow(clippy::unnecessary_cast)]
    pub(crate) fn next(
        &mut self,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<Option<Found>, String> {
        let use_ignore_files = !self.options.no_ignore_files;
        while let Some(top) = self.stack.last_mut() {
            let Some(Child { name, kind, ino }) = top.children.get(top.next).cloned() else {
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
            let (parent, parent_dev) = (top.fd.clone(), top.dev);
            if use_ignore_files && ignored(&self.stack, &self.parents, &host, is_dir) {
                continue;
            }
            let descend = is_dir && self.options.max_depth.is_none_or(|max| depth < max);
            let mut found = None;
            if emit {
                let mtime_ns = if self.options.with_mtime && !is_dir {
                    rustix::fs::statat(&*parent, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .ok()
                        .and_then(|s| {
                            let secs = u64::try_from(s.st_mtime).ok()?;
                            let nanos = s.st_mtime_nsec as u64;
                            secs.checked_mul(1_000_000_000)?.checked_add(nanos)
                        })
                } else {
                    None
                };
                found = Some(Found {
                    sub: sub.clone(),
                    dir: parent.clone(),
                    name: name.clone(),
                    ino,
                    dev: parent_dev,
                    is_dir,
                    depth,
                    mtime_ns,
                });
            }
            if descend {
                // Entered through the listed directory's descriptor, and only when the name
                // still is the directory the listing named.
                let listing_buf = &mut self.listing_buf;
                let errors = &mut self.errors;
                let opened = open_listed_dir(parent.as_fd(), &name, ino, parent_dev).and_then(
                    |(fd, dev)| {
                        let children = read_children(fd.as_fd(), listing_buf, errors)?;
                        Ok((fd, dev, children))
                    },
                );
                match opened {
                    Ok((fd, dev, children)) => {
                        let fd: DirFd = Arc::new(fd);
                        let (ignore, gitignore) = if use_ignore_files {
                            self.scope.ignore_files(
                                &fd,
                                dev,
                                &host,
                                real_rel.as_deref(),
                                &children,
                                &mut self.errors,
                                &mut self.budget,
                                cancel,
                            )
                        } else {
                            (Matcher::default(), Matcher::default())
                        };
                        self.stack.push(Dir {
                            fd,
                            dev,
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

/// Where an ignore file is looked for.
struct IgnoreAt<'a> {
    dir: BorrowedFd<'a>,
    dev: u64,
    host: &'a Path,
    real_rel: Option<&'a str>,
    name: &'a str,
    /// The inode the directory's listing gave it (`None` for the start's parents, which are
    /// opened without a listing).
    ino: Option<u64>,
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
        let mut walker = Walker::new_cancellable(
            self.clone(),
            start,
            WalkOptions {
                max_depth: options.max_depth,
                ignore: options.ignore.clone(),
                no_ignore_files: options.no_ignore_files,
                with_mtime: options.with_mtime,
                resume: options.resume.clone(),
            },
            cancel,
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
        // The walk opens its way down from the outermost preopen holding the start (whose
        // ignore files count as the start's parents').
        let top = self
            .preopens
            .iter()
            .filter_map(|p| p.host.canonicalize().ok())
            .filter(|p| canonical.starts_with(p))
            .min_by_key(|p| p.components().count())
            .unwrap_or(root);
        Ok(Start {
            host: canonical,
            top,
            real_rel,
            lexical_rel,
        })
    }

    /// The workspace-relative path of the directory at `host` (a canonical path), for the
    /// deny-list; `None` when there is no deny-list or it is not inside the workspace.
    fn real_rel_of(&self, host: &Path) -> Option<String> {
        let deny = self.deny.as_ref()?;
        host.strip_prefix(deny.host_root())
            .ok()?
            .to_str()
            .map(str::to_string)
    }

    /// The `.ignore` and `.gitignore` matchers of the directory open as `dir`, whose entries
    /// are `children` (only names present there are looked at).
    #[allow(clippy::too_many_arguments)]
    fn ignore_files(
        &self,
        dir: &DirFd,
        dev: u64,
        host: &Path,
        real_rel: Option<&str>,
        children: &[Child],
        errors: &mut u32,
        budget: &mut Budget,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> (Matcher, Matcher) {
        let mut read = |name: &str| match children.binary_search_by(|c| c.name.as_str().cmp(name)) {
            Ok(i) => self.ignore_file(
                IgnoreAt {
                    dir: dir.as_fd(),
                    dev,
                    host,
                    real_rel,
                    name,
                    ino: Some(children[i].ino),
                },
                errors,
                budget,
                cancel,
            ),
            Err(_) => Matcher::default(),
        };
        (read(".ignore"), read(".gitignore"))
    }

    /// One ignore file's matcher, read only when the guest could read it too: a regular file
    /// (or a symlink to one) inside a preopen, not denied, not too large; and only as much of
    /// it as the walk's budget still allows.
    fn ignore_file(
        &self,
        at: IgnoreAt<'_>,
        errors: &mut u32,
        budget: &mut Budget,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Matcher {
        let path = at.host.join(at.name);
        let shown = match at.real_rel {
            Some("") => at.name.to_string(),
            Some(rel) => format!("{rel}/{}", at.name),
            None => path.display().to_string(),
        };
        let Some(file) = self.open_ignore_file(&at, &path, &shown) else {
            return Matcher::default();
        };
        let Ok(stat) = rustix::fs::fstat(&file) else {
            return Matcher::default();
        };
        let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
        if size > MAX_IGNORE_FILE_BYTES {
            *errors += 1;
            return Matcher::default();
        }
        if budget.patterns == 0 || budget.bytes == 0 || budget.late(cancel) {
            self.cut(shown);
            return Matcher::default();
        }
        let mut text = Vec::new();
        {
            use std::io::Read as _;
            let mut file = std::fs::File::from(file);
            if (&mut file)
                .take(MAX_IGNORE_FILE_BYTES + 1)
                .read_to_end(&mut text)
                .is_err()
                || text.len() as u64 > MAX_IGNORE_FILE_BYTES
            {
                *errors += 1;
                return Matcher::default();
            }
        }
        let text = String::from_utf8_lossy(&text);
        let mut chunks = Vec::new();
        let mut builder = GitignoreBuilder::new(at.host);
        let mut in_chunk = 0usize;
        let mut cut = false;
        for (i, line) in text.lines().enumerate() {
            let line = if i == 0 {
                line.trim_start_matches('\u{feff}')
            } else {
                line
            };
            let pattern = !line.trim().is_empty() && !line.starts_with('#');
            if !pattern {
                continue;
            }
            if budget.patterns == 0 || line.len() + 1 > budget.bytes {
                cut = true;
                break;
            }
            budget.patterns -= 1;
            budget.bytes -= line.len() + 1;
            if builder.add_line(Some(path.clone()), line).is_err() {
                *errors += 1;
            }
            in_chunk += 1;
            if in_chunk == IGNORE_CHUNK {
                chunks.push(builder.build().unwrap_or_else(|_| {
                    *errors += 1;
                    Gitignore::empty()
                }));
                builder = GitignoreBuilder::new(at.host);
                in_chunk = 0;
                if budget.late(cancel) {
                    cut = true;
                    break;
                }
            }
        }
        if in_chunk > 0 {
            chunks.push(builder.build().unwrap_or_else(|_| {
                *errors += 1;
                Gitignore::empty()
            }));
        }
        if cut {
            self.cut(shown);
        }
        Matcher(chunks)
    }

    /// Open an ignore file through its directory's descriptor without blocking: the listed
    /// file itself (a regular file, not denied); or, for a symlink, what it leads to when that
    /// is a regular file whose real path is inside a preopen and not denied.
    #[allow(clippy::unnecessary_cast)]
    fn open_ignore_file(&self, at: &IgnoreAt<'_>, path: &Path, shown: &str) -> Option<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        match rustix::fs::openat(at.dir, at.name, flags | OFlags::NOFOLLOW, Mode::empty()) {
            Ok(fd) => {
                let stat = rustix::fs::fstat(&fd).ok()?;
                if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                    return None;
                }
                // Not what the listing named (swapped since): not read.
                if at
                    .ino
                    .is_some_and(|ino| stat.st_dev as u64 == at.dev && stat.st_ino as u64 != ino)
                {
                    return None;
                }
                let allowed = match (&self.deny, at.real_rel) {
                    (Some(deny), Some(_)) => !deny.denied(shown, 0, Access::Read),
                    (Some(_), None) => false,
                    (None, _) => true,
                };
                allowed.then_some(fd)
            }
            Err(rustix::io::Errno::LOOP) => {
                // A symlink: judged by what was opened, so a swap cannot make the host read
                // elsewhere.
                let fd = rustix::fs::openat(at.dir, at.name, flags, Mode::empty()).ok()?;
                let stat = rustix::fs::fstat(&fd).ok()?;
                if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                    return None;
                }
                let real = real_path(&fd, path)?;
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
                allowed.then_some(fd)
            }
            Err(_) => None,
        }
    }

    /// Note that `shown`'s patterns were cut (once per call).
    fn cut(&self, shown: String) {
        if let Ok(mut cut) = self.cut.lock() {
            if !cut.contains(&shown) && cut.len() < 64 {
                cut.push(shown);
            }
        }
    }
}

/// Whether the ignore files of the walked directories and the start's parents skip `path`:
/// the closest `.ignore` that has an opinion decides, else the closest `.gitignore`.
fn ignored(stack: &[Dir], parents: &[(Matcher, Matcher)], path: &Path, is_dir: bool) -> bool {
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

/// Open the canonical directory `root` (a preopen's root) so that any symlink on the way
/// fails.
fn open_root(root: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        match rustix::fs::openat2(
            rustix::fs::CWD,
            root,
            flags,
            Mode::empty(),
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ) {
            Ok(fd) => return Ok(fd),
            // No `openat2` (Linux before 5.6): the last component at least must not be a
            // symlink.
            Err(rustix::io::Errno::NOSYS) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(rustix::fs::openat(
        rustix::fs::CWD,
        root,
        flags | OFlags::NOFOLLOW,
        Mode::empty(),
    )?)
}

#[allow(clippy::unnecessary_cast)]
fn fstat_dev(fd: &OwnedFd) -> u64 {
    rustix::fs::fstat(fd).map_or(0, |s| s.st_dev as u64)
}

/// Open the directory `name` of `parent` (never following a symlink) when it still is the
/// object the listing named: inode `ino`, unless it is a mount point (another filesystem than
/// `parent_dev`, where the listed inode is the covered directory's). Its descriptor and
/// filesystem.
#[allow(clippy::unnecessary_cast)]
fn open_listed_dir(
    parent: BorrowedFd<'_>,
    name: &str,
    ino: u64,
    parent_dev: u64,
) -> std::io::Result<(OwnedFd, u64)> {
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let stat = rustix::fs::fstat(&fd)?;
    let dev = stat.st_dev as u64;
    if dev == parent_dev && stat.st_ino as u64 != ino {
        return Err(std::io::Error::other(format!(
            "`{name}` was replaced while it was being listed"
        )));
    }
    Ok((fd, dev))
}

/// The entries of the directory open as `dir`, in name order, each with its listed inode.
/// Names that are not UTF-8 are left out (a WASI guest cannot name them either) and counted
/// in `unnamed`, so the tools report them as unreadable instead of dropping them silently.
fn read_children(
    dir: BorrowedFd<'_>,
    buf: &mut Vec<std::mem::MaybeUninit<u8>>,
    unnamed: &mut u32,
) -> std::io::Result<Vec<Child>> {
    let mut children = Vec::new();
    let mut push = |name: &std::ffi::CStr, file_type: FileType, ino: u64| {
        let Ok(name) = name.to_str() else {
            *unnamed = unnamed.saturating_add(1);
            return;
        };
        if name == "." || name == ".." {
            return;
        }
        // The entry's own type, never following a symlink: a symlink to a directory is not a
        // directory. Filesystems that do not report it are asked without following.
        let is_dir = match file_type {
            FileType::Directory => true,
            FileType::Unknown => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory),
            _ => false,
        };
        children.push(Child {
            name: name.to_string(),
            kind: if is_dir { Kind::Dir } else { Kind::Other },
            ino,
        });
    };
    #[cfg(target_os = "linux")]
    {
        if buf.len() < 32 << 10 {
            buf.resize(32 << 10, std::mem::MaybeUninit::uninit());
        }
        let mut listing = rustix::fs::RawDir::new(dir, buf.as_mut_slice());
        while let Some(entry) = listing.next() {
            let entry = entry?;
            push(entry.file_name(), entry.file_type(), entry.ino());
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = buf;
        for entry in rustix::fs::Dir::read_from(dir)? {
            let Ok(entry) = entry else { continue };
            push(entry.file_name(), entry.file_type(), entry.ino());
        }
    }
    children.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    Ok(children)
}

/// The real path of an open file (Linux: what the kernel says the descriptor is).
#[cfg(target_os = "linux")]
fn real_path(file: &OwnedFd, _path: &Path) -> Option<PathBuf> {
    use std::os::fd::AsRawFd as _;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
fn real_path(_file: &OwnedFd, path: &Path) -> Option<PathBuf> {
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

#[cfg(test)]
#[path = "walk_tests.rs"]
mod tests;
