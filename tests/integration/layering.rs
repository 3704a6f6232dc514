//! The structure of `host/src`, checked from the source itself:
//!
//! - imports point one way, down the layers: cli/mcp → gate → {policy, tools, plugins} →
//!   {sandbox, exec} → {state, telemetry} → the workspace rules and small utilities;
//! - no import cycle between sibling modules (at any level: `gate` and `exec`, or
//!   `state::audit` and `state::reads`);
//! - no source file over [`MAX_LINES`] lines;
//! - `lib.rs` says in one line what each of its modules holds.
//!
//! Test code (`#[cfg(test)]` items and `*_tests.rs` files) is exempt from the import rules:
//! a test may reach anything it checks. The checker runs on a small hostile tree first, so a
//! checker that finds nothing cannot pass unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The largest a source file may grow.
const MAX_LINES: usize = 600;

/// Each top-level module's layer: an import may point to its own layer or below.
const LAYERS: &[(&str, u8)] = &[
    ("cli", 6),
    ("mcp", 6),
    ("console", 6),
    ("gate", 5),
    ("policy", 4),
    ("tools", 4),
    ("plugins", 4),
    ("sandbox", 3),
    ("exec", 3),
    ("history", 3),
    ("state", 2),
    ("telemetry", 2),
    ("workspace", 1),
    ("key", 1),
    ("cancel", 1),
    ("text", 1),
    ("error", 1),
    ("fsutil", 1),
    ("userdirs", 1),
];

/// What is not done yet, listed so the test guards it: a file here may not grow past its
/// size, a cycle here may stay; anything new fails. An entry that is fixed must leave the
/// list (the test says so).
struct Known {
    /// `(file under host/src, lines)`: files still to be split.
    large: &'static [(&'static str, usize)],
    /// `"parent: a ↔ b"` (nodes sorted): cycles still to be broken.
    cycles: &'static [&'static str],
}

/// The files and cycles of host/src that are still to be reorganised (issue #16 is open on
/// them; docs/architecture.md says how each is to be split).
const KNOWN: Known = Known {
    large: &[],
    cycles: &[],
};

/// One module's source with its test code removed.
struct Source {
    /// `["sandbox", "walk"]` for `sandbox/walk.rs` (and for `sandbox/walk/mod.rs`).
    module: Vec<String>,
    file: PathBuf,
    code: String,
    lines: usize,
}

fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

fn is_test_file(rel: &Path) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    name.ends_with("_tests.rs") || name == "tests.rs" || rel.iter().any(|c| c == "tests")
}

/// Load every `.rs` file under `root`.
fn load(root: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let rel = path
                    .strip_prefix(root)
                    .expect("below the root")
                    .to_path_buf();
                let code = if is_test_file(&rel) {
                    String::new()
                } else {
                    strip_tests(&strip_comments(&text))
                };
                out.push(Source {
                    module: module_of(&rel),
                    file: rel,
                    lines: text.lines().count(),
                    code,
                });
            }
        }
    }
    out
}

