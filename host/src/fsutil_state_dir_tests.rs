//! Unit tests of `fsutil.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn plain_error_has_no_errno_number() {
    let e = std::io::Error::from_raw_os_error(libc::ENOTDIR);
    assert_eq!(plain_error(&e), "a part of the path is not a directory");
    let e = std::io::Error::from_raw_os_error(libc::EOVERFLOW);
    let s = plain_error(&e);
    assert!(!s.contains("os error"), "{s}");
    assert!(!s.is_empty());
}

#[cfg(target_os = "linux")]
#[test]
fn directories_are_created_beneath_without_following_links() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    create_dirs_beneath(&root, &root.join("a/b/c")).unwrap();
    assert!(root.join("a/b/c").is_dir());
    std::fs::create_dir(root.join(".toolgate")).unwrap();
    std::os::unix::fs::symlink(".toolgate", root.join("sub")).unwrap();
    let e = create_dirs_beneath(&root, &root.join("sub/policy.toml")).unwrap_err();
    assert!(e.to_string().contains("nothing was created"), "{e}");
    assert!(!root.join(".toolgate/policy.toml").exists());
    assert!(create_dirs_beneath(&root, Path::new("/elsewhere/x")).is_err());
}

/// `RESOLVE_BENEATH` through a `..` symlink while another thread renames files (as the
/// race tests and any build do): every open succeeds. Plain `openat2` answers `EAGAIN` to
/// some of them (counted and printed; seen as "I/O error" in a guard test under CI load).
#[cfg(target_os = "linux")]
#[test]
fn beneath_opens_survive_renames_elsewhere() {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    std::fs::create_dir_all(root.join("src/sub")).unwrap();
    std::os::unix::fs::symlink("..", root.join("src/up")).unwrap();
    let busy = tempfile::tempdir().unwrap();
    std::fs::write(busy.path().join("a"), "").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let renamer = {
        let stop = stop.clone();
        let dir = busy.path().to_path_buf();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::fs::rename(dir.join("a"), dir.join("b"));
                let _ = std::fs::rename(dir.join("b"), dir.join("a"));
            }
        })
    };
    let dir = std::fs::File::open(root).unwrap();
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let how = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let mut plain_again = 0;
    for _ in 0..20_000 {
        if let Err(rustix::io::Errno::AGAIN) =
            rustix::fs::openat2(&dir, "src/up/src/sub", flags, Mode::empty(), how)
        {
            plain_again += 1;
        }
        openat2_retry(&dir, "src/up/src/sub", flags, Mode::empty(), how).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    renamer.join().unwrap();
    eprintln!("plain openat2 answered EAGAIN {plain_again} times of 20000");
}
