//! Unit tests of `workspace::view`: the finder's plan (secrets, hard links, git directories), its
//! cache, and its bounds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::walk::open_child;
use super::*;
use rustix::fs::FileType;
use rustix::io::Errno;
use std::fs;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `.env`, `*.pem`, `.ssh` and `secrets` anywhere, like the default deny-list.
fn secret(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == ".env" || name.ends_with(".pem") || name == ".ssh" || name == "secrets"
}

fn finder(root: &Path) -> Finder {
    Finder::new(root.to_path_buf(), Box::new(secret))
}

fn write(root: &Path, rel: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, "x").unwrap();
}

fn mkdir(root: &Path, rel: &str) {
    fs::create_dir_all(root.join(rel)).unwrap();
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn secrets_are_found_at_any_depth() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for rel in [
        ".env",
        "a/b/c/d/e/.env",
        "node_modules/pkg/.env",
        "target/debug/build/x/key.pem",
        "src/main.rs",
        "src/lib.env.rs",
    ] {
        write(root, rel);
    }
    let plan = finder(root).plan().unwrap();
    assert_eq!(
        plan.secret_files,
        strs(&[
            ".env",
            "a/b/c/d/e/.env",
            "node_modules/pkg/.env",
            "target/debug/build/x/key.pem"
        ])
    );
    assert!(plan.secret_dirs.is_empty());
    assert!(plan.git_dirs.is_empty());
}

#[test]
fn hard_links_to_secrets_are_masked_and_their_inodes_listed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".env");
    write(root, "home/.ssh/id_ed25519");
    write(root, "src/main.rs");
    let f = finder(root);
    let plan = f.plan().unwrap();
    assert_eq!(plan.secret_files, strs(&[".env"]));
    // Inside a masked directory too.
    let paths: Vec<&str> = plan.secret_inodes.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert!(paths.contains(&"home/.ssh/id_ed25519"), "{paths:?}");
    // Links made after the first plan, in directories already cached.
    std::fs::hard_link(root.join(".env"), root.join("notes.txt")).unwrap();
    std::fs::hard_link(root.join("home/.ssh/id_ed25519"), root.join("src/key.txt")).unwrap();
    std::fs::hard_link(root.join("src/main.rs"), root.join("src/copy.rs")).unwrap();
    let plan = f.plan().unwrap();
    assert_eq!(
        plan.secret_files,
        strs(&[".env", "notes.txt", "src/key.txt"])
    );
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(root.join("notes.txt")).unwrap();
    assert_eq!(plan.linked_secret(m.dev(), m.ino()), Some(".env"));
    let m = std::fs::metadata(root.join("src/copy.rs")).unwrap();
    assert_eq!(plan.linked_secret(m.dev(), m.ino()), None);
}

#[test]
fn a_secret_directory_is_masked_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "home/.ssh/id_rsa.pem");
    write(root, "home/.ssh/sub/.env");
    mkdir(root, "home/.ssh/deeper/.git/hooks");
    write(root, "secrets/.env");
    let plan = finder(root).plan().unwrap();
    assert_eq!(plan.secret_dirs, strs(&["home/.ssh", "secrets"]));
    assert!(plan.secret_files.is_empty(), "{plan:?}");
    assert!(plan.git_dirs.is_empty(), "{plan:?}");
}

#[test]
fn symlinks_are_neither_listed_nor_followed() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), ".env");
    write(outside.path(), "deep/key.pem");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "real/.env");
    write(root, "notes.txt");
    std::os::unix::fs::symlink("notes.txt", root.join("link.pem")).unwrap();
    std::os::unix::fs::symlink("real/.env", root.join(".env")).unwrap();
    std::os::unix::fs::symlink("real", root.join("alias")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
    std::os::unix::fs::symlink("/", root.join("slash")).unwrap();
    std::os::unix::fs::symlink("real", root.join("secrets")).unwrap();
    let f = finder(root);
    let plan = f.plan().unwrap();
    // Only the real file, by its own name: not `.env`, `link.pem`, `alias/.env`, `out/…`.
    assert_eq!(plan.secret_files, strs(&["real/.env"]));
    assert!(plan.secret_dirs.is_empty());
    // Two directories walked: the root and `real`, nothing behind a link.
    assert_eq!(f.stats().dirs_visited, 2);
}

