//! Unit tests of `sandbox::walk`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::ignores::IGNORE_CHUNK;
use super::listing::{open_root, read_children, Kind};
use super::*;
use crate::workspace::{Workspace, GUEST_ROOT};
use ignore::gitignore::GitignoreBuilder;
use rustix::fd::AsFd as _;
use std::path::{Path, PathBuf};

pub(super) fn opts() -> w::Options {
    w::Options {
        max_depth: None,
        ignore: Vec::new(),
        no_ignore_files: false,
        with_mtime: false,
        resume: None,
    }
}

pub(super) fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A workspace with secrets, ignore files, default ignores and symlinks; the scope
/// preopens the workspace (or `only`, a subdirectory) at the guest root.
pub(super) fn fixture(
    only: Option<&str>,
) -> (tempfile::TempDir, tempfile::TempDir, PathBuf, WalkScope) {
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
        ..WalkScope::default()
    };
    (dir, outside, root, scope)
}

pub(super) fn names(listing: &w::Listing) -> Vec<String> {
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
    let l = scope.list("/workspace", &opts(), None, None).unwrap();
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
    let l = scope.list("/workspace/src/b", &opts(), None, None).unwrap();
    assert_eq!(names(&l), [".gitignore", "y.rs"]);
    assert_eq!(l.entries[0].depth, 1);
    let mut o = opts();
    o.max_depth = Some(1);
    o.ignore = vec!["docs".into(), "*.yml".into()];
    let l = scope.list("/workspace", &o, None, None).unwrap();
    assert_eq!(
        names(&l),
        [".github/", ".gitignore", "alias", "certs/", "out", "src/"]
    );
    let mut o = opts();
    o.no_ignore_files = true;
    let l = scope.list("/workspace/src", &o, None, None).unwrap();
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
        let e = scope.list(start, &opts(), None, None).unwrap_err();
        assert!(e.contains(start), "{start}: {e}");
    }
    let outside = outside.path().to_string_lossy().into_owned();
    assert!(scope.list(&outside, &opts(), None, None).is_err());
    // A symlink to a directory inside the workspace is walked as its target.
    let l = scope
        .list("/workspace/alias/b", &opts(), None, None)
        .unwrap();
    assert_eq!(names(&l), [".gitignore", "y.rs"]);
}

