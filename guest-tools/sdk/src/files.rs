//! Every file below a directory, with its contents, for tools that search them all (`grep`).
//!
//! With the `host-read-ahead` feature, inside a component, the host walks the directory (the
//! rules of [`crate::walk`]) and reads the files on a thread of its own
//! (`toolgate:search/read-ahead`), ahead of the tool: reading the next files overlaps with
//! searching the current ones. Files the host did not read (symlinks, files that are not
//! regular, very large ones) come as [`Contents::NotRead`]: open them yourself, through
//! `wasi:filesystem`, where the host's filesystem guard decides. Otherwise (and in native
//! tests) the walk is [`crate::walk::walk`] and every file is `NotRead`.
//!
//! [`files_sifted`] (`toolgate:search/read-ahead@0.2.0`) also lets the host, which reads on
//! several threads, sort out the files the tool need not see ([`Sift`]): binary ones and ones
//! without any of the tool's needles come without their contents ([`Contents::Binary`],
//! [`Contents::NoNeedle`]). The files still come in walk order.

use crate::walk::{self, Options};
use crate::Context;
use std::path::{Path, PathBuf};

/// The interface's generated bindings.
#[cfg(all(feature = "host-read-ahead", target_arch = "wasm32"))]
#[doc(hidden)]
pub mod __wit {
    wit_bindgen::generate!({
        path: "../../tools-wit/wit/search/since_v0.1.0",
        world: "read-ahead-host",
    });
}

/// The interface's generated bindings, version 0.2.0.
#[cfg(all(feature = "host-read-ahead", target_arch = "wasm32"))]
#[doc(hidden)]
pub mod __wit2 {
    wit_bindgen::generate!({
        path: "../../tools-wit/wit/search/since_v0.2.0",
        world: "read-ahead-host",
    });
}

/// What the host may sort out while it reads (only where it reads ahead; elsewhere every file
/// comes `NotRead` and the tool decides).
#[derive(Debug, Default, Clone)]
pub struct Sift {
    /// When not 0: a file with a NUL byte in its first `binary_prefix` bytes comes as
    /// [`Contents::Binary`].
    pub binary_prefix: usize,
    /// When not empty: a file (not binary) that contains none of these comes as
    /// [`Contents::NoNeedle`]. Pass only strings every match must contain.
    pub needles: Vec<Vec<u8>>,
}

/// What is known of a file's contents.
#[derive(Debug)]
pub enum Contents {
    /// The whole file.
    Bytes(Vec<u8>),
    /// Larger than the `max_file_bytes` asked for: its size.
    TooLarge(u64),
    /// Not read: open it yourself.
    NotRead,
    /// Read by the host: binary ([`Sift::binary_prefix`]).
    Binary,
    /// Read by the host: none of [`Sift::needles`] is in it.
    NoNeedle,
}

/// One file found.
#[derive(Debug)]
pub struct File {
    /// The path inside the sandbox.
    pub path: PathBuf,
    /// The path relative to the workspace root, `/`-separated.
    pub rel: String,
    pub contents: Contents,
}

/// A filter on files: a glob on the file name, or, when it contains `/`, on the path below the
/// walk's start (the host applies the same rule, from `toolgate-walk-rules`).
pub use toolgate_walk_rules::Include;

/// Visit every file below the directory `start` (a sandbox path) that passes `include`, in walk
/// order (names in byte order, depth first), with its contents when the host read them.
/// `visit` returns false to stop. Returns the number of entries that could not be read
/// (skipped); a start the host refuses counts as one. When the host cannot read ahead, the
/// files come from [`walk::walk`], all `NotRead`.
pub fn files(
    cx: &Context,
    start: &Path,
    include: Option<&Include>,
    max_file_bytes: u64,
    visit: impl FnMut(File) -> bool,
) -> usize {
    #[cfg(all(feature = "host-read-ahead", target_arch = "wasm32"))]
    {
        read_ahead(cx, start, include, max_file_bytes, visit)
    }
    #[cfg(not(all(feature = "host-read-ahead", target_arch = "wasm32")))]
    {
        let _ = max_file_bytes;
        walked(cx, start, include, visit)
    }
}

/// [`files`], with the host sorting out what `sift` says while it reads (0.2.0). Without the
/// read-ahead every file comes `NotRead`, as from [`files`].
pub fn files_sifted(
    cx: &Context,
    start: &Path,
    include: Option<&Include>,
    max_file_bytes: u64,
    sift: &Sift,
    visit: impl FnMut(File) -> bool,
) -> usize {
    #[cfg(all(feature = "host-read-ahead", target_arch = "wasm32"))]
    {
        read_ahead_sifted(cx, start, include, max_file_bytes, sift, visit)
    }
    #[cfg(not(all(feature = "host-read-ahead", target_arch = "wasm32")))]
    {
        let _ = (max_file_bytes, sift);
        walked(cx, start, include, visit)
    }
}

