//! Unit tests of `exec::run`.

use super::*;
use crate::exec::{ExecConfig, ExecHost};

/// Without a spawner (none found, or disabled) a command is forked from the host with the
/// same confinement: it runs, its output is collected, and it cannot write outside the
/// workspace.
#[test]
fn the_fallback_without_a_spawner_is_confined_too() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let escaped = outside.path().join("escaped");
    let mut host = ExecHost::new(
        root.clone(),
        ExecConfig {
            output_budget: 10_000,
            max_processes: 64,
            ..ExecConfig::default()
        },
    );
    host.spawner = crate::exec::spawner::Spawner::disabled();
    let text = format!(
        "echo inside > in.txt; echo out > {} 2>/dev/null; echo done",
        escaped.display()
    );
    let approved = ApprovedCommand {
        text: text.clone(),
        plan: Plan::Bash(text),
        key: "shell:test".into(),
        class: "normal",
        cwd: root.clone(),
        timeout: Duration::from_secs(30),
        auto_background: Duration::from_secs(30),
        background: false,
        net: None,
    };
    let process = spawn(&host, &approved).unwrap();
    assert!(!process.via_spawner);
    assert!(process.wait_until(Instant::now() + Duration::from_secs(20)));
    let (outcome, _) = process.outcome((0, 0), 10_000, &root, "fallback");
    assert_eq!(outcome.data["spawner"], false);
    assert!(outcome.stdout.preview.contains("done"), "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(root.join("in.txt")).unwrap(),
        "inside\n"
    );
    if crate::exec::confine::available(false).landlock {
        assert!(
            !escaped.exists(),
            "the fallback wrote outside the workspace"
        );
    }
}
