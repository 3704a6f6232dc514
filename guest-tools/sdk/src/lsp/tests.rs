#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::format::{self, Lookup};
use super::*;

const BIG: usize = 64 * 1024;

fn servers(restarted: bool) -> Value {
    json!([{"language": "python", "server": "pylsp", "restarted": restarted}])
}

fn diag(line: u64, col: u64, severity: &str, message: &str) -> Value {
    json!({"line": line, "column": col, "end_line": line, "end_column": col + 1,
           "severity": severity, "message": message, "source": "pyflakes"})
}

#[test]
fn inputs_become_positions_and_timeouts() {
    let input = json!({"path": "/ws/a.py", "line": 3, "symbol": "foo"});
    let p = position(&input);
    assert_eq!(p.path, "/ws/a.py");
    assert_eq!(
        (p.line, p.column, p.symbol.as_deref()),
        (3, None, Some("foo"))
    );
    let p = position(&json!({"path": "a.py", "line": 5_000_000_000u64, "column": 2, "symbol": ""}));
    assert_eq!((p.line, p.column, p.symbol), (u32::MAX, Some(2), None));
    let cx = Context::for_tests("/ws", BIG, &[]);
    let label = position_label(&cx, &json!({"path": "/ws/a.py", "line": 3, "column": 7}));
    assert_eq!(label, "a.py:3:7");
    let label = position_label(&cx, &json!({"path": "/ws/a:b.py", "line": 3}));
    assert_eq!(label, "\"a:b.py\":3");

    assert_eq!(timeout_ms(&json!({})), DEFAULT_TIMEOUT_MS);
    assert_eq!(timeout_ms(&json!({"timeout_ms": 500})), 500);
    assert_eq!(
        timeout_ms(&json!({"timeout_ms": 10_000_000})),
        MAX_TIMEOUT_MS
    );
    assert_eq!(timeout_ms(&json!({"timeout_ms": 0})), 1);
}

#[test]
fn position_schemas_require_path_and_line_and_allow_nothing_else() {
    let s = position_schema(
        "The file.",
        json!({"new_name": {"type": "string"}}),
        &["new_name"],
    );
    assert_eq!(s["required"], json!(["path", "line", "new_name"]));
    assert_eq!(s["additionalProperties"], false);
    for p in ["path", "line", "column", "symbol", "new_name"] {
        assert!(s["properties"][p].is_object(), "{p}");
    }
    assert_eq!(s["properties"]["path"]["description"], "The file.");
}

#[test]
fn diagnostics_are_rows_by_position_with_a_count_summary() {
    let answer = json!({
        "servers": servers(false),
        "files": [{"path": "a.py", "diagnostics": [
            diag(5, 1, "warning", "'os' imported but unused"),
            diag(2, 16, "error", "undefined name 'x'"),
            json!({"line": 3, "column": 1, "end_line": 3, "end_column": 2, "severity": "error",
                   "message": "mismatched types\nexpected i32\n\n  found str", "code": "E0308"}),
        ]}],
        "checked": 1, "timed_out": [], "cut": null
    });
    let r = format::diagnostics(&answer, Some("a.py"), BIG);
    assert_eq!(r.summary, "2 errors, 1 warning in a.py");
    assert_eq!(
        r.content,
        "a.py:2:16: error: undefined name 'x' [pyflakes]\n\
         a.py:3:1: error: mismatched types [E0308]\n    expected i32\n      found str\n\
         a.py:5:1: warning: 'os' imported but unused [pyflakes]\n"
    );
    assert!(!r.truncated);
    assert_eq!(r.totals, vec![("diagnostics", 3, 3)]);
    assert_eq!(r.data, answer);
}

