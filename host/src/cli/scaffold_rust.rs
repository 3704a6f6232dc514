//! The templates of a new Rust plugin crate (`toolgate plugin new NAME`); the manifest is
//! shared by every language.

pub(super) const CARGO_TOML: &str = r##"# A toolgate plugin: a wasm32-wasip2 component that exports the `toolgate:tool@0.1.0` world.
# Build it with `cargo build --release --target wasm32-wasip2` (see README.md).
[package]
name = "toolgate-plugin-__NAME__"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
# A component is built from a cdylib.
crate-type = ["cdylib"]

[dependencies]
# The toolgate guest SDK, vendored under vendor/ by `toolgate plugin new` (no toolgate checkout
# needed). For outgoing HTTP (`toolgate_guest::http`) add `features = ["http"]` here and list the
# hosts the plugin calls under `http` in toolgate-plugin.toml.
toolgate-guest = { path = "__SDK__" }

# This crate is its own workspace, so it builds wherever it lives.
[workspace]

# Small components: optimise for size, link-time optimisation, no symbols, no unwinding.
[profile.release]
opt-level = "s"
lto = true
strip = true
panic = "abort"
"##;

pub(super) const LIB_RS: &str = r##"//! `__NAME__`: a toolgate plugin.
//!
//! It shows the first lines of a text file in the workspace and says how many lines the file
//! has. Replace `describe` and `call` with your own tool; keep the `register_tool!` line.
//!
//! How one call works:
//! - The host calls `describe` once when it loads the component. The name must be the `name`
//!   in toolgate-plugin.toml; the tool is served as `plugin____NAME__`.
//! - Before `call` runs, the host validates the input against the schema, checks every field
//!   declared with `.path(...)` against the workspace scope and the secrets deny-list, walks
//!   its permission ladder (rules, grants, asking the user), and rewrites each path field to
//!   where the plugin sees that file: under `cx.root()`, which is `/workspace`.
//! - The sandbox holds only the paths granted in the manifest (`fs_read`, `fs_write`); opening
//!   anything else fails. There is no network unless the manifest asks for hosts under `http`.
//! - `call` returns an `Output` (a one-line summary, the content the model reads, whether it
//!   was cut, totals of seen against returned) or a `ToolError` (a stable code and a message
//!   that tells the model what to do instead). Do not panic: return a `ToolError`.

use std::path::Path;
use toolgate_guest::{
    json, Budget, Context, Descriptor, Output, PathAccess, Risk, Tool, ToolError, Value,
};

/// Lines shown when the input does not say how many.
const DEFAULT_LINES: u64 = 10;

struct Plugin;

impl Tool for Plugin {
    /// What the tool is. Must not touch the filesystem (it runs with no capabilities at all).
    fn describe() -> Descriptor {
        Descriptor::new(
            // The tool's name: the manifest's `name`.
            "__NAME__",
            // Written for the model that decides when to call the tool.
            "Show the first lines of a text file in the workspace, and how many lines it has.",
            // JSON Schema of the input object; the host rejects input that does not fit.
            json!({
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "A text file in the workspace, e.g. \"README.md\"."
                    },
                    "lines": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 1000,
                        "description": "How many lines to show (default 10)."
                    }
                },
                // Required: the host checks and rewrites a path field only when it is present.
                "required": ["path"],
                "additionalProperties": false
            }),
            // The most dangerous thing the tool does. It never grants anything by itself.
            Risk::ReadOnly,
        )
        // `path` is a path the tool reads: the host checks it and rewrites it before `call`.
        .path("path", PathAccess::Read)
    }

    /// One call. `input` fits the schema; `cx` says where the workspace is mounted, how many
    /// bytes of content the host passes on, and which paths are on the deny-list.
    fn call(input: Value, cx: &Context) -> Result<Output, ToolError> {
        // Already rewritten by the host, e.g. `/workspace/README.md`.
        let path = input
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let lines = input
            .get("lines")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_LINES);
        // Name paths relative to the workspace in messages: that is what the model knows.
        let rel = cx.relative(Path::new(path));
        let bytes = std::fs::read(path).map_err(|e| ToolError::io(&rel, &e))?;
        if toolgate_guest::text::is_binary(&bytes) {
            return Err(ToolError::new(
                "binary",
                format!("{rel} is not a text file; give the path of a text file"),
            ));
        }
        let text = String::from_utf8_lossy(&bytes);
        // The budget: content past `max_output_bytes` would be cut by the host. Stop before it
        // and say so (`truncated`, totals) instead.
        Ok(head(&rel, &text, lines, cx.max_output_bytes()))
    }
}

// Exports `Plugin` as this component's `toolgate:tool@0.1.0` world.
toolgate_guest::register_tool!(Plugin);

