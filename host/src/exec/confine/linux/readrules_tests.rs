//! The landlock-only rules: no rule reaches a secret (checked on the rules themselves), and the
//! kernel enforcing them lets a command read what a build needs and nothing hidden.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::workspace::view::Finder;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::sync::Mutex;

/// The rules are kept in one process-wide slot: tests that read it run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A workspace with secrets (by name, by hard link, behind symlinks), a host `$HOME` with a
/// toolchain home holding credentials, the call's own directories and a place outside all.
struct Fixture {
    _dirs: Vec<tempfile::TempDir>,
    ws: PathBuf,
    tmp: PathBuf,
    private_home: PathBuf,
    home: PathBuf,
    outside: PathBuf,
    plan: Plan,
}

impl Fixture {
    fn new() -> Fixture {
        let dirs: Vec<tempfile::TempDir> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
        let path = |i: usize| dirs[i].path().canonicalize().unwrap();
        let (ws, tmp, private_home, home, outside) = (path(0), path(1), path(2), path(3), path(4));
        for (rel, text) in [
            ("README", "hello"),
            (".env", "SECRET=env"),
            ("config/secret.pem", "PEM"),
            ("config/app.toml", "app"),
            ("config/nested/deep.txt", "deep"),
            (".toolgate/state.db", "state"),
            (".toolgate/outputs/out.txt", "output"),
            ("src/main.rs", "fn main() {}"),
            ("src/lib/mod.rs", "mod"),
            ("docs/guide.md", "guide"),
        ] {
            write(&ws, rel, text);
        }
        // Second names of `.env`: one in the (split) root, one deep in an ordinary directory.
        std::fs::hard_link(ws.join(".env"), ws.join("env-copy")).unwrap();
        std::fs::hard_link(ws.join(".env"), ws.join("src/lib/env.bak")).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", ws.join("shadow")).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", ws.join("docs/shadow")).unwrap();
        std::os::unix::fs::symlink("../.env", ws.join("docs/env-link")).unwrap();
        for (rel, text) in [
            (".cargo/bin/tool", "tool"),
            (".cargo/credentials.toml", "token"),
            (".ssh/id_rsa", "key"),
            ("notes.txt", "notes"),
        ] {
            write(&home, rel, text);
        }
        let finder = Finder::new(
            ws.clone(),
            Box::new(|rel: &str| rel.rsplit('/').next() == Some(".env") || rel.ends_with(".pem")),
        );
        let plan = (*finder.plan().unwrap()).clone();
        Fixture {
            _dirs: dirs,
            ws,
            tmp,
            private_home,
            home,
            outside,
            plan,
        }
    }

    fn inputs(&self, read_only: bool, list: bool) -> ReadInputs<'_> {
        ReadInputs {
            workspace: &self.ws,
            plan: &self.plan,
            tmp: &self.tmp,
            private_home: &self.private_home,
            home: Some(&self.home),
            path_dirs: &[],
            extra_read: &[],
            extra_write: &[],
            read_only,
            list_split_dirs: list,
        }
    }

    /// Every path no rule may be at, beneath, or hold.
    fn secrets(&self) -> Vec<PathBuf> {
        let mut s: Vec<PathBuf> = [
            ".env",
            "env-copy",
            "src/lib/env.bak",
            "config/secret.pem",
            ".toolgate",
            ".toolgate/state.db",
        ]
        .iter()
        .map(|r| self.ws.join(r))
        .collect();
        s.extend(
            [
                ".cargo/credentials.toml",
                ".ssh",
                ".ssh/id_rsa",
                "notes.txt",
            ]
            .iter()
            .map(|r| self.home.join(r)),
        );
        s.extend(
            ["/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/sudoers"]
                .iter()
                .map(PathBuf::from),
        );
        s
    }
}

/// The widest grant covering `path` (a rule on it or on a directory above it).
fn grant_of(rules: &ReadRules, path: &Path) -> Option<Grant> {
    rules
        .iter()
        .filter(|r| path.starts_with(&r.path))
        .map(|r| r.grant)
        .max()
}

