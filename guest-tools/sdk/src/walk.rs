//! Walking the workspace the way a developer expects: `.gitignore` and `.ignore` honoured,
//! default ignores (`.git`, `node_modules`, `target`, `dist`, `.toolgate`) skipped, the host's
//! deny-list skipped, entries sorted by name.
//!
//! With the `host-walk` feature, inside a component, the listing comes from the host
//! (`toolgate:fs/walk`), which walks natively with the same rules and only inside the call's
//! preopens; the tool still opens every file itself. Otherwise (and in native tests) the walk
//! runs here, through `std::fs`, with the `ignore` crate.

use crate::Context;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The generated bindings of `toolgate:fs/walk@0.2.0`.
#[cfg(all(feature = "host-walk", target_arch = "wasm32"))]
#[doc(hidden)]
pub mod __wit {
    wit_bindgen::generate!({
        path: "../../tools-wit/wit/fs/since_v0.2.0",
        world: "walk-host",
    });
}

/// Directory names skipped by every walking tool unless the caller asks otherwise (the same
/// list the host walk prunes, from `toolgate-walk-rules`).
pub use toolgate_walk_rules::DEFAULT_IGNORES;

/// How [`Options::files_matching`] is compiled (the host's walk compiles it the same way).
pub use toolgate_walk_rules::files_matching;

/// One entry found by a walk.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The path inside the sandbox.
    pub path: PathBuf,
    /// The path relative to the workspace root, `/`-separated.
    pub rel: String,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Depth below the walk's start (the start is 0).
    pub depth: usize,
    /// Modification time (not following symlinks) of a non-directory, when
    /// [`Options::with_mtime`] was set and the host supplied it; `None` otherwise (stat the
    /// file yourself then).
    pub mtime: Option<SystemTime>,
}

/// Options for [`walk`].
#[derive(Debug, Default, Clone)]
pub struct Options {
    /// Deepest level to descend to (the start is 0); `None` for no limit.
    pub max_depth: Option<usize>,
    /// Extra names or globs to skip (matched against the file name and the relative path).
    pub ignore: Vec<String>,
    /// Skip `.gitignore`/`.ignore` handling.
    pub no_ignore_files: bool,
    /// Ask for each file's modification time along with the listing (host walk only).
    pub with_mtime: bool,
    /// Visit only the files (never directories) whose `/`-separated path below the walk's
    /// start matches this glob (`toolgate_walk_rules::files_matching`: `*` does not cross
    /// `/`, `**` does). The host's walk then lists, and times, only those. A glob that does not
    /// parse visits nothing and counts one unreadable entry.
    pub files_matching: Option<String>,
}

/// Walk `start` (a sandbox path), calling `visit` for every entry except `start` itself, in
/// name order. `visit` returns false to stop the walk. Unreadable entries are skipped and
/// counted in the returned number; so is an entry whose name is not UTF-8 (a WASI guest
/// cannot name it to open it; the host's walk leaves such names out too), with what is below
/// it. Print an entry's name through [`crate::names`].
pub fn walk(
    cx: &Context,
    start: &Path,
    options: &Options,
    visit: impl FnMut(Entry) -> bool,
) -> usize {
    #[cfg(all(feature = "host-walk", target_arch = "wasm32"))]
    {
        host_walk(cx, start, options, visit)
    }
    #[cfg(not(all(feature = "host-walk", target_arch = "wasm32")))]
    {
        local_walk(cx, start, options, visit)
    }
}

/// The walk done by the host, page by page. A start the host refuses (outside the preopens,
/// denied, not a directory) lists nothing and counts as one unreadable entry, as an unreadable
/// start does in the local walk.
#[cfg(all(feature = "host-walk", target_arch = "wasm32"))]
fn host_walk(
    cx: &Context,
    start: &Path,
    options: &Options,
    mut visit: impl FnMut(Entry) -> bool,
) -> usize {
    use __wit::toolgate::fs::walk as w;
    let start_text = start.to_string_lossy();
    let mut errors = 0usize;
    let mut resume: Option<String> = None;
    loop {
        let opts = w::Options {
            max_depth: options
                .max_depth
                .map(|d| u32::try_from(d).unwrap_or(u32::MAX)),
            ignore: options.ignore.clone(),
            no_ignore_files: options.no_ignore_files,
            with_mtime: options.with_mtime,
            files_matching: options.files_matching.clone(),
            resume: resume.take(),
        };
        let listing = match w::list_entries(&start_text, &opts) {
            Ok(listing) => listing,
            Err(_) => return errors + 1,
        };
        errors += listing.errors as usize;
        for e in listing.entries {
            let path = start.join(&e.path);
            let rel = cx.relative(&path);
            // No deny-list check here: the host applied it to the real paths, and they are the
            // paths named here (the host hands built-in tools canonical path arguments, and the
            // walk never follows a symlink). Matching every entry again cost glob ~10 %.
            let mtime = e
                .mtime_ns
                .map(|ns| SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(ns));
            if !visit(Entry {
                path,
                rel,
                is_dir: e.is_dir,
                depth: e.depth as usize,
                mtime,
            }) {
                return errors;
            }
        }
        match (listing.truncated, listing.resume) {
            (true, Some(r)) => resume = Some(r),
            _ => return errors,
        }
    }
}