/// The text without `//` comments (doc comments link to modules they do not use).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut cut = line.len();
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'\\' if in_str => i += 1,
                b'"' => in_str = !in_str,
                b'/' if !in_str && b.get(i + 1) == Some(&b'/') => {
                    cut = i;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

/// The text without the items marked `#[cfg(test)]` (a `mod … { … }`, a `use`, a `fn`).
fn strip_tests(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if t != "#[cfg(test)]" && !t.starts_with("#[cfg(all(test,") {
            out.push_str(lines[i]);
            out.push('\n');
            i += 1;
            continue;
        }
        // Skip the attribute, any further attributes, and the item: up to its `;` or the
        // brace that closes the one it opens.
        i += 1;
        while i < lines.len() && lines[i].trim_start().starts_with("#[") {
            i += 1;
        }
        let mut depth = 0i32;
        let mut opened = false;
        while i < lines.len() {
            let l = lines[i];
            i += 1;
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    out
}

/// Every module path `code` names through `crate::`, `toolgate::` or `super::`, resolved
/// against `module` (the module the code is in).
fn references(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    for (prefix, relative) in [("crate::", false), ("toolgate::", false), ("super::", true)] {
        for (at, _) in code.match_indices(prefix) {
            if at > 0
                && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b':')
            {
                continue;
            }
            let base: Vec<String> = if relative {
                module[..module.len().saturating_sub(1)].to_vec()
            } else {
                Vec::new()
            };
            parse_path(&code[at + prefix.len()..], base, &mut out);
        }
    }
    out
}

/// Parse `a::b::{c, d::e}` (the text after a `crate::`) into the paths it names.
fn parse_path(text: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let b = text.as_bytes();
    let mut i = 0;
    let mut path = base;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'{' {
            i += 1;
            loop {
                i += parse_path(&text[i..], path.clone(), out);
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                match b.get(i) {
                    Some(b',') => i += 1,
                    Some(b'}') => return i + 1,
                    _ => return i,
                }
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                if b.get(i) == Some(&b'}') {
                    return i + 1;
                }
            }
        }
        let s = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        if s == i {
            out.push(path);
            return i;
        }
        path.push(text[s..i].to_string());
        if text[i..].starts_with("::") {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// What the checker found wrong, one line each.
fn check(root: &Path, known: &Known) -> Vec<String> {
    let sources = load(root);
    let modules: BTreeSet<Vec<String>> = sources.iter().map(|s| s.module.clone()).collect();
    let layer = |top: &str| LAYERS.iter().find(|(m, _)| *m == top).map(|(_, l)| *l);
    let mut problems = Vec::new();
    // Sibling edges, per parent module: (from child, to child) -> an example file.
    let mut edges: BTreeMap<Vec<String>, BTreeMap<(String, String), String>> = BTreeMap::new();
    for s in &sources {
        let file = s.file.display().to_string();
        match known.large.iter().find(|(f, _)| *f == file) {
            Some((_, was)) if s.lines > *was => problems.push(format!(
                "{file} has {} lines; it is still to be split and may not grow past {was}",
                s.lines
            )),
            Some(_) if s.lines <= MAX_LINES => problems.push(format!(
                "{file} has {} lines now: remove it from KNOWN.large in {}",
                s.lines,
                file!()
            )),
            Some(_) => {}
            None if s.lines > MAX_LINES => problems.push(format!(
                "{file} has {} lines, more than {MAX_LINES}: split it by theme",
                s.lines
            )),
            None => {}
        }
        // A test file (`key_tests.rs` beside `key.rs`) belongs to its module; it has no layer
        // of its own, and its imports are not checked.
        if let Some(top) = s.module.first().filter(|_| !is_test_file(&s.file)) {
            if layer(top).is_none() {
                problems.push(format!(
                    "{}: module `{top}` has no layer; add it to LAYERS in {}",
                    s.file.display(),
                    file!()
                ));
            }
        }
        for r in references(&s.code, &s.module) {
            // The deepest module the path names.
            let Some(target) = (1..=r.len())
                .rev()
                .map(|n| r[..n].to_vec())
                .find(|m| modules.contains(m))
            else {
                continue;
            };
            let common = s
                .module
                .iter()
                .zip(&target)
                .take_while(|(a, b)| a == b)
                .count();
            // Within one module's own tree (parent and child) there is no direction to keep.
            if common == s.module.len() || common == target.len() {
                continue;
            }
            let (from, to) = (&s.module[common], &target[common]);
            edges
                .entry(s.module[..common].to_vec())
                .or_default()
                .entry((from.clone(), to.clone()))
                .or_insert_with(|| s.file.display().to_string());
            if common == 0 {
                if let (Some(lf), Some(lt)) = (layer(from), layer(to)) {
                    if lt > lf {
                        problems.push(format!(
                            "{}: `{from}` (layer {lf}) uses `{}` (layer {lt}); imports point \
                             down the layers only",
                            s.file.display(),
                            target.join("::")
                        ));
                    }
                }
            }
        }
    }
    let mut seen_known = BTreeSet::new();
    for (parent, graph) in &edges {
        for cycle in cycles(graph) {
            let at = if parent.is_empty() {
                "host/src".to_string()
            } else {
                parent.join("::")
            };
            let mut nodes: Vec<&String> =
                cycle.iter().collect::<BTreeSet<_>>().into_iter().collect();
            nodes.sort();
            let name = format!(
                "{at}: {}",
                nodes
                    .iter()
                    .map(|n| n.as_str())
                    .collect::<Vec<_>>()
                    .join(" ↔ ")
            );
            if known.cycles.contains(&name.as_str()) {
                seen_known.insert(name);
                continue;
            }
            let files: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    format!(
                        "{} → {} in {}",
                        w[0],
                        w[1],
                        graph[&(w[0].clone(), w[1].clone())]
                    )
                })
                .collect();
            problems.push(format!("import cycle in {at}: {}", files.join("; ")));
        }
    }
    for c in known.cycles {
        if !seen_known.contains(*c) {
            problems.push(format!(
                "the cycle `{c}` is gone: remove it from KNOWN.cycles in {}",
                file!()
            ));
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

/// One cycle per strongly connected group of more than one node, as a closed walk.
fn cycles(graph: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in graph.keys() {
        next.entry(a).or_default().push(b);
    }
    let mut found = Vec::new();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    for start in next.keys() {
        if reported.contains(*start) {
            continue;
        }
        // Breadth-first back to `start`, remembering the way.
        let mut came: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([*start]);
        let mut closed = None;
        while let Some(n) = queue.pop_front() {
            for &m in next.get(n).map(|v| v.as_slice()).unwrap_or_default() {
                if m == *start {
                    closed = Some(n);
                    break;
                }
                if m != *start && !came.contains_key(m) {
                    came.insert(m, n);
                    queue.push_back(m);
                }
            }
            if closed.is_some() {
                break;
            }
        }
        if let Some(mut n) = closed {
            // `came` leads from `n` back to `start`: walk it, then read it forwards.
            let mut back = vec![n.to_string()];
            while let Some(&p) = came.get(n) {
                back.push(p.to_string());
                n = p;
            }
            if n != *start {
                back.push(start.to_string());
            }
            back.reverse();
            back.push(start.to_string());
            reported.extend(back.iter().cloned());
            found.push(back);
        }
    }
    found
}

fn host_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/src")
}

#[test]
fn the_checker_finds_a_cycle_an_upward_import_and_a_long_file() {
    let d = tempfile::tempdir().expect("a temp dir");
    let w = |rel: &str, text: &str| {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    w("lib.rs", "pub mod state;\npub mod gate;\n");
    // state (layer 2) uses gate (layer 5): upward. Test code may.
    w(
        "state/mod.rs",
        "mod audit;\nmod reads;\nuse crate::gate::Gate;\n#[cfg(test)]\nmod tests {\n    use crate::gate::Other;\n}\n",
    );
    // audit ↔ reads: a sibling cycle, one side through a brace group.
    w(
        "state/audit.rs",
        "use crate::{error::E, state::reads::Stamp};\n",
    );
    w(
        "state/reads.rs",
        "use super::audit::Event;\n// crate::gate::Gate in a comment\n",
    );
    w("gate/mod.rs", &"fn f() {}\n".repeat(MAX_LINES + 1));
    let problems = check(
        d.path(),
        &Known {
            large: &[],
            cycles: &[],
        },
    );
    let text = problems.join("\n");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`state` (layer 2) uses `gate` (layer 5)")),
        "{text}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("import cycle in state: ")
                && p.contains("audit")
                && p.contains("reads")),
        "{text}"
    );
    assert!(
        problems.iter().any(|p| p.contains("gate/mod.rs has")),
        "{text}"
    );
    assert_eq!(problems.len(), 3, "{text}");
}

#[test]
fn host_src_imports_point_down_without_cycles_and_files_stay_small() {
    let problems = check(&host_src(), &KNOWN);
    assert!(
        problems.is_empty(),
        "the structure of host/src (see docs/architecture.md):\n{}",
        problems.join("\n")
    );
}

#[test]
fn lib_rs_names_every_module_in_one_line() {
    let lib = std::fs::read_to_string(host_src().join("lib.rs")).expect("lib.rs");
    let mut missing = Vec::new();
    for line in lib.lines() {
        if let Some(name) = line
            .strip_prefix("pub mod ")
            .and_then(|l| l.strip_suffix(';'))
        {
            if !lib.contains(&format!("//! - [`{name}`]: ")) {
                missing.push(name.to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "lib.rs has no `//! - [`name`]: …` line for: {}",
        missing.join(", ")
    );
}

#[test]
fn known_debts_may_stay_but_not_grow_and_must_leave_the_list_when_paid() {
    let d = tempfile::tempdir().expect("a temp dir");
    let w = |rel: &str, text: &str| {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    w("lib.rs", "pub mod state;\n");
    w(
        "state/mod.rs",
        "mod audit;\nmod reads;\nmod big;\nmod small;\n",
    );
    w("state/audit.rs", "use super::reads::Stamp;\n");
    w("state/reads.rs", "use super::audit::Event;\n");
    w("state/big.rs", &"fn f() {}\n".repeat(700));
    w("state/small.rs", "fn f() {}\n");
    let problems = check(
        d.path(),
        &Known {
            large: &[("state/big.rs", 650), ("state/small.rs", 900)],
            cycles: &["state: audit ↔ reads", "state: big ↔ small"],
        },
    );
    let text = problems.join("\n");
    assert!(
        problems.iter().any(|p| p.contains(
            "state/big.rs has 700 lines; it is still to be split and may not grow past 650"
        )),
        "{text}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("state/small.rs has 1 lines now: remove it")),
        "{text}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("the cycle `state: big ↔ small` is gone")),
        "{text}"
    );
    assert!(
        !text.contains("import cycle"),
        "a known cycle is not reported: {text}"
    );
    assert_eq!(problems.len(), 3, "{text}");
}