#[test]
fn no_rule_reaches_a_secret_and_ordinary_files_are_covered() {
    let _serial = serial();
    let f = Fixture::new();
    // The walk names the hard link in an ordinary directory, so that directory is split.
    assert!(f.plan.secret_files.contains(&"src/lib/env.bak".to_string()));
    let outputs = f.ws.join(".toolgate/outputs");
    for read_only in [false, true] {
        for list in [false, true] {
            let rules = read_rules(&f.inputs(read_only, list)).unwrap();
            let case = format!("read_only={read_only} list={list}");
            assert!(!rules.is_empty());
            assert_eq!(rules.len(), rules.iter().count());
            for r in rules.iter() {
                let meta = r.path.symlink_metadata().unwrap();
                assert!(
                    !meta.file_type().is_symlink(),
                    "{case}: rule on a symlink {r:?}"
                );
                assert!(!f.home.starts_with(&r.path), "{case}: {r:?} holds $HOME");
                for s in f.secrets() {
                    assert!(
                        !r.path.starts_with(&s) || r.path == outputs,
                        "{case}: {r:?} is beneath the secret {}",
                        s.display()
                    );
                    if r.grant != Grant::List {
                        assert!(
                            !s.starts_with(&r.path),
                            "{case}: {r:?} holds the secret {}",
                            s.display()
                        );
                    }
                }
                if r.grant == Grant::List {
                    assert!(list, "{case}: {r:?}");
                    assert_eq!(r.grant.access(), BitFlags::from(AccessFs::ReadDir));
                }
            }
            let want = if read_only {
                Grant::Read
            } else {
                Grant::ReadWrite
            };
            for rel in [
                "README",
                "config/app.toml",
                "config/nested/deep.txt",
                "src/main.rs",
                "src/lib/mod.rs",
                "docs/guide.md",
                "docs",
            ] {
                assert_eq!(
                    grant_of(&rules, &f.ws.join(rel)),
                    Some(want),
                    "{case}: {rel}"
                );
            }
            assert_eq!(
                grant_of(&rules, &outputs.join("out.txt")),
                Some(Grant::Read)
            );
            for p in [
                f.home.join(".cargo/bin/tool"),
                PathBuf::from("/usr/bin"),
                PathBuf::from("/etc/passwd"),
                PathBuf::from("/proc/self/status"),
            ] {
                assert_eq!(grant_of(&rules, &p), Some(Grant::Read), "{case}: {p:?}");
            }
            for p in [
                f.tmp.join("x"),
                f.private_home.join("x"),
                PathBuf::from("/dev/null"),
            ] {
                assert_eq!(
                    grant_of(&rules, &p),
                    Some(Grant::ReadWrite),
                    "{case}: {p:?}"
                );
            }
            // The split directories themselves: listing at most.
            for p in [f.ws.clone(), f.ws.join("config"), f.ws.join("src/lib/new")] {
                let g = grant_of(&rules, &p);
                assert_eq!(g, list.then_some(Grant::List), "{case}: {p:?}");
            }
            for p in [
                f.home.join("notes.txt"),
                f.home.join(".ssh/id_rsa"),
                f.outside.join("x"),
                PathBuf::from("/tmp"),
                PathBuf::from("/sys/kernel"),
                PathBuf::from("/dev/sda"),
            ] {
                assert_eq!(grant_of(&rules, &p), None, "{case}: {p:?}");
            }
        }
    }
}

/// A plan that does not name a second name of a secret still hides it where the rules look
/// at each entry (in a split directory): by its inode.
#[test]
fn a_hard_link_in_a_split_directory_is_hidden_by_its_inode() {
    let _serial = serial();
    let f = Fixture::new();
    let plan = Plan {
        secret_files: vec![".env".into(), "config/secret.pem".into()],
        ..Plan::default()
    };
    let mut inputs = f.inputs(false, false);
    inputs.plan = &plan;
    let rules = read_rules(&inputs).unwrap();
    assert_eq!(grant_of(&rules, &f.ws.join("env-copy")), None);
    assert_eq!(grant_of(&rules, &f.ws.join(".env")), None);
    assert_eq!(
        grant_of(&rules, &f.ws.join("README")),
        Some(Grant::ReadWrite)
    );
}

/// A granted directory holding `$HOME` is split around it, and never listed (a listing rule is
/// recursive).
#[test]
fn a_directory_holding_home_is_split_around_it() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    write(&top, "bin/tool", "tool");
    write(&top, "user/.ssh/id_rsa", "key");
    write(&top, "user/.cargo/bin/cargo", "cargo");
    let hidden = Hidden {
        homes: vec![top.join("user")],
        ..Hidden::default()
    };
    let mut b = Builder {
        hidden: &hidden,
        list: true,
        rules: Vec::new(),
        split: Vec::new(),
        racy: false,
    };
    b.root(&top, Grant::Read).unwrap();
    let paths: Vec<(&Path, Grant)> = b
        .rules
        .iter()
        .map(|r| (r.path.as_path(), r.grant))
        .collect();
    assert_eq!(paths, vec![(top.join("bin").as_path(), Grant::Read)]);
    // `$HOME` itself is never a root; beneath it the host's grants are.
    b.root(&top.join("user"), Grant::Read).unwrap();
    b.root(&top.join("user/.cargo"), Grant::Read).unwrap();
    assert_eq!(b.rules.len(), 2);
    assert_eq!(b.rules[1].path, top.join("user/.cargo"));
}

