//! Unit tests of `sandbox::walk`: `files-matching` (walk@0.2.0), and a large walk split over
//! two threads giving the walker's own walk.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tests::{fixture, names, opts, put};
use super::walker::WalkOptions;
use super::*;

/// The walk of one walker alone from `start` (no paging, no split), directories with a `/`.
fn lone_walk(scope: &WalkScope, start: &str) -> Vec<String> {
    let mut walker = Walker::new(scope.clone(), start, WalkOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(f) = walker.next(None).unwrap() {
        out.push(if f.is_dir {
            format!("{}/", f.sub)
        } else {
            f.sub
        });
    }
    out
}

/// `files-matching` (walk@0.2.0): only the files whose path below the start matches come
/// back, in walk order, each with its time; directories are walked but not returned, and the
/// rules (ignore files, deny-list, default ignores) still hold.
#[test]
fn files_matching_returns_only_the_matching_files() {
    let (_d, _o, _root, scope) = fixture(None);
    let mut o = opts();
    o.with_mtime = true;
    let all = scope.list("/workspace", &o, None, None).unwrap();
    let rs = toolgate_walk_rules::files_matching("**/*.rs").unwrap();
    let want: Vec<String> = all
        .entries
        .iter()
        .filter(|e| !e.is_dir && rs.is_match(&e.path))
        .map(|e| e.path.clone())
        .collect();
    assert_eq!(want, ["src/b/y.rs", "src/main.rs"], "the fixture changed");
    let l = scope.list("/workspace", &o, Some(&rs), None).unwrap();
    let got: Vec<String> = l.entries.iter().map(|e| e.path.clone()).collect();
    assert_eq!(got, want);
    assert!(l.entries.iter().all(|e| !e.is_dir && e.mtime_ns.is_some()));
    // `*` does not cross `/`; the path is relative to the start.
    let one = toolgate_walk_rules::files_matching("*/*.rs").unwrap();
    let l = scope.list("/workspace", &o, Some(&one), None).unwrap();
    assert_eq!(names(&l), ["src/main.rs"]);
    let l = scope.list("/workspace/src", &o, Some(&one), None).unwrap();
    assert_eq!(names(&l), ["b/y.rs"]);
    // Paged one entry at a time, the pages add up to the same files.
    let mut paged = Vec::new();
    o.resume = None;
    loop {
        let l = scope
            .list_paged("/workspace", &o, Some(&rs), None, 1)
            .unwrap();
        paged.extend(l.entries.iter().map(|e| e.path.clone()));
        if !l.truncated {
            break;
        }
        o.resume = l.resume.clone();
    }
    assert_eq!(paged, want);
    // Nothing the rules hide is matched into view: secrets, ignored and pruned files.
    let every = toolgate_walk_rules::files_matching("**").unwrap();
    let l = scope
        .list("/workspace", &opts(), Some(&every), None)
        .unwrap();
    let got = names(&l);
    for hidden in [
        ".env",
        "src/drop.log",
        "gen/out.rs",
        "node_modules/m/index.js",
        "src/.ssh/id_ed25519",
        "certs/server.pem",
    ] {
        assert!(!got.iter().any(|g| g == hidden), "{hidden} in {got:?}");
    }
    assert!(got.iter().any(|g| g == "src/keep.log"), "{got:?}");
}

/// On a larger tree, listings (whole and paged at several sizes) give the walker's own walk,
/// in its order: ignore files, the deny-list and default ignores included.
#[test]
fn listings_give_the_walkers_walk_on_a_larger_tree() {
    let (_d, _o, root, scope) = fixture(None);
    for a in 0..12 {
        for b in 0..4 {
            put(&root, &format!("tree/d{a:02}/e{b}/f.rs"), "");
            put(&root, &format!("tree/d{a:02}/e{b}/g.txt"), "");
            put(&root, &format!("tree/d{a:02}/e{b}/deep/h.rs"), "");
        }
        put(&root, &format!("tree/d{a:02}-x/f.rs"), "");
    }
    put(&root, "tree/.gitignore", "d03/\n*.txt\n");
    put(&root, "tree/d05/.ignore", "e1/\n");
    put(&root, "tree/d07/.ssh/id_rsa", "");
    put(&root, "tree/d08/node_modules/x/y.js", "");
    let alone = |start: &str| lone_walk(&scope, start);
    for start in ["/workspace", "/workspace/tree", "/workspace/tree/d05"] {
        let want = alone(start);
        assert!(
            want.len() > 20 || start.ends_with("d05"),
            "{start}: {want:?}"
        );
        assert_eq!(
            names(&scope.list(start, &opts(), None, None).unwrap()),
            want,
            "{start}"
        );
        for page in [1, 7, 50] {
            let mut got = Vec::new();
            let mut o = opts();
            loop {
                let l = scope.list_paged(start, &o, None, None, page).unwrap();
                got.extend(names(&l));
                if !l.truncated {
                    break;
                }
                o.resume = l.resume.clone();
            }
            assert_eq!(got, want, "{start}, pages of {page}");
        }
    }
    // Only matching files, timed, also from the later half of a split walk.
    let rs = toolgate_walk_rules::files_matching("**/*.rs").unwrap();
    let want: Vec<String> = alone("/workspace/tree")
        .into_iter()
        .filter(|n| !n.ends_with('/') && rs.is_match(n))
        .collect();
    assert!(want.len() > 40, "{want:?}");
    for page in [3, 50_000] {
        let mut got = Vec::new();
        let mut o = opts();
        o.with_mtime = true;
        loop {
            let l = scope
                .list_paged("/workspace/tree", &o, Some(&rs), None, page)
                .unwrap();
            assert!(l.entries.iter().all(|e| e.mtime_ns.is_some_and(|t| t > 0)));
            got.extend(names(&l));
            if !l.truncated {
                break;
            }
            o.resume = l.resume.clone();
        }
        assert_eq!(got, want, "pages of {page}");
    }
    let all = names(&scope.list("/workspace/tree", &opts(), None, None).unwrap());
    assert!(!all
        .iter()
        .any(|n| n.starts_with("d03/") || n.ends_with(".txt")));
    assert!(!all
        .iter()
        .any(|n| n.contains(".ssh") || n.contains("node_modules")));
    assert!(!all.iter().any(|n| n.starts_with("d05/e1")));
    assert!(all.iter().any(|n| n == "d05/e2/deep/h.rs"));
    assert!(
        all.iter().position(|n| n == "d01/").unwrap()
            < all.iter().position(|n| n == "d01-x/").unwrap()
    );
}

/// A large walk split over two threads that runs out of ignore budget is done again on one
/// thread: which files are cut, and so the listing, is the same every time, and the same as a
/// lone walker's.
#[test]
fn a_split_walk_out_of_ignore_budget_is_the_same_every_time() {
    let (_d, _o, root, mut scope) = fixture(None);
    for a in 0..12 {
        put(&root, &format!("tree/d{a:02}/.gitignore"), "*.log\n*.tmp\n");
        put(&root, &format!("tree/d{a:02}/x.log"), "");
        put(&root, &format!("tree/d{a:02}/y.tmp"), "");
        put(&root, &format!("tree/d{a:02}/e/z.log"), "");
    }
    scope.ignore_patterns = 9;
    let want = lone_walk(&scope, "/workspace/tree");
    let want_cut = scope.ignore_files_cut();
    assert!(want_cut.len() >= 7, "{want_cut:?}");
    for _ in 0..8 {
        scope.cut = Arc::default();
        let l = scope.list("/workspace/tree", &opts(), None, None).unwrap();
        assert_eq!(names(&l), want);
        assert_eq!(scope.ignore_files_cut(), want_cut);
    }
}

/// Errors (here names that are not UTF-8, one per directory) are counted once over the pages
/// of a split walk, as by a lone walker, however the pages cut its parts.
#[test]
fn a_split_walks_errors_are_counted_once_over_its_pages() {
    use std::os::unix::ffi::OsStrExt as _;
    let (_d, _o, root, scope) = fixture(None);
    for a in 0..12 {
        put(&root, &format!("tree/d{a:02}/e/f.rs"), "");
        let bad = root
            .join(format!("tree/d{a:02}/e"))
            .join(std::ffi::OsStr::from_bytes(b"x\xff"));
        std::fs::write(bad, "").unwrap();
    }
    let mut walker = Walker::new(scope.clone(), "/workspace/tree", WalkOptions::default()).unwrap();
    while walker.next(None).unwrap().is_some() {}
    assert_eq!(walker.errors, 12);
    for page in [1, 2, 4, 5, 7, 8, 50_000] {
        let (mut errors, mut o) = (0, opts());
        loop {
            let l = scope
                .list_paged("/workspace/tree", &o, None, None, page)
                .unwrap();
            errors += l.errors;
            if !l.truncated {
                break;
            }
            o.resume = l.resume.clone();
        }
        assert_eq!(errors, 12, "pages of {page}");
    }
}
