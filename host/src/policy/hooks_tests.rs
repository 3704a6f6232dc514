//! Unit tests of what trust binds for a hook and how a pinned hook's files are verified.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::os::unix::fs::PermissionsExt;

fn ws() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    (dir, root)
}

fn script(root: &Path, rel: &str, body: &str) -> PathBuf {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A hook of the workspace layer, pinned to the files as they are now.
fn pinned(root: &Path, command: &[&str]) -> HookSpec {
    let command = argv(command);
    let pins = named_files(&command, root)
        .into_iter()
        .map(|n| Pin {
            index: n.index,
            state: observe(&n.path).0,
            path: n.path,
        })
        .collect();
    HookSpec {
        command,
        tools: Vec::new(),
        timeout_ms: DEFAULT_TIMEOUT_MS,
        fail_open: true,
        pins: Some(pins),
    }
}

/// Run a verified argv as the gate does and return its stdout.
fn run(v: &VerifiedArgv, root: &Path) -> String {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(&v.program);
    cmd.arg0(&v.arg0).args(&v.args).current_dir(root);
    inherit(&mut cmd, &v.fds);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn named_files_are_the_program_and_the_path_arguments_inside_the_workspace() {
    let (_d, root) = ws();
    script(&root, "scripts/check.sh", "echo hi");
    let names: Vec<(usize, String)> = named_files(
        &argv(&[
            "bash",
            "scripts/check.sh",
            "-v",
            "--config=conf/x.toml",
            "../outside",
            "/etc/passwd",
            "https://example.com/x",
        ]),
        &root,
    )
    .into_iter()
    .map(|n| (n.index, n.shown))
    .collect();
    assert_eq!(
        names,
        vec![(1, "scripts/check.sh".into()), (3, "conf/x.toml".into())]
    );
    let names: Vec<String> = named_files(&argv(&["./scripts/check.sh"]), &root)
        .into_iter()
        .map(|n| n.shown)
        .collect();
    assert_eq!(names, vec!["scripts/check.sh".to_string()]);
    let abs = root.join("scripts/check.sh").display().to_string();
    assert_eq!(named_files(&argv(&[&abs]), &root).len(), 1);
}

#[test]
fn observe_names_absent_directories_and_hashes_files() {
    let (_d, root) = ws();
    assert_eq!(observe(&root.join("nope")).0, ABSENT);
    assert_eq!(observe(&root.join("nope/deeper")).0, ABSENT);
    assert_eq!(observe(&root).0, DIRECTORY);
    let p = script(&root, "a.sh", "true");
    let (state, bytes) = observe(&p);
    assert_eq!(state, crate::state::keyring::sha256_hex(&bytes.unwrap()));
}

#[test]
fn a_pinned_hook_runs_a_copy_of_the_verified_bytes() {
    let (_d, root) = ws();
    script(&root, "scripts/check.sh", "echo trusted");
    let hook = pinned(&root, &["./scripts/check.sh"]);
    let v = verified_argv(&hook, &root).unwrap();
    assert!(v.program.starts_with("/proc/self/fd/"), "{:?}", v.program);
    // Swapped after the check, before the exec: what runs is still what was verified.
    script(&root, "scripts/check.sh", "echo swapped");
    assert_eq!(run(&v, &root), "trusted\n");
}

#[test]
fn a_pinned_interpreter_argument_runs_a_copy_of_the_verified_bytes() {
    let (_d, root) = ws();
    script(&root, "scripts/check.sh", "echo trusted");
    let hook = pinned(&root, &["sh", "scripts/check.sh"]);
    let v = verified_argv(&hook, &root).unwrap();
    script(&root, "scripts/check.sh", "echo swapped");
    assert_eq!(run(&v, &root), "trusted\n");
}

#[test]
fn a_pinned_hook_whose_file_changed_or_appeared_is_refused() {
    let (_d, root) = ws();
    script(&root, "scripts/check.sh", "echo trusted");
    let hook = pinned(&root, &["sh", "scripts/check.sh", "extra.sh"]);
    script(&root, "scripts/check.sh", "echo changed");
    let why = verified_argv(&hook, &root).err().unwrap();
    assert!(
        why.contains("scripts/check.sh") && why.contains("changed"),
        "{why}"
    );
    // Restored, then a file appears where the trusted argument named nothing.
    script(&root, "scripts/check.sh", "echo trusted");
    assert!(verified_argv(&hook, &root).is_ok());
    script(&root, "extra.sh", "echo new");
    let why = verified_argv(&hook, &root).err().unwrap();
    assert!(
        why.contains("extra.sh") && why.contains("absent then"),
        "{why}"
    );
}

#[test]
fn a_workspace_path_the_pins_do_not_name_is_refused() {
    let (_d, root) = ws();
    script(&root, "scripts/check.sh", "echo trusted");
    let mut hook = pinned(&root, &["./scripts/check.sh"]);
    hook.pins = Some(Vec::new());
    let why = verified_argv(&hook, &root).err().unwrap();
    assert!(why.contains("does not cover"), "{why}");
    // Another layer's hook (no pins) runs as configured.
    hook.pins = None;
    let v = verified_argv(&hook, &root).unwrap();
    assert_eq!(v.program, root.join("./scripts/check.sh"));
}