#[test]
fn a_directory_swapped_for_a_symlink_is_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "x/.env");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "sub/.env");
    let f = finder(root);
    assert_eq!(f.plan().unwrap().secret_files, strs(&["sub/.env"]));
    // Swap `sub` for a symlink to a tree with the same shape outside.
    fs::remove_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("x"), root.join("sub")).unwrap();
    let plan = f.plan().unwrap();
    assert!(plan.secret_files.is_empty(), "{plan:?}");
    // A child opened by name with O_NOFOLLOW refuses the link even with a stale listing.
    let fd = openat(
        rustix::fs::CWD,
        root,
        OFlags::RDONLY | OFlags::DIRECTORY,
        Mode::empty(),
    )
    .unwrap();
    let refused = open_child(fd.as_fd(), b"sub").err();
    assert!(
        matches!(refused, Some(Errno::NOTDIR | Errno::LOOP)),
        "{refused:?}"
    );
}

#[test]
fn fifos_and_sockets_are_listed_and_never_opened() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mkdir(root, "run/deep");
    for rel in ["run/deep/.env", "run/plain-fifo"] {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            root.join(rel).as_path(),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }
    let _listener = std::os::unix::net::UnixListener::bind(root.join("run/agent.pem")).unwrap();
    let root = root.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(finder(&root).plan());
    });
    let plan = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the walk hung on a FIFO")
        .unwrap();
    assert_eq!(plan.secret_files, strs(&["run/agent.pem", "run/deep/.env"]));
}

#[test]
fn git_dirs_submodules_and_worktrees_are_found_with_their_config() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for rel in [
        ".git/HEAD",
        ".git/config",
        ".git/description",
        ".git/info/exclude",
        // Never walked: a secret-looking name under objects/ is not listed.
        ".git/objects/ab/.env",
        ".git/modules/sub/HEAD",
        ".git/modules/sub/config",
        ".git/modules/sub/objects/cd/.env",
        // A submodule named `a/b`: `a` is only a container.
        ".git/modules/a/b/HEAD",
        // A submodule named `sub/inner`, inside `sub`'s git dir (older git).
        ".git/modules/sub/inner/config",
        // A nested submodule of `sub`.
        ".git/modules/sub/modules/n/HEAD",
        ".git/worktrees/wt/HEAD",
        ".git/worktrees/wt/commondir",
        ".git/worktrees/wt/gitdir",
        "sub/.git",
        "vendor/lib/.git/config",
        "vendor/lib/.git/HEAD",
        "vendor/lib/src/x.rs",
    ] {
        write(root, rel);
    }
    for rel in [
        ".git/hooks",
        ".git/modules/sub/hooks",
        ".git/worktrees/wt/hooks",
    ] {
        mkdir(root, rel);
    }
    std::os::unix::fs::symlink("../../githooks", root.join("vendor/lib/.git/hooks")).unwrap();
    let plan = finder(root).plan().unwrap();
    assert_eq!(
        plan.git_dirs,
        strs(&[
            ".git",
            ".git/modules/a/b",
            ".git/modules/sub",
            ".git/modules/sub/inner",
            ".git/modules/sub/modules/n",
            ".git/worktrees/wt",
            "vendor/lib/.git",
        ])
    );
    assert_eq!(
        plan.git_readonly,
        strs(&[
            ".git/config",
            ".git/hooks",
            ".git/modules/sub/config",
            ".git/modules/sub/hooks",
            ".git/modules/sub/inner/config",
            ".git/worktrees/wt/commondir",
            ".git/worktrees/wt/hooks",
            "vendor/lib/.git/config",
        ])
    );
    assert_eq!(plan.git_files, strs(&["sub/.git"]));
    assert_eq!(
        plan.pinned_dirs,
        strs(&[
            ".git/modules",
            ".git/modules/a",
            ".git/modules/sub/modules",
            ".git/worktrees",
            "sub",
            "vendor",
            "vendor/lib",
        ])
    );
    assert!(plan.git_unprotected.contains(&".git/commondir".to_string()));
    assert!(plan
        .git_unprotected
        .contains(&"vendor/lib/.git/hooks".to_string()));
    assert!(!plan
        .git_unprotected
        .contains(&".git/worktrees/wt/commondir".to_string()));
    assert!(plan.secret_files.is_empty(), "{plan:?}");
}