/// The files of [`walk::walk`], none of them read.
fn walked(
    cx: &Context,
    start: &Path,
    include: Option<&Include>,
    mut visit: impl FnMut(File) -> bool,
) -> usize {
    walk::walk(cx, start, &Options::default(), |entry| {
        if entry.is_dir {
            return true;
        }
        if let Some(include) = include {
            let under = entry
                .path
                .strip_prefix(start)
                .map(|p| p.to_string_lossy())
                .unwrap_or_default();
            if !include.matches(&under) {
                return true;
            }
        }
        visit(File {
            path: entry.path,
            rel: entry.rel,
            contents: Contents::NotRead,
        })
    })
}

#[cfg(all(feature = "host-read-ahead", target_arch = "wasm32"))]
fn read_ahead(
    cx: &Context,
    start: &Path,
    include: Option<&Include>,
    max_file_bytes: u64,
    mut visit: impl FnMut(File) -> bool,
) -> usize {
    use __wit::toolgate::search::read_ahead as ra;
    let reader = match ra::open(
        &start.to_string_lossy(),
        &ra::Options {
            include_glob: include.map(|i| i.glob().to_string()),
            max_file_bytes,
        },
    ) {
        Ok(reader) => reader,
        // Refused (a start the walk refuses too, another reader open) or no thread: the same
        // files through the walk, read by the tool itself.
        Err(_) => return walked(cx, start, include, visit),
    };
    let mut errors = 0usize;
    loop {
        let batch = reader.next();
        errors += batch.errors as usize;
        for file in batch.files {
            let path = start.join(&file.path);
            let rel = cx.relative(&path);
            // No deny-list check here, as in the host walk (`walk.rs`): the host applied it to
            // the real paths, which are these.
            // The host filtered by `include` already; the tool decides.
            if include.is_some_and(|i| !i.matches(&file.path)) {
                continue;
            }
            let contents = match file.contents {
                ra::Contents::Bytes(b) => Contents::Bytes(b),
                ra::Contents::TooLarge(n) => Contents::TooLarge(n),
                ra::Contents::NotRead => Contents::NotRead,
            };
            if !visit(File {
                path,
                rel,
                contents,
            }) {
                return errors;
            }
        }
        if batch.done {
            return errors;
        }
    }
}

#[cfg(all(feature = "host-read-ahead", target_arch = "wasm32"))]
fn read_ahead_sifted(
    cx: &Context,
    start: &Path,
    include: Option<&Include>,
    max_file_bytes: u64,
    sift: &Sift,
    mut visit: impl FnMut(File) -> bool,
) -> usize {
    use __wit2::toolgate::search::read_ahead as ra;
    let reader = match ra::open(
        &start.to_string_lossy(),
        &ra::Options {
            include_glob: include.map(|i| i.glob().to_string()),
            max_file_bytes,
            binary_prefix: u32::try_from(sift.binary_prefix).unwrap_or(u32::MAX),
            needles: sift.needles.clone(),
        },
    ) {
        Ok(reader) => reader,
        // Refused (a start the walk refuses too, another reader open) or no thread: the same
        // files through the walk, read by the tool itself.
        Err(_) => return walked(cx, start, include, visit),
    };
    let mut errors = 0usize;
    loop {
        let batch = reader.next();
        errors += batch.errors as usize;
        for file in batch.files {
            let path = start.join(&file.path);
            let rel = cx.relative(&path);
            // No deny-list check here, as in the host walk (`walk.rs`): the host applied it to
            // the real paths, which are these.
            // The host filtered by `include` already; the tool decides.
            if include.is_some_and(|i| !i.matches(&file.path)) {
                continue;
            }
            let contents = match file.contents {
                ra::Contents::Bytes(b) => Contents::Bytes(b),
                ra::Contents::TooLarge(n) => Contents::TooLarge(n),
                ra::Contents::NotRead => Contents::NotRead,
                ra::Contents::Binary => Contents::Binary,
                ra::Contents::NoNeedle => Contents::NoNeedle,
            };
            if !visit(File {
                path,
                rel,
                contents,
            }) {
                return errors;
            }
        }
        if batch.done {
            return errors;
        }
    }
}
