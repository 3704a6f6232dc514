//! The host-assisted walk (`toolgate:fs/walk@0.1.0`, and `@0.2.0`, which adds
//! `files-matching`): the walking tools (`ls`, `glob`) ask the
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
//! Secrets are skipped by identity too: an entry whose (device, listed inode) is a deny-listed
//! file's or directory's, under any name (a secret directory exchanged with a plain one), is
//! neither returned nor entered, and a start through one is refused; the index is the
//! workspace's ([`crate::workspace::Workspace::secret_identity`]), looked up when the walk
//! starts.
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

mod ignores;
mod listing;
mod mtimes;
mod start;
mod walker;

pub(crate) use walker::{Found, WalkOptions, Walker};

use super::fsguard::FsDeny;
use super::wasi::Preopen;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::bindings::since_v0_1_0::fs::toolgate::fs::walk as w;
use super::bindings::since_v0_2_0::fs::toolgate::fs::walk as w2;

/// The interface a walking tool imports (any version).
pub const WALK_INTERFACE_PREFIX: &str = "toolgate:fs/walk";

/// Directory names never entered (the guests' own walk prunes the same list).
pub use toolgate_walk_rules::DEFAULT_IGNORES;

/// Most entries in one page.
const PAGE_ENTRIES: usize = 50_000;
/// Most path bytes in one page.
const PAGE_BYTES: usize = 8 << 20;
/// Longest `files-matching` glob (it is compiled in the host, outside the guest's deadline).
const MAX_FILES_GLOB: usize = 4096;
/// Parts a large walk from its start is split into, for two threads.
const CHUNKS: usize = 8;
/// Longest time spent in one page: the guest's epoch deadline cannot interrupt a host call, so
/// the host returns to the guest at least this often.
const PAGE_TIME: Duration = Duration::from_secs(1);

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

    fn list(
        &self,
        start: &str,
        options: &w::Options,
        files: Option<&globset::GlobMatcher>,
        cancel: Option<&std::sync::atomic::AtomicBool>,
    ) -> Result<w::Listing, String> {
        self.list_paged(start, options, files, cancel, PAGE_ENTRIES)
    }

    /// [`WalkScope::list`] with pages of at most `page_entries` entries. With `files`, only the
    /// non-directory entries whose path below the start it matches are returned (and timed).
    fn list_paged(
        &self,
        start: &str,
        options: &w::Options,
        files: Option<&globset::GlobMatcher>,
        cancel: Option<&std::sync::atomic::AtomicBool>,
        page_entries: usize,
    ) -> Result<w::Listing, String> {
        let ask = PageAsk {
            start,
            options,
            files,
            cancel,
            page_entries,
        };
        let cut_before = lock(&self.cut).len();
        let listing = self.list_page(&ask, true)?;
        // Which ignore files a split walk cuts at the budget depends on which thread got there
        // first; a listing is the same every time, so such a walk is done again on one thread.
        if listing.split && lock(&self.cut).len() > cut_before {
            lock(&self.cut).truncate(cut_before);
            return Ok(self.list_page(&ask, false)?.listing);
        }
        Ok(listing.listing)
    }

    /// One page, on two threads when `split` allows and the walk is large.
    fn list_page(&self, ask: &PageAsk<'_>, split: bool) -> Result<Paged, String> {
        let PageAsk {
            start,
            options,
            files,
            cancel,
            page_entries,
        } = *ask;
        let began = Instant::now();
        let mut walker = Walker::new_cancellable(
            self.clone(),
            start,
            WalkOptions {
                max_depth: options.max_depth,
                ignore: options.ignore.clone(),
                no_ignore_files: options.no_ignore_files,
                resume: options.resume.clone(),
            },
            cancel,
        )?;
        let mut page = Page {
            listing: w::Listing {
                entries: Vec::new(),
                errors: 0,
                truncated: false,
                resume: None,
            },
            bytes: 0,
            began,
            page_entries,
        };
        let later = if split {
            walker.split(CHUNKS)
        } else {
            Vec::new()
        };
        if !later.is_empty() {
            let mut chunks = vec![walker];
            chunks.extend(later);
            let listing = self.list_chunks(chunks, options.with_mtime, files, cancel, page)?;
            return Ok(Paged {
                listing,
                split: true,
            });
        }
        std::thread::scope(|scope| -> Result<(), String> {
            let mut times = options.with_mtime.then(|| mtimes::Mtimes::new(scope));
            while let Some(found) = walker.next(cancel)? {
                if passed_over(files, &found) {
                    // Walked, not returned; a page still ends in time (resuming after an entry
                    // that was not returned skips nothing that was due).
                    if began.elapsed() >= PAGE_TIME && walker.more() {
                        page.listing.truncated = true;
                        page.listing.resume = Some(found.sub);
                        break;
                    }
                    continue;
                }
                if let (Some(times), false) = (&mut times, found.is_dir) {
                    times.ask(page.listing.entries.len(), &found.dir, found.name());
                }
                let entry = w::Entry {
                    path: found.sub,
                    is_dir: found.is_dir,
                    depth: found.depth,
                    mtime_ns: None,
                };
                if page.add(entry, walker.more()) {
                    break;
                }
            }
            if let Some(times) = times {
                for (i, mtime) in times.finish() {
                    if let Some(entry) = page.listing.entries.get_mut(i) {
                        entry.mtime_ns = mtime;
                    }
                }
            }
            Ok(())
        })?;
        let mut listing = page.listing;
        listing.errors = walker.errors;
        Ok(Paged {
            listing,
            split: false,
        })
    }

    /// A walk split into `chunks` (consecutive parts of the walk order), walked by this thread
    /// and a second one, each taking the next chunk left; the page is then filled from the
    /// chunks in order. A chunk stops at a page's bounds, and so does every chunk after one that
    /// stopped.
    fn list_chunks(
        &self,
        chunks: Vec<Walker>,
        with_mtime: bool,
        files: Option<&globset::GlobMatcher>,
        cancel: Option<&AtomicBool>,
        mut page: Page,
    ) -> Result<w::Listing, String> {
        let count = chunks.len();
        let slots: Vec<Mutex<Option<Walker>>> =
            chunks.into_iter().map(|c| Mutex::new(Some(c))).collect();
        let done: Vec<Mutex<Option<Result<PartFound, String>>>> =
            (0..count).map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let stopped = AtomicUsize::new(usize::MAX);
        let (held, held_bytes) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let bounds = Bounds {
            held: &held,
            held_bytes: &held_bytes,
            files,
            with_mtime,
            page_entries: page.page_entries,
            began: page.began,
            stopped: &stopped,
            cancel,
        };
        let work = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(slot) = slots.get(i) else {
                return;
            };
            if let Some(walker) = lock(slot).take() {
                let part = walk_chunk(walker, i, &bounds);
                *lock(&done[i]) = Some(part);
            }
        };
        std::thread::scope(|scope| {
            let helper = std::thread::Builder::new()
                .name("toolgate-walk-half".into())
                .spawn_scoped(scope, work)
                .ok();
            // Without a second thread, this one walks every chunk.
            work();
            if let Some(helper) = helper {
                let _ = helper.join();
            }
        });
        let mut errors = 0u32;
        let mut result = Ok(());
        for (i, slot) in done.iter().enumerate() {
            let part = match lock(slot).take() {
                Some(Ok(part)) => part,
                Some(Err(e)) => {
                    result = Err(e);
                    break;
                }
                None => {
                    result = Err("a part of the walk was not walked".to_string());
                    break;
                }
            };
            let n = part.items.len();
            let last = i + 1 == count;
            let mut full = false;
            for (k, (entry, errors_so_far)) in part.items.into_iter().enumerate() {
                let more = k + 1 < n || part.more || !last;
                if page.add(entry, more) {
                    // Only what was met up to here: the next page walks the rest again.
                    errors = errors.saturating_add(errors_so_far);
                    full = true;
                    break;
                }
            }
            if full {
                break;
            }
            errors = errors.saturating_add(part.errors);
            if part.more {
                page.listing.truncated = true;
                page.listing.resume = part.resume;
                break;
            }
        }
        result?;
        let mut listing = page.listing;
        listing.errors = errors;
        Ok(listing)
    }
}