#[test]
fn the_state_dir_is_left_to_the_mount_code() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, ".toolgate/outputs/.env");
    write(root, ".toolgate/key.pem");
    write(root, "sub/.toolgate/.env");
    let f = Finder::new(root.to_path_buf(), Box::new(|_: &str| false));
    assert_eq!(f.plan().unwrap().mounts(), 0);
    assert_eq!(
        finder(root).plan().unwrap().secret_files,
        strs(&["sub/.toolgate/.env"])
    );
}

#[test]
fn a_new_secret_deep_in_the_tree_shows_up() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a/b/c/file.txt");
    let f = finder(root);
    let first = f.plan().unwrap();
    assert!(first.secret_files.is_empty());
    // Immediately, in the same timestamp granule if the clock is coarse.
    write(root, "a/b/c/.env");
    let second = f.plan().unwrap();
    assert_eq!(second.secret_files, strs(&["a/b/c/.env"]));
    fs::remove_file(root.join("a/b/c/.env")).unwrap();
    fs::create_dir(root.join("a/b/c/.env")).unwrap();
    let third = f.plan().unwrap();
    assert!(third.secret_files.is_empty());
    assert_eq!(third.secret_dirs, strs(&["a/b/c/.env"]));
}

#[test]
fn an_unchanged_tree_returns_the_same_plan() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "x/.env");
    write(root, ".git/config");
    let f = finder(root);
    let a = f.plan().unwrap();
    let b = f.plan().unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // A change that does not change the plan keeps it too.
    write(root, "x/other.txt");
    let c = f.plan().unwrap();
    assert!(Arc::ptr_eq(&a, &c));
}

#[test]
fn only_changed_directories_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..10 {
        write(root, &format!("d{i}/sub/file.txt"));
    }
    // No racy window: trust the keys (the sleeps move past a coarse clock's granule).
    let bounds = Bounds {
        racy: Duration::ZERO,
        ..Bounds::default()
    };
    let f = Finder::with_bounds(root.to_path_buf(), Box::new(secret), bounds);
    std::thread::sleep(Duration::from_millis(30));
    let first = f.plan().unwrap();
    assert_eq!(f.stats().dirs_read, 21);
    let again = f.plan().unwrap();
    assert_eq!(f.stats().dirs_read, 0);
    assert_eq!(f.stats().dirs_visited, 21);
    assert!(Arc::ptr_eq(&first, &again));
    std::thread::sleep(Duration::from_millis(30));
    write(root, "d7/sub/.env");
    let changed = f.plan().unwrap();
    assert_eq!(f.stats().dirs_read, 1);
    assert_eq!(changed.secret_files, strs(&["d7/sub/.env"]));
}

#[test]
fn renames_and_removals_are_seen() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a/x/.env");
    write(root, "b/key.pem");
    mkdir(root, "c/.git/hooks");
    let f = finder(root);
    let first = f.plan().unwrap();
    assert_eq!(first.secret_files, strs(&["a/x/.env", "b/key.pem"]));
    fs::rename(root.join("a"), root.join("z")).unwrap();
    fs::remove_file(root.join("b/key.pem")).unwrap();
    fs::rename(root.join("c"), root.join("d")).unwrap();
    let plan = f.plan().unwrap();
    assert_eq!(plan.secret_files, strs(&["z/x/.env"]));
    assert_eq!(plan.git_dirs, strs(&["d/.git"]));
    assert_eq!(plan.git_readonly, strs(&["d/.git/hooks"]));
    assert_eq!(plan.pinned_dirs, strs(&["d"]));
}

#[test]
fn past_max_mounts_it_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mkdir(root, "many");
    for i in 0..=MAX_MOUNTS {
        fs::write(root.join(format!("many/{i}.pem")), "").unwrap();
    }
    let err = finder(root).plan().unwrap_err();
    assert!(err.contains(&format!("{} masks", MAX_MOUNTS + 1)), "{err}");
    assert!(err.contains(&MAX_MOUNTS.to_string()), "{err}");
    assert!(err.contains("`many`"), "{err}");
    // After a failure the cache is still sound: fewer secrets, a plan again.
    let f = finder(root);
    assert!(f.plan().is_err());
    for i in 0..10 {
        fs::remove_file(root.join(format!("many/{i}.pem"))).unwrap();
    }
    assert_eq!(f.plan().unwrap().secret_files.len(), MAX_MOUNTS - 9);
    // Masking the directory whole is the way out.
    let whole = Finder::new(
        root.to_path_buf(),
        Box::new(|rel: &str| rel == "many" || secret(rel)),
    );
    assert_eq!(whole.plan().unwrap().secret_dirs, strs(&["many"]));
}

