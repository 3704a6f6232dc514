//! `apply` writes exactly the approved plan, all files or none.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::exec::lsp::{LspConfig, LspHost};
use crate::exec::{ExecConfig, ExecHost};
use crate::workspace::Workspace;

fn setup() -> (tempfile::TempDir, PathBuf, LspHost) {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().canonicalize().unwrap();
    let host = LspHost::new(
        Arc::new(ExecHost::new(root.clone(), ExecConfig::default())),
        Workspace::new(&root, &[]).unwrap(),
        LspConfig::default(),
    );
    (d, root, host)
}

fn planned(root: &std::path::Path, rel: &str, old: &str, new: &str) -> PlannedFile {
    std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
    std::fs::write(root.join(rel), old).unwrap();
    PlannedFile {
        rel: rel.into(),
        host: root.join(rel),
        old: old.as_bytes().to_vec(),
        new: new.as_bytes().to_vec(),
        edits: 1,
    }
}

#[test]
fn every_file_is_written_when_all_are_as_planned() {
    let (_d, root, host) = setup();
    let plan = vec![
        planned(&root, "a.py", "def f(): pass\n", "def g(): pass\n"),
        planned(&root, "sub/b.py", "f()\n", "g()\n"),
    ];
    let v = apply(&root, &plan, &host).unwrap();
    assert_eq!(v["edits"], 2);
    assert_eq!(
        std::fs::read_to_string(root.join("a.py")).unwrap(),
        "def g(): pass\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("sub/b.py")).unwrap(),
        "g()\n"
    );
}

#[test]
fn one_file_changed_after_the_approval_means_no_file_is_written() {
    let (_d, root, host) = setup();
    let plan = vec![
        planned(&root, "a.py", "def f(): pass\n", "def g(): pass\n"),
        planned(&root, "b.py", "f()\n", "g()\n"),
    ];
    // The second file changes between the approval and the write.
    std::fs::write(root.join("b.py"), "f()\nf()\n").unwrap();
    let e = apply(&root, &plan, &host).unwrap_err();
    assert!(e.contains("b.py changed after"), "{e}");
    assert!(e.contains("nothing was changed"), "{e}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.py")).unwrap(),
        "def f(): pass\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("b.py")).unwrap(),
        "f()\nf()\n"
    );
}

#[test]
fn a_directory_swapped_for_a_link_or_a_file_swapped_for_a_fifo_is_never_written_through() {
    let (_d, root, host) = setup();
    let outside = tempfile::tempdir().unwrap();
    let plan = vec![
        planned(&root, "a.py", "x = 1\n", "x = 2\n"),
        planned(&root, "sub/b.py", "y = 1\n", "y = 2\n"),
    ];
    // `sub` becomes a link to a directory outside the workspace holding the same file.
    std::fs::write(outside.path().join("b.py"), "y = 1\n").unwrap();
    std::fs::remove_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("sub")).unwrap();
    let e = apply(&root, &plan, &host).unwrap_err();
    assert!(e.contains("sub/b.py"), "{e}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("b.py")).unwrap(),
        "y = 1\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.py")).unwrap(),
        "x = 1\n"
    );

    // A FIFO planted at the name is refused without being opened for reading.
    let (_d, root, host) = setup();
    let plan = vec![planned(&root, "c.py", "z\n", "w\n")];
    std::fs::remove_file(root.join("c.py")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        root.join("c.py"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let e = apply(&root, &plan, &host).unwrap_err();
    assert!(e.contains("c.py is now"), "{e}");
}

#[test]
fn the_prompt_shows_every_file_and_names_the_ones_past_the_cap() {
    let (_d, root, _host) = setup();
    let big = format!("{}\n", "line".repeat(120)).repeat(100);
    let mut plan = Vec::new();
    for i in 0..10 {
        plan.push(planned(
            &root,
            &format!("f{i}.py"),
            &big,
            &big.replace("line", "LINE"),
        ));
    }
    let text = describe_plan(&plan);
    assert!(
        text.starts_with("the language server's change: 10 files, 10 edits"),
        "{text}"
    );
    assert!(text.contains("--- a/f0.py"), "{text}");
    assert!(text.contains("are not shown: "), "{text}");
    assert!(text.contains("f9.py"), "{text}");
    assert!(text.len() < MAX_SHOWN + 20_000, "{}", text.len());
}