#[test]
fn no_diagnostics_says_no_problems_and_timeouts_are_named() {
    let clean = json!({"servers": servers(false), "files": [{"path": "a.py", "diagnostics": []}],
                       "checked": 1, "timed_out": [], "cut": null});
    let r = format::diagnostics(&clean, Some("a.py"), BIG);
    assert_eq!(r.summary, "no problems in a.py");
    assert_eq!(r.content, "");

    let late = json!({"servers": servers(false), "files": [], "checked": 1,
                      "timed_out": ["a.py"], "cut": null});
    let r = format::diagnostics(&late, Some("a.py"), BIG);
    assert_eq!(r.summary, "no diagnostics for a.py arrived in time");
    assert!(
        r.content
            .contains("no diagnostics arrived in time for 1 file: a.py"),
        "{}",
        r.content
    );

    let ws = json!({"servers": servers(true),
                    "files": [{"path": "a.py", "diagnostics": [diag(1, 1, "hint", "h")]},
                              {"path": "c.py", "diagnostics": []}],
                    "checked": 3, "timed_out": ["b.py"],
                    "cut": "only the first 200 files were checked; give `path` for others"});
    let r = format::diagnostics(&ws, None, BIG);
    assert_eq!(r.summary, "1 hint in 1 file (2 checked); 1 file timed out");
    assert!(r.content.starts_with("(the python language server had stopped and was restarted)\na.py:1:1: hint: h [pyflakes]\n"), "{}", r.content);
    assert!(
        r.content.contains("or `path` for one file]"),
        "{}",
        r.content
    );
    assert!(r
        .content
        .contains("[only the first 200 files were checked; give `path` for others]"));
    assert!(r.truncated);

    let none = json!({"servers": [], "files": [], "checked": 4, "timed_out": [], "cut": null});
    assert_eq!(
        format::diagnostics(&none, None, BIG).summary,
        "no problems in the 4 files checked"
    );
}

#[test]
fn diagnostics_past_the_budget_say_how_many_were_shown() {
    let many: Vec<Value> = (1..=100)
        .map(|i| diag(i, 1, "error", &"m".repeat(80)))
        .collect();
    let answer = json!({"servers": [], "files": [{"path": "a.py", "diagnostics": many}],
                        "checked": 1, "timed_out": [], "cut": null});
    let r = format::diagnostics(&answer, Some("a.py"), 2048);
    let (_, total, shown) = r.totals[0];
    assert_eq!(total, 100);
    assert!(shown > 0 && shown < 100, "{shown}");
    assert!(r.truncated);
    assert!(r.content.ends_with(&format!(
        "[truncated by the output size budget: showing {shown} of 100 diagnostics]\n"
    )));
    assert!(r.content.len() <= 2048, "{}", r.content.len());
    assert_eq!(r.summary, "100 errors in a.py");
}

#[test]
fn a_server_message_cannot_forge_rows() {
    let answer = json!({"servers": [], "files": [{"path": "a\nb.py", "diagnostics": [
        diag(1, 1, "error", "one\nx.py:9:9: error: forged\u{1b}[31m"),
    ]}], "checked": 1, "timed_out": [], "cut": null});
    let r = format::diagnostics(&answer, Some("a\nb.py"), BIG);
    let lines: Vec<&str> = r.content.lines().collect();
    assert_eq!(lines[0], "\"a\\nb.py\":1:1: error: one [pyflakes]");
    assert!(lines[1].starts_with("    x.py:9:9"), "{}", lines[1]);
    assert!(!r.content.contains('\u{1b}'));
}

fn loc(path: &str, line: u64, text: Option<&str>, outside: bool) -> Value {
    let mut v = json!({"path": path, "line": line, "column": 5, "end_line": line, "end_column": 8,
                       "outside": outside});
    if let Some(t) = text {
        v["text"] = json!(t);
    }
    v
}

#[test]
fn definitions_and_references_are_located_rows() {
    let answer = json!({"servers": servers(false), "symbol": "foo",
        "locations": [loc("pkg/a.py", 3, Some("def foo():"), false),
                      loc("/usr/lib/python3.12/os.py", 10, None, true)],
        "total": 2, "cut": false});
    let r = format::locations(&answer, Lookup::Definition, "b.py:7", BIG);
    assert_eq!(r.summary, "2 definitions of `foo` in 2 files");
    assert_eq!(
        r.content,
        "pkg/a.py:3:5: def foo():\n/usr/lib/python3.12/os.py:10:5: (outside the workspace; not readable with these tools)\n"
    );

    let refs: Vec<Value> = (1..=200)
        .map(|i| {
            loc(
                if i % 2 == 0 { "a.py" } else { "b.py" },
                i,
                Some("foo()"),
                false,
            )
        })
        .collect();
    let answer =
        json!({"servers": [], "symbol": "foo", "locations": refs, "total": 950, "cut": true});
    let r = format::locations(&answer, Lookup::References, "a.py:1", BIG);
    assert_eq!(r.summary, "950 references to `foo`");
    assert!(
        r.content
            .ends_with("[showing 200 of 950 references: the host lists at most the first 200]\n"),
        "{}",
        r.content
    );
    assert!(r.truncated);
    assert_eq!(r.totals, vec![("locations", 950, 200)]);

    let few = json!({"servers": [], "symbol": "foo", "total": 3, "cut": false,
        "locations": [loc("a.py", 1, None, false), loc("b.py", 2, None, false), loc("b.py", 3, None, false)]});
    let r = format::locations(&few, Lookup::References, "a.py:1", BIG);
    assert_eq!(r.summary, "3 references to `foo` in 2 files");
    assert_eq!(r.content, "a.py:1:5\nb.py:2:5\nb.py:3:5\n");
}