/// A policy path may not expose `$HOME` or the workspace whole.
#[test]
fn a_policy_path_holding_home_or_the_workspace_is_refused() {
    let _serial = serial();
    let f = Fixture::new();
    let parent_of_ws = vec![f.ws.parent().unwrap().to_path_buf()];
    let mut inputs = f.inputs(false, false);
    inputs.extra_read = &parent_of_ws;
    assert!(read_rules(&inputs).unwrap_err().contains("[shell] read"));
    let home = vec![f.home.clone()];
    let mut inputs = f.inputs(false, false);
    inputs.extra_write = &home;
    assert!(read_rules(&inputs).unwrap_err().contains("[shell] write"));
}

/// Kept rules are reused while no split directory changed, and made again once one did.
#[test]
fn rules_are_kept_until_a_split_directory_changes() {
    let _serial = serial();
    let f = Fixture::new();
    // Old enough not to be racy.
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    for d in [
        f.ws.clone(),
        f.ws.join("config"),
        f.ws.join("src"),
        f.ws.join("src/lib"),
        f.home.join(".cargo"),
    ] {
        std::fs::File::open(&d)
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
    }
    let first = read_rules(&f.inputs(false, false)).unwrap();
    let again = read_rules(&f.inputs(false, false)).unwrap();
    let racy_etc = !Arc::ptr_eq(&first.shared, &again.shared);
    if racy_etc {
        // `/etc` (split around the host's secrets) changed within the last seconds here.
        eprintln!("a system directory changed too recently to keep the rules; not checked");
    }
    write(&f.ws, "new.txt", "new");
    let after = read_rules(&f.inputs(false, false)).unwrap();
    assert!(!Arc::ptr_eq(&again.shared, &after.shared));
    assert_eq!(
        grant_of(&after, &f.ws.join("new.txt")),
        Some(Grant::ReadWrite)
    );
}

/// A rule whose path names another inode by the time the ruleset is made (a directory swapped
/// for another, or for a symlink) is left out.
#[test]
fn a_swapped_path_is_not_granted() {
    let _serial = serial();
    let f = Fixture::new();
    let rules = read_rules(&f.inputs(false, false)).unwrap();
    let src = rules
        .iter()
        .find(|r| r.path == f.ws.join("docs"))
        .unwrap()
        .clone();
    assert!(open_rule(&src).is_some());
    std::fs::rename(f.ws.join("docs"), f.ws.join("docs-old")).unwrap();
    std::fs::create_dir(f.ws.join("docs")).unwrap();
    assert!(open_rule(&src).is_none());
    std::fs::remove_dir(f.ws.join("docs")).unwrap();
    std::os::unix::fs::symlink(f.ws.join("docs-old"), f.ws.join("docs")).unwrap();
    assert!(open_rule(&src).is_none());
}

/// Run `argv` under `ruleset` (applied in the child between fork and exec).
fn run(ruleset: RulesetCreated, argv: &[&str]) -> Output {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    let mut ruleset = Some(ruleset);
    // SAFETY: the closure runs in the forked child before exec and only makes system calls
    // (prctl, landlock_restrict_self) on a ruleset prepared in the parent; its error is a
    // plain errno, so nothing is allocated.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            if let Some(r) = ruleset.take() {
                r.restrict_self()
                    .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))?;
            }
            Ok(())
        });
    }
    cmd.output().unwrap()
}

struct Kernel<'a> {
    rules: &'a ReadRules,
}

impl Kernel<'_> {
    fn run(&self, argv: &[&str]) -> Output {
        let (ruleset, _) = landlock_only_ruleset(self.rules, false).unwrap();
        run(ruleset, argv)
    }

    fn reads(&self, path: &Path) -> bool {
        let out = self.run(&["cat", path.to_str().unwrap()]);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("Permission denied"), "{path:?}: {err}");
        }
        out.status.success()
    }

    fn sh(&self, script: &str) -> bool {
        self.run(&["sh", "-c", script]).status.success()
    }
}

fn kernel_has_landlock() -> bool {
    let ok = support();
    let has = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI_FS))
        .and_then(|r| r.create())
        .is_ok();
    if !has {
        eprintln!("this kernel has no Landlock ABI 3 ({ok:?}): not checked");
    }
    has
}