#[test]
fn lists_only_inside_the_call_grant() {
    let (_d, _o, _root, scope) = fixture(Some("src"));
    assert!(scope.list("/workspace", &opts(), None, None).is_err());
    assert!(scope.list("/workspace/docs", &opts(), None, None).is_err());
    // The root's .gitignore lies outside the preopen: the guest could not read it either.
    let l = scope.list("/workspace/src", &opts(), None, None).unwrap();
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
    let whole = names(&scope.list("/workspace", &opts(), None, None).unwrap());
    let mut got = Vec::new();
    let mut o = opts();
    loop {
        let l = scope.list_paged("/workspace", &o, None, None, 2).unwrap();
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
    std::os::unix::fs::symlink(outside.path().join("rules"), root.join("docs/.gitignore")).unwrap();
    std::os::unix::fs::symlink(".env", root.join("notes/.gitignore")).unwrap();
    let l = scope.list("/workspace/docs", &opts(), None, None).unwrap();
    assert_eq!(names(&l), [".gitignore", "a.md"]);
    let l = scope.list("/workspace/notes", &opts(), None, None).unwrap();
    assert_eq!(names(&l), [".gitignore", "a.md"]);
    // A FIFO named .ignore does not hang the walk.
    let status = std::process::Command::new("mkfifo")
        .arg(root.join("src/b/.ignore"))
        .status()
        .unwrap();
    assert!(status.success());
    let l = scope.list("/workspace/src/b", &opts(), None, None).unwrap();
    assert_eq!(names(&l), [".gitignore", ".ignore", "y.rs"]);
}

#[test]
fn reports_mtimes_when_asked() {
    let (_d, _o, _root, scope) = fixture(None);
    let mut o = opts();
    o.with_mtime = true;
    let l = scope.list("/workspace/docs", &o, None, None).unwrap();
    assert!(l.entries[0].mtime_ns.is_some_and(|t| t > 0));
    let l = scope.list("/workspace", &o, None, None).unwrap();
    assert!(l.entries.iter().all(|e| e.is_dir == e.mtime_ns.is_none()));
}

/// A large page's times are read on a second thread: each still belongs to its own entry,
/// in every page of a paged walk.
#[test]
fn a_large_walks_mtimes_belong_to_their_entries() {
    let (_d, _o, root, scope) = fixture(None);
    let base = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    for i in 0..1500u64 {
        let rel = format!("many/d{}/f{i:04}.txt", i % 7);
        put(&root, &rel, "");
        let f = std::fs::File::options()
            .write(true)
            .open(root.join(&rel))
            .unwrap();
        f.set_modified(base + std::time::Duration::from_secs(i * 3 + 1))
            .unwrap();
    }
    let mut o = opts();
    o.with_mtime = true;
    for page in [50_000, 700] {
        let mut seen = 0;
        o.resume = None;
        loop {
            let l = scope
                .list_paged("/workspace/many", &o, None, None, page)
                .unwrap();
            for e in &l.entries {
                if e.is_dir {
                    assert_eq!(e.mtime_ns, None, "{}", e.path);
                    continue;
                }
                let i: u64 = e.path.rsplit("/f").next().unwrap()[..4].parse().unwrap();
                assert_eq!(
                    e.mtime_ns,
                    Some((1_000_000_000 + i * 3 + 1) * 1_000_000_000),
                    "page size {page}: {}",
                    e.path
                );
                seen += 1;
            }
            if !l.truncated {
                break;
            }
            o.resume = l.resume.clone();
        }
        assert_eq!(seen, 1500, "page size {page}");
    }
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
    let names = |p: &Path| {
        open_root(p)
            .and_then(|fd| read_children(fd.as_fd(), &mut Vec::new(), &mut 0))
            .map(|c| c.into_iter().map(|c| c.name).collect::<Vec<_>>())
    };
    assert_eq!(names(&root.join("real")).unwrap(), ["a.txt"]);
    assert!(names(&root.join("swapped")).is_err());
    std::os::unix::fs::symlink(root.join("real"), root.join("link-in")).unwrap();
    assert!(names(&root.join("link-in")).is_err());
    let kinds = read_children(open_root(&root).unwrap().as_fd(), &mut Vec::new(), &mut 0).unwrap();
    assert!(kinds
        .iter()
        .any(|c| c.name == "real" && c.kind == Kind::Dir));
    assert!(kinds
        .iter()
        .any(|c| c.name == "swapped" && c.kind == Kind::Other));
}

/// A directory exchanged with a secret one between its parent's listing and its turn is
/// not entered: the walk opens it from the listed parent's descriptor and finds another
/// inode than the listing named.
#[cfg(target_os = "linux")]
#[test]
fn a_directory_exchanged_after_the_listing_is_not_entered() {
    let (_d, _o, root, scope) = fixture(None);
    put(&root, "d/plain.txt", "");
    put(&root, "src/.aws/credentials", "SECRET");
    put(&root, ".aws/credentials", "SECRET");
    put(&root, ".aws/secret-name", "");
    let mut walker = Walker::new(scope.clone(), "/workspace", WalkOptions::default()).unwrap();
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        root.join("d"),
        rustix::fs::CWD,
        root.join(".aws"),
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap();
    let mut seen = Vec::new();
    while let Some(f) = walker.next(None).unwrap() {
        seen.push(f.sub);
    }
    assert!(seen.contains(&"d".to_string()), "{seen:?}");
    assert!(!seen.iter().any(|s| s.starts_with("d/")), "{seen:?}");
    assert_eq!(walker.errors, 1);
    // A fresh walk: the secret directory is `d` now, and is still the secret (its identity
    // was seen under `.aws` when the walk started); the plain one is `.aws` and is denied by
    // name. Neither is listed.
    let l = scope.list("/workspace", &opts(), None, None).unwrap();
    assert!(
        !names(&l).iter().any(|n| n == "d" || n.starts_with("d/")),
        "{:?}",
        names(&l)
    );
    assert!(
        !names(&l).iter().any(|n| n.starts_with(".aws")),
        "{:?}",
        names(&l)
    );
    assert!(names(&l).contains(&"src/".to_string()), "{:?}", names(&l));
}

#[test]
fn ignore_patterns_past_the_budget_are_cut_and_named() {
    let (_d, _o, _root, mut scope) = fixture(None);
    // The root's `.gitignore` has two patterns; `src/.ignore` (`!keep.log`) and
    // `src/b/.gitignore` are cut, so `*.log` now hides `src/keep.log` and `x.rs` is listed.
    scope.ignore_patterns = 2;
    let l = scope.list("/workspace/src", &opts(), None, None).unwrap();
    assert_eq!(
        names(&l),
        [
            ".ignore",
            "b/",
            "b/.gitignore",
            "b/x.rs",
            "b/y.rs",
            "main.rs"
        ]
    );
    assert_eq!(
        scope.ignore_files_cut(),
        ["src/.ignore", "src/b/.gitignore"]
    );
    // Bytes count too, across files.
    let (_d, _o, _root, mut scope) = fixture(None);
    scope.ignore_bytes = 8;
    let l = scope.list("/workspace", &opts(), None, None).unwrap();
    assert!(names(&l).contains(&"gen/".to_string()), "{:?}", names(&l));
    assert!(!names(&l).contains(&"src/drop.log".to_string()));
    assert_eq!(
        scope.ignore_files_cut(),
        [".gitignore", "src/.ignore", "src/b/.gitignore"]
    );
    // A past deadline keeps nothing.
    let (_d, _o, _root, mut scope) = fixture(None);
    scope.deadline = Some(Instant::now());
    scope.list("/workspace", &opts(), None, None).unwrap();
    assert_eq!(
        scope.ignore_files_cut(),
        [".gitignore", "src/.ignore", "src/b/.gitignore"]
    );
}

/// A file of many chunks decides as one file: the last matching pattern wins.
#[test]
fn a_long_ignore_file_matches_as_one() {
    let (_d, _o, root, scope) = fixture(None);
    let mut text = String::from("*.txt\n");
    for i in 0..(IGNORE_CHUNK * 2 + 10) {
        text.push_str(&format!("zz{i}\n"));
    }
    text.push_str("!keep.txt\n");
    put(&root, "long/.gitignore", &text);
    put(&root, "long/keep.txt", "");
    put(&root, "long/drop.txt", "");
    let l = scope.list("/workspace/long", &opts(), None, None).unwrap();
    assert_eq!(names(&l), [".gitignore", "keep.txt"]);
    assert!(scope.ignore_files_cut().is_empty());
}

/// How much host memory compiled patterns take per byte of their text (printed; run with
/// `--ignored --nocapture`): the basis of `IGNORE_MEMORY_PER_BYTE` in `walk/ignores.rs`.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "a measurement, not a check"]
fn ignore_memory_per_byte() {
    let rss = || {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| {
                v.trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse::<usize>()
                    .ok()
            })
            .unwrap()
            * 1024
    };
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!("some/dir-{i}/**/*.generated-{i}\n"));
    }
    let before = rss();
    let mut builder = GitignoreBuilder::new("/x");
    for line in text.lines() {
        builder.add_line(None, line).unwrap();
    }
    let g = builder.build().unwrap();
    let after = rss();
    println!(
        "{} bytes of patterns: {} bytes of memory, {} per byte",
        text.len(),
        after - before,
        (after - before) / text.len()
    );
    drop(g);
}