#[test]
fn nothing_found_says_where_and_what_to_try() {
    let answer = json!({"servers": [], "symbol": null, "locations": [], "total": 0, "cut": false});
    let r = format::locations(&answer, Lookup::Definition, "a.py:3", BIG);
    assert_eq!(r.summary, "no definition found at a.py:3");
    assert!(r.content.contains("`read`"), "{}", r.content);
    let answer = json!({"servers": [], "symbol": "x", "locations": [], "total": 0, "cut": false});
    let r = format::locations(&answer, Lookup::References, "a.py:3", BIG);
    assert_eq!(r.summary, "no reference found for `x` (at a.py:3)");
}

fn sym(name: &str, kind: &str, line: u64, end: u64, depth: u64) -> Value {
    json!({"name": name, "kind": kind, "line": line, "column": 5, "end_line": end,
           "end_column": 1, "depth": depth})
}

#[test]
fn document_symbols_are_an_indented_outline() {
    let mut method = sym("bar", "method", 5, 9, 1);
    method["detail"] = json!("(self, x)");
    let answer = json!({"servers": [], "path": "a.py", "symbols": [
        sym("Foo", "class", 3, 12, 0), method, sym("baz", "method", 11, 12, 1),
        sym("main", "function", 14, 14, 0)]});
    let r = format::document_symbols(&answer, None, BIG);
    assert_eq!(r.summary, "a.py: 4 symbols");
    assert_eq!(
        r.content,
        "class Foo  (3:5-12)\n  method bar: (self, x)  (5:5-9)\n  method baz  (11:5-12)\nfunction main  (14:5)\n"
    );

    // A query keeps the matches and what encloses them.
    let r = format::document_symbols(&answer, Some("BA"), BIG);
    assert_eq!(r.summary, "a.py: 2 of 4 symbols match `BA`");
    assert_eq!(
        r.content,
        "class Foo  (3:5-12)\n  method bar: (self, x)  (5:5-9)\n  method baz  (11:5-12)\n"
    );

    let empty = json!({"servers": [], "path": "a.py", "symbols": []});
    assert_eq!(
        format::document_symbols(&empty, None, BIG).summary,
        "a.py defines no symbols the language server lists"
    );

    let cut = json!({"servers": [], "path": "a.py", "symbols": [sym("a", "function", 1, 1, 0)], "total": 1500, "cut": true});
    let r = format::document_symbols(&cut, None, BIG);
    assert!(
        r.content
            .contains("[the host lists only the first 1 of 1500 symbols; give `query`"),
        "{}",
        r.content
    );
    assert!(r.truncated);
}

#[test]
fn workspace_symbols_are_located_rows() {
    let mut s = loc("pkg/a.py", 3, None, false);
    s["name"] = json!("Foo");
    s["kind"] = json!("class");
    let mut t = loc("/usr/lib/x.py", 1, None, true);
    t["name"] = json!("FooBar");
    t["kind"] = json!("function");
    t["container"] = json!("x");
    let answer =
        json!({"servers": [], "query": "Foo", "symbols": [s, t], "total": 2, "cut": false});
    let r = format::workspace_symbols(&answer, BIG);
    assert_eq!(r.summary, "2 symbols match `Foo`");
    assert_eq!(
        r.content,
        "pkg/a.py:3:5: class Foo\n/usr/lib/x.py:1:5: function FooBar (in x) (outside the workspace; not readable with these tools)\n"
    );
    let none = json!({"servers": [], "query": "Zz", "symbols": [], "total": 0, "cut": false});
    assert_eq!(
        format::workspace_symbols(&none, BIG).summary,
        "no symbol in the workspace matches `Zz`"
    );
}

fn call(name: &str, path: &str, line: u64, at: &[(u64, u64)]) -> Value {
    let at: Vec<Value> = at
        .iter()
        .map(|(l, c)| json!({"line": l, "column": c}))
        .collect();
    json!({"name": name, "kind": "function", "path": path, "line": line, "column": 5,
           "outside": false, "at": at})
}