/// What one page is asked for ([`WalkScope::list_paged`]).
#[derive(Clone, Copy)]
struct PageAsk<'a> {
    start: &'a str,
    options: &'a w::Options,
    files: Option<&'a globset::GlobMatcher>,
    cancel: Option<&'a AtomicBool>,
    page_entries: usize,
}

/// A page, and whether its walk was split over two threads.
struct Paged {
    listing: w::Listing,
    split: bool,
}

/// A listing being filled, within the page's entry, byte and time bounds.
struct Page {
    listing: w::Listing,
    bytes: usize,
    began: Instant,
    page_entries: usize,
}

impl Page {
    /// Add an entry; true when the page is full (it then says where to resume when `more`
    /// entries follow).
    fn add(&mut self, entry: w::Entry, more: bool) -> bool {
        self.bytes += entry.path.len() + 32;
        let full = self.listing.entries.len() + 1 >= self.page_entries
            || self.bytes >= PAGE_BYTES
            || self.began.elapsed() >= PAGE_TIME;
        if full && more {
            self.listing.truncated = true;
            self.listing.resume = Some(entry.path.clone());
        }
        self.listing.entries.push(entry);
        full
    }
}

/// Whether a found entry is walked but not returned: `files` asks for files, and it is a
/// directory or does not match.
fn passed_over(files: Option<&globset::GlobMatcher>, found: &Found) -> bool {
    files.is_some_and(|m| found.is_dir || !m.is_match(&found.sub))
}