#[test]
fn the_kernel_keeps_secrets_unread_and_writes_in_place() {
    let _serial = serial();
    if !kernel_has_landlock() {
        return;
    }
    let f = Fixture::new();
    let system_file = ["/etc/hostname", "/etc/passwd"]
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .unwrap();
    for read_only in [false, true] {
        let rules = read_rules(&f.inputs(read_only, false)).unwrap();
        let k = Kernel { rules: &rules };
        let case = format!("read_only={read_only}");
        for rel in [
            "README",
            "config/app.toml",
            "src/main.rs",
            ".toolgate/outputs/out.txt",
        ] {
            assert!(k.reads(&f.ws.join(rel)), "{case}: {rel}");
        }
        assert!(k.reads(system_file), "{case}");
        assert!(k.reads(&f.home.join(".cargo/bin/tool")), "{case}");
        for rel in [
            ".env",
            "env-copy",
            "src/lib/env.bak",
            "docs/env-link",
            "config/secret.pem",
            ".toolgate/state.db",
            "shadow",
            "docs/shadow",
        ] {
            let path = f.ws.join(rel);
            // A link to a host file this system lacks fails for that reason.
            if path.exists() {
                assert!(!k.reads(&path), "{case}: {rel}");
            }
        }
        for rel in [".cargo/credentials.toml", ".ssh/id_rsa", "notes.txt"] {
            assert!(!k.reads(&f.home.join(rel)), "{case}: ~/{rel}");
        }
        if Path::new("/etc/shadow").exists() {
            assert!(!k.reads(Path::new("/etc/shadow")), "{case}");
        }
        // Writes: the call's own directories always; the workspace (beneath its split
        // directories) unless read-only; nowhere else.
        let tmp_file = f.tmp.join("t");
        assert!(
            k.sh(&format!("echo x > '{}'", tmp_file.display())),
            "{case}"
        );
        assert!(
            !k.sh(&format!("echo x > '{}'", f.outside.join("o").display())),
            "{case}"
        );
        let in_docs = f.ws.join("docs/new.md");
        assert_eq!(
            k.sh(&format!("echo x > '{}'", in_docs.display())),
            !read_only,
            "{case}"
        );
        assert_eq!(
            k.sh(&format!("echo more >> '{}'", f.ws.join("README").display())),
            !read_only,
            "{case}"
        );
        // Never at a split directory itself, nor a secret moved to where it could be read.
        assert!(
            !k.sh(&format!("echo x > '{}'", f.ws.join("top.txt").display())),
            "{case}"
        );
        assert!(
            !k.sh(&format!(
                "mv '{}' '{}'",
                f.ws.join(".env").display(),
                f.ws.join("src/moved").display()
            )),
            "{case}"
        );
        assert!(
            !k.sh(&format!(
                "mv '{}' '{}'",
                f.ws.join(".env").display(),
                f.ws.join("renamed").display()
            )),
            "{case}"
        );
        assert!(
            !k.sh(&format!(
                "echo x > '{}'",
                f.ws.join(".toolgate/policy.toml").display()
            )),
            "{case}"
        );
        assert!(f.ws.join(".env").is_file());
        let _ = std::fs::remove_file(&in_docs);
    }
}

#[test]
fn split_directories_can_be_listed_when_asked() {
    let _serial = serial();
    if !kernel_has_landlock() {
        return;
    }
    let f = Fixture::new();
    let ws = f.ws.to_str().unwrap();
    for list in [false, true] {
        let rules = read_rules(&f.inputs(false, list)).unwrap();
        let k = Kernel { rules: &rules };
        assert_eq!(k.run(&["ls", ws]).status.success(), list);
        // Listing never reads a file.
        assert!(!k.reads(&f.ws.join(".env")));
    }
}

#[test]
fn tcp_is_refused_where_the_kernel_handles_it() {
    let _serial = serial();
    if !kernel_has_landlock() || !support().tcp || !Path::new("/bin/bash").exists() {
        eprintln!("no Landlock ABI 4 or no bash here: not checked");
        return;
    }
    let f = Fixture::new();
    let rules = read_rules(&f.inputs(false, false)).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
    let (denied, handled) = landlock_only_ruleset(&rules, false).unwrap();
    assert!(handled.tcp);
    assert!(!run(denied, &["/bin/bash", "-c", &connect]).status.success());
    let (granted, handled) = landlock_only_ruleset(&rules, true).unwrap();
    assert!(!handled.tcp);
    assert!(run(granted, &["/bin/bash", "-c", &connect])
        .status
        .success());
}