#[test]
fn call_hierarchy_lists_callers_and_callees() {
    let item = json!({"name": "foo", "kind": "function", "path": "a.py", "line": 3, "column": 5, "outside": false});
    let inc = json!({"servers": servers(false), "item": item,
                     "calls": [call("bar", "b.py", 10, &[(12, 5), (14, 9)])]});
    let out = json!({"servers": servers(true), "item": item, "calls": []});
    let r = format::calls(Some(&inc), Some(&out), "a.py:3", BIG);
    assert_eq!(r.summary, "`foo`: 1 caller, 0 callees");
    assert_eq!(
        r.content,
        "(the python language server had stopped and was restarted)\n\
         `foo` (function) at a.py:3:5\n\
         called by (1):\n  b.py:10:5: function bar — calls it at 12:5, 14:9\n\
         calls: nothing found\n"
    );
    assert_eq!(r.data["incoming"], inc);

    let out = json!({"servers": [], "item": item, "calls": [call("baz", "c.py", 2, &[(4, 5)])]});
    let r = format::calls(None, Some(&out), "a.py:3", BIG);
    assert_eq!(r.summary, "1 callee of `foo`");
    assert!(
        r.content
            .ends_with("calls (1):\n  c.py:2:5: function baz — called at 4:5\n"),
        "{}",
        r.content
    );

    let nothing = json!({"servers": [], "item": null, "calls": []});
    let r = format::calls(Some(&nothing), None, "a.py:3", BIG);
    assert_eq!(r.summary, "no function or method at a.py:3");
    assert!(r.content.contains("`symbol`"), "{}", r.content);
}

#[test]
fn applied_changes_are_listed_per_file() {
    let answer =
        json!({"files": [{"path": "a.py", "edits": 3}, {"path": "b.py", "edits": 1}], "edits": 4});
    let r = format::applied(&answer, "renamed to `bar`", BIG);
    assert_eq!(r.summary, "renamed to `bar` across 2 files, 4 edits");
    assert_eq!(r.content, "a.py: 3 edits\nb.py: 1 edit\n");
}

#[test]
fn restarts_say_what_was_stopped() {
    let r = format::restarted(&json!({"restarted": ["python"], "not_running": ["c"]}));
    assert_eq!(
        r.summary,
        "stopped the python language server; it starts again on its next use"
    );
    assert_eq!(r.content, "restarted: python\nnot running: c\n");
    let r = format::restarted(&json!({"restarted": [], "not_running": ["c"]}));
    assert!(r.summary.starts_with("no language server was running"));
}

#[test]
fn lists_past_the_budget_say_so() {
    let refs: Vec<Value> = (1..=50)
        .map(|i| loc("a.py", i, Some(&"x".repeat(100)), false))
        .collect();
    let answer =
        json!({"servers": [], "symbol": "x", "locations": refs, "total": 50, "cut": false});
    let r = format::locations(&answer, Lookup::References, "a.py:1", 1500);
    let (_, total, shown) = r.totals[0];
    assert_eq!(total, 50);
    assert!(shown > 0 && shown < 50, "{shown}");
    assert!(
        r.content.ends_with(&format!(
            "[showing {shown} of 50 references: the rest did not fit the output size budget]\n"
        )),
        "{}",
        r.content
    );

    let item = json!({"name": "f", "kind": "function", "path": "a.py", "line": 1, "column": 5, "outside": false});
    let many: Vec<Value> = (1..=40)
        .map(|i| call(&"g".repeat(60), "b.py", i, &[(i, 1)]))
        .collect();
    let inc = json!({"servers": [], "item": item, "calls": many});
    let out = json!({"servers": [], "item": item, "calls": many});
    let r = format::calls(Some(&inc), Some(&out), "a.py:1", 2000);
    assert_eq!(r.summary, "`f`: 40 callers, 40 callees");
    let (_, total, shown) = r.totals[0];
    assert_eq!(total, 80);
    assert!(shown < 40, "{shown}");
    assert!(
        r.content.contains(&format!("showing {shown} of 80 calls")),
        "{}",
        r.content
    );
}

#[test]
fn flat_symbols_show_their_container() {
    let mut m = sym("bar", "method", 5, 9, 0);
    m["container"] = json!("Foo");
    let answer =
        json!({"servers": [], "path": "a.py", "symbols": [sym("Foo", "class", 3, 12, 0), m]});
    let r = format::document_symbols(&answer, Some("bar"), BIG);
    assert_eq!(r.content, "method bar (in Foo)  (5:5-9)\n");
    assert_eq!(r.summary, "a.py: 1 of 2 symbols match `bar`");
}