/// What one chunk of a split walk found, in walk order: each entry (no directory held open
/// for it) with the chunk's error count when it was found.
#[derive(Default)]
struct PartFound {
    items: Vec<(w::Entry, u32)>,
    /// It stopped before its end (a page's bounds), after `resume`.
    more: bool,
    resume: Option<String>,
    errors: u32,
}

/// What every chunk of a split walk shares.
struct Bounds<'a> {
    files: Option<&'a globset::GlobMatcher>,
    with_mtime: bool,
    page_entries: usize,
    began: Instant,
    /// The first chunk that stopped at a page's bounds: the chunks after it stop too.
    stopped: &'a AtomicUsize,
    /// Entries and path bytes held by all chunks: at twice a page's bounds, a chunk stops as
    /// at its own (so a split walk holds at most about two pages).
    held: &'a AtomicUsize,
    held_bytes: &'a AtomicUsize,
    cancel: Option<&'a AtomicBool>,
}

/// Walk chunk `index` to its end or a page's bounds, timing the files it returns.
fn walk_chunk(mut w: Walker, index: usize, b: &Bounds<'_>) -> Result<PartFound, String> {
    let mut part = PartFound::default();
    let mut bytes = 0usize;
    while let Some(found) = w.next(b.cancel)? {
        if b.stopped.load(Ordering::Relaxed) < index {
            // An earlier chunk fills the page: nothing of this one is returned.
            break;
        }
        let mut skipped = None;
        if passed_over(b.files, &found) {
            skipped = Some(found.sub);
        } else {
            bytes += found.sub.len() + 32;
            b.held.fetch_add(1, Ordering::Relaxed);
            b.held_bytes
                .fetch_add(found.sub.len() + 32, Ordering::Relaxed);
            let mtime = (b.with_mtime && !found.is_dir)
                .then(|| mtimes::mtime_at(&found.dir, found.name()))
                .flatten();
            let entry = w::Entry {
                path: found.sub,
                is_dir: found.is_dir,
                depth: found.depth,
                mtime_ns: mtime,
            };
            part.items.push((entry, w.errors));
        }
        if part.items.len() >= b.page_entries
            || bytes >= PAGE_BYTES
            || b.held.load(Ordering::Relaxed) >= 2 * b.page_entries
            || b.held_bytes.load(Ordering::Relaxed) >= 2 * PAGE_BYTES
            || b.began.elapsed() >= PAGE_TIME
        {
            if w.more() {
                part.more = true;
                // Resume after the last entry walked, returned or not.
                part.resume = skipped.or_else(|| part.items.last().map(|(e, _)| e.path.clone()));
                b.stopped.fetch_min(index, Ordering::Relaxed);
            }
            break;
        }
    }
    part.errors = w.errors;
    Ok(part)
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl w::Host for super::CallState {
    fn list_entries(&mut self, start: String, options: w::Options) -> Result<w::Listing, String> {
        self.walk.list(&start, &options, None, self.cancel.flag())
    }
}

impl w2::Host for super::CallState {
    fn list_entries(&mut self, start: String, options: w2::Options) -> Result<w2::Listing, String> {
        if let Some(glob) = options.files_matching.as_deref() {
            if glob.len() > MAX_FILES_GLOB {
                return Err(format!(
                    "files-matching: the glob is {} bytes, over the {MAX_FILES_GLOB} a walk accepts",
                    glob.len()
                ));
            }
        }
        let files = options
            .files_matching
            .as_deref()
            .map(toolgate_walk_rules::files_matching)
            .transpose()
            .map_err(|e| format!("files-matching: {e}"))?;
        let options = w::Options {
            max_depth: options.max_depth,
            ignore: options.ignore,
            no_ignore_files: options.no_ignore_files,
            with_mtime: options.with_mtime,
            resume: options.resume,
        };
        let listing = self
            .walk
            .list(&start, &options, files.as_ref(), self.cancel.flag())?;
        Ok(w2::Listing {
            entries: listing
                .entries
                .into_iter()
                .map(|e| w2::Entry {
                    path: e.path,
                    is_dir: e.is_dir,
                    depth: e.depth,
                    mtime_ns: e.mtime_ns,
                })
                .collect(),
            errors: listing.errors,
            truncated: listing.truncated,
            resume: listing.resume,
        })
    }
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "walk_parts_tests.rs"]
mod parts_tests;
