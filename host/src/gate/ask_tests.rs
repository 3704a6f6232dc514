//! Unit tests of the ask stage: the answers offered, headless refusals, and what each answer
//! decides (a `project` answer never reaches past the ceiling).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::gate::decision::Verdict;
use crate::gate::fake;
use crate::gate::Surface;

#[test]
fn a_session_capped_tool_or_an_ask_rule_is_never_offered_project() {
    assert_eq!(
        choices(&fake::shell_tool(), false),
        vec![Answer::Once, Answer::Session, Answer::Deny]
    );
    assert_eq!(
        choices(&fake::write_tool(), true),
        vec![Answer::Once, Answer::Session, Answer::Deny]
    );
    assert_eq!(
        choices(&fake::write_tool(), false),
        vec![Answer::Once, Answer::Session, Answer::Project, Answer::Deny]
    );
}

#[test]
fn headless_denies_at_ask_with_how_to_grant_it() {
    let (d, o) = headless(
        Surface::Cli,
        &fake::shell_tool(),
        "shell:ls",
        false,
        "call-1",
    );
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Deny, Stage::Ask, "headless")
    );
    assert!(o.hint.unwrap().contains("--grant 'shell:ls'"));
    let (_, o) = headless(
        Surface::Cli,
        &fake::write_tool(),
        "write:src/",
        true,
        "call-1",
    );
    assert!(o.hint.unwrap().contains("an `ask` rule covers"));
}

#[test]
fn a_model_is_told_what_to_ask_its_user_for_not_a_flag_to_pass() {
    for surface in [Surface::McpStdio, Surface::McpHttp] {
        let (_, o) = headless(surface, &fake::shell_tool(), "shell:ls", false, "call-1");
        let hint = o.hint.unwrap();
        assert!(hint.contains("ask the user"), "{hint}");
        assert!(!hint.starts_with("no one can approve here"), "{hint}");
    }
    let (_, o) = headless(
        Surface::McpHttp,
        &fake::write_tool(),
        "write:src/",
        false,
        "c",
    );
    assert!(o.hint.unwrap().contains("open the console"));
    // A session-capped tool is never offered a project rule.
    let (_, o) = headless(
        Surface::McpStdio,
        &fake::shell_tool(),
        "shell:ls",
        false,
        "c",
    );
    assert!(!o.hint.unwrap().contains("[[rules]]"));
}

#[test]
fn a_project_answer_for_a_session_capped_tool_is_a_ceiling_violation() {
    let shell = fake::shell_tool();
    let offered = choices(&shell, false);
    let (d, o) = answered(Some(Answer::Project), &offered, &shell, "shell:ls", "c").unwrap_err();
    assert_eq!(
        (d.verdict, d.stage, d.source.as_str()),
        (Verdict::Error, Stage::Ask, "user")
    );
    assert_eq!(o.error_code.as_deref(), Some("ceiling-violation"));
    assert_eq!(o.stage.as_deref(), Some("ask"));
}

#[test]
fn each_answer_decides_at_ask() {
    let write = fake::write_tool();
    let offered = choices(&write, false);
    for (answer, source) in [
        (Answer::Once, "user: once"),
        (Answer::Session, "user: session"),
        (Answer::Project, "user: project"),
    ] {
        let d = answered(Some(answer), &offered, &write, "write:src/", "c").unwrap();
        assert_eq!(
            (d.verdict, d.stage, d.source.as_str()),
            (Verdict::Allow, Stage::Ask, source)
        );
    }
    let (d, _) = answered(Some(Answer::Deny), &offered, &write, "write:src/", "c").unwrap_err();
    assert_eq!((d.verdict, d.source.as_str()), (Verdict::Deny, "user"));
    let (d, _) = answered(None, &offered, &write, "write:src/", "c").unwrap_err();
    assert_eq!((d.verdict, d.source.as_str()), (Verdict::Deny, "expired"));
}

fn scoped(root: &std::path::Path, rel: &str) -> crate::workspace::ScopedPath {
    crate::workspace::ScopedPath {
        host: if rel == "." {
            root.to_path_buf()
        } else {
            root.join(rel)
        },
        rel: rel.to_string(),
        guest: if rel == "." {
            "/workspace".into()
        } else {
            format!("/workspace/{rel}")
        },
    }
}

#[test]
fn other_tools_show_the_input_with_workspace_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let grep = fake::tool(
        "grep",
        crate::tools::Risk::ReadOnly,
        Ceiling::Project,
        &[("path", PathUse::Read)],
    );
    let paths = vec![("path".to_string(), PathUse::Read, scoped(dir.path(), "."))];
    let text = describe_input(
        &grep,
        &serde_json::json!({"pattern": "fn main", "path": "/workspace"}),
        &paths,
    );
    assert_eq!(
        text,
        "grep (read-only tool)\n  reads . (path)\ninput:\n{\n  \"path\": \".\",\n  \"pattern\": \"fn main\"\n}"
    );
}

#[test]
fn an_edit_shows_its_diff_instead_of_the_input() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("stats")).unwrap();
    std::fs::write(
        dir.path().join("stats/window.py"),
        "a = 1\nold line\nb = 2\n",
    )
    .unwrap();
    let edit = fake::tool(
        "edit",
        crate::tools::Risk::Write,
        Ceiling::Project,
        &[("path", PathUse::Write)],
    );
    let paths = vec![(
        "path".to_string(),
        PathUse::Write,
        scoped(dir.path(), "stats/window.py"),
    )];
    let input = serde_json::json!({"path": "/workspace/stats/window.py", "old_string": "old line", "new_string": "new line"});
    let text = describe_input(&edit, &input, &paths);
    assert_eq!(
        text,
        "edit (write tool)\n  overwrites/changes stats/window.py (path)\n\
         changes stats/window.py (1 replacement):\n\
         --- a/stats/window.py\n+++ b/stats/window.py\n@@ -1,3 +1,3 @@\n a = 1\n-old line\n+new line\n b = 2"
    );
    // A plugin that calls itself `edit` is not the built-in: its input is shown as it is.
    let mut plugin = edit.clone();
    plugin.plugin = Some("someone".into());
    let text = describe_input(&plugin, &input, &paths);
    assert!(text.contains("input:\n"), "{text}");
    assert!(text.contains("\"path\": \"stats/window.py\""), "{text}");
    assert!(!text.contains("/workspace"), "{text}");
}