#[test]
fn the_walk_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    mkdir(root, &vec!["d"; 20].join("/"));
    for i in 0..50 {
        write(root, &format!("f/{i}"));
    }
    let bounded = |depth, entries| {
        let bounds = Bounds {
            depth,
            entries,
            ..Bounds::default()
        };
        Finder::with_bounds(root.to_path_buf(), Box::new(secret), bounds).plan()
    };
    let err = bounded(10, MAX_ENTRIES).unwrap_err();
    assert!(err.contains("more than 10 directories deep"), "{err}");
    let err = bounded(MAX_DEPTH, 40).unwrap_err();
    assert!(err.contains("more than 40 files"), "{err}");
    assert!(bounded(20, 100).is_ok());
}

#[test]
fn a_secret_with_a_name_that_is_not_utf8_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let name = std::ffi::OsStr::from_bytes(b"k\xff.pem");
    mkdir(root, "d");
    fs::write(root.join("d").join(name), "").unwrap();
    let err = finder(root).plan().unwrap_err();
    assert!(err.contains("not valid UTF-8"), "{err}");
    // A non-UTF-8 name with nothing to hide is fine.
    fs::remove_file(root.join("d").join(name)).unwrap();
    fs::write(
        root.join("d").join(std::ffi::OsStr::from_bytes(b"\xff")),
        "",
    )
    .unwrap();
    assert!(finder(root).plan().is_ok());
}

#[test]
fn an_unreadable_directory_is_hidden_whole() {
    use std::os::unix::fs::PermissionsExt;
    if rustix::process::geteuid().is_root() {
        // Root reads everything; nothing to test.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "locked/.env");
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
    let plan = finder(root).plan();
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(plan.unwrap().secret_dirs, strs(&["locked"]));
}

/// `cargo test -p toolgate --lib workspace::view::tests::bench -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_plan_cold_and_warm() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // 500 directories (25 top-level x 20), 20 files each: 10,000 files; 20 secrets.
    for t in 0..25 {
        for s in 0..20 {
            let d = root.join(format!("pkg{t}/mod{s}"));
            fs::create_dir_all(&d).unwrap();
            for f in 0..20 {
                let name = if (t * 20 + s) % 25 == 0 && f == 0 {
                    ".env".to_string()
                } else {
                    format!("file{f}.rs")
                };
                fs::write(d.join(name), "x").unwrap();
            }
        }
    }
    write(root, ".git/config");
    write(root, ".git/HEAD");
    mkdir(root, ".git/hooks");
    let time = |f: &Finder| {
        let t = std::time::Instant::now();
        let plan = f.plan().unwrap();
        (t.elapsed(), plan)
    };
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let mut cold = Vec::new();
    for _ in 0..20 {
        let (t, plan) = time(&finder(root));
        assert_eq!(plan.secret_files.len(), 20);
        cold.push(t);
    }
    let f = finder(root);
    let (first, _) = time(&f);
    // Fresh directories are racy for RACY_WINDOW: read again, same plan.
    let racy = median((0..50).map(|_| time(&f).0).collect());
    let racy_reads = f.stats().dirs_read;
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(200));
    let _ = time(&f);
    let warm = median((0..200).map(|_| time(&f).0).collect());
    let stats = f.stats();
    write(root, "pkg3/mod4/.env");
    let (changed, plan) = time(&f);
    assert_eq!(plan.secret_files.len(), 21);
    println!(
        "view::Finder::plan, 10,000 files in {} dirs, 20 secrets: cold p50 {:.2?} (first {:.2?}), warm but racy p50 {:.2?} ({racy_reads} dirs re-read), warm p50 {:.2?} ({} dirs visited, {} read), one new .env {:.2?}",
        stats.dirs_visited,
        median(cold),
        first,
        racy,
        warm,
        stats.dirs_visited,
        stats.dirs_read,
        changed,
    );
}