/// The walk done in this process through `std::fs`.
#[cfg_attr(all(feature = "host-walk", target_arch = "wasm32"), allow(dead_code))]
fn local_walk(
    cx: &Context,
    start: &Path,
    options: &Options,
    mut visit: impl FnMut(Entry) -> bool,
) -> usize {
    let extra = toolgate_walk_rules::extra_globs(&options.ignore);
    let mut builder = ignore::WalkBuilder::new(start);
    builder
        .hidden(false)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .parents(true)
        .git_ignore(!options.no_ignore_files)
        .ignore(!options.no_ignore_files)
        .max_depth(options.max_depth)
        .sort_by_file_name(|a, b| a.cmp(b));
    let root = cx.root().to_path_buf();
    // Prune default-ignored directories and the caller's extra ignores inside the walker, so
    // their subtrees are never read (a `node_modules` can hold hundreds of thousands of files).
    // The deny-list needs the context, so it is checked in the loop below.
    {
        let extra = extra.clone();
        let root = root.clone();
        builder.filter_entry(move |entry| {
            if entry.depth() == 0 {
                return true;
            }
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            let name = entry.file_name().to_string_lossy();
            if is_dir && DEFAULT_IGNORES.contains(&name.as_ref()) {
                return false;
            }
            match &extra {
                Some(set) => {
                    if set.is_match(name.as_ref()) {
                        return false;
                    }
                    let rel = match entry.path().strip_prefix(&root) {
                        Ok(r) => r.to_string_lossy().replace('\\', "/"),
                        Err(_) => entry.path().to_string_lossy().into_owned(),
                    };
                    !set.is_match(&rel)
                }
                None => true,
            }
        });
    }
    let files = match options
        .files_matching
        .as_deref()
        .map(toolgate_walk_rules::files_matching)
        .transpose()
    {
        Ok(files) => files,
        Err(_) => return 1,
    };
    let denied = |rel: &str| cx.is_denied(rel);
    let mut errors = 0;
    // filter_entry needs 'static data; decide inside the loop instead and skip subtrees by
    // remembering pruned prefixes.
    let mut pruned: Vec<PathBuf> = Vec::new();
    for result in builder.build() {
        let entry = match result {
            Ok(entry) => entry,
            Err(_) => {
                errors += 1;
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        let path = entry.path();
        if pruned.iter().any(|p| path.starts_with(p)) {
            continue;
        }
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let Some(name) = entry.file_name().to_str() else {
            // Not UTF-8: `rel` would be lossy (two such names could look the same) and no
            // WASI path can name it. Counted, like an entry WASI's readdir refuses.
            errors += 1;
            if is_dir {
                pruned.push(path.to_path_buf());
            }
            continue;
        };
        let rel = match path.strip_prefix(&root) {
            Ok(r) => r.to_string_lossy().replace('\\', "/"),
            Err(_) => path.to_string_lossy().into_owned(),
        };
        let skip = (is_dir && DEFAULT_IGNORES.contains(&name))
            || denied(&rel)
            || extra
                .as_ref()
                .is_some_and(|set| set.is_match(name) || set.is_match(&rel));
        if skip {
            if is_dir {
                pruned.push(path.to_path_buf());
            }
            continue;
        }
        if let Some(files) = &files {
            let under = path.strip_prefix(start).unwrap_or(path);
            if is_dir || !files.is_match(under.to_string_lossy().replace('\\', "/")) {
                continue;
            }
        }
        let depth = entry.depth();
        if !visit(Entry {
            path: path.to_path_buf(),
            rel,
            is_dir,
            depth,
            mtime: None,
        }) {
            break;
        }
    }
    errors
}