/// The first `lines` lines of `text` that fit in `max_bytes`, with the file's line count.
fn head(rel: &str, text: &str, lines: u64, max_bytes: usize) -> Output {
    let total = text.lines().count() as u64;
    let mut budget = Budget::new(max_bytes);
    let mut shown: u64 = 0;
    for line in text.lines() {
        if shown == lines || !budget.push_line(line) {
            break;
        }
        shown += 1;
    }
    Output::new(
        format!("{rel}: {total} lines, showing the first {shown}"),
        budget.into_string(),
    )
    // The content is a preview of something larger.
    .truncated(shown < total)
    // What was seen against what made it into the content.
    .total("lines", total, shown)
    // Structured data for programs; `null` when there is none.
    .data(json!({ "path": rel, "lines": total, "shown": shown }))
}

// Native unit tests of the logic: `cargo test` (no wasm needed).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_the_first_lines_and_counts_all() {
        let out = head("a.txt", "one\ntwo\nthree\n", 2, 1024);
        let expected = Output::new("a.txt: 3 lines, showing the first 2", "one\ntwo\n")
            .truncated(true)
            .total("lines", 3, 2)
            .data(json!({ "path": "a.txt", "lines": 3, "shown": 2 }));
        assert_eq!(format!("{out:?}"), format!("{expected:?}"));
    }

    #[test]
    fn stops_at_the_budget() {
        let out = format!("{:?}", head("a.txt", "one\ntwo\nthree\n", 10, 8));
        assert!(out.contains("showing the first 2"), "{out}");
    }
}
"##;

pub(super) const MANIFEST: &str = r##"# The manifest toolgate reads when the plugin is installed (`toolgate plugin add`). It only
# requests: the plugin gets at most this, and the policy caps the limits.
name = "__NAME__"
version = "0.1.0"
description = "Shows the first lines of a text file in the workspace."
wit = "toolgate:tool@0.1.0"
# sha256 = "..."     # optional: the component's hex sha256; `plugin add` refuses any other bytes

[capabilities]
fs_read = ["."]      # workspace-relative paths the plugin may read ("." is the whole workspace)
fs_write = []        # workspace-relative paths it may change
http = []            # hosts it may call: "api.example.com", "*.example.com", "https://host:8443"
env = []             # environment variable names it may see

[limits]
timeout_ms = 10000
memory_mb = 128
max_output_bytes = 65536
"##;

pub(super) const README: &str = r##"# __NAME__: a toolgate plugin

Shows the first lines of a text file in the workspace and how many lines it has. Served by
toolgate as `plugin____NAME__`.

- `src/lib.rs`: the tool (`describe`, `call`) and `toolgate_guest::register_tool!`.
- `toolgate-plugin.toml`: the manifest: name, version, the WIT world, and the capabilities
  the plugin asks for (here: reading the workspace).
- `Cargo.toml`: depends on the toolgate guest SDK (`toolgate-guest`), vendored under
  `vendor/` with the WIT it binds (`vendor/toolgate-guest/wit/`) by the `toolgate` that made
  this crate; `Cargo.lock` pins the versions toolgate's own tools are built with. Nothing here
  needs the toolgate repository.
- `toolgate plugin wit` prints the WIT packages a plugin may use.

The plugin-author guide is `docs/plugins.md` in the toolgate repository.

## Build

```sh
rustup target add wasm32-wasip2          # once, if the target is missing
cargo build --release --target wasm32-wasip2
ls target/wasm32-wasip2/release/__CRATE__.wasm
cargo test                               # the unit tests, natively
```

## Install

In the workspace that should have the plugin (or pass `--workspace DIR`):

```sh
toolgate plugin add /path/to/this/crate/target/wasm32-wasip2/release/__CRATE__.wasm
```

The manifest is found at the crate root (`toolgate-plugin.toml` beside the `target/` folder);
`--manifest FILE` names another.

toolgate shows what the component is, what it imports and what it asks for, and installs it
into `.toolgate/plugins/__NAME__/` after you confirm (`--yes` to skip the question). The
installed copy does not change when you rebuild: run `plugin add` again to install a new build.

## Call

```sh
toolgate call plugin____NAME__ '{"path": "README.md", "lines": 5}' --grant plugin____NAME__
```

Plugins always go through the permission ladder: on a terminal toolgate asks, without one
the call needs a `--grant`, a policy `allow` rule or a saved approval.

To try a build without installing it, load the component for one run; it is served under its
own name, without the manifest, with read-only access to the workspace and no network:

```sh
toolgate call __NAME__ '{"path": "README.md"}' --component target/wasm32-wasip2/release/__CRATE__.wasm
```
"##;

pub(super) const GITIGNORE: &str = "/target\n";

/// The files of a new plugin crate, relative to its directory, with their templates.
pub(super) const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", CARGO_TOML),
    ("src/lib.rs", LIB_RS),
    ("toolgate-plugin.toml", MANIFEST),
    ("README.md", README),
    (".gitignore", GITIGNORE),
];
