//! `toolgate plugin new NAME --lang python`: a plugin built with componentize-py. The files are
//! fixed templates with `__NAME__` replaced by the plugin's name; the helpers module is the
//! one of the Python example (`guest-tools/examples/word-count-py/toolgate_guest.py`), and the
//! WIT is the binary's own (`plugin wit`).

/// The componentize-py version the scaffold's README installs (and the tests build with).
pub(super) const COMPONENTIZE_PY: &str = "0.25.1";

pub(super) const APP_PY: &str = r##""""`__NAME__`: a toolgate plugin in Python.

It shows the first lines of a text file in the workspace and says how many lines the file
has. Replace `describe` and `call` with your own tool; keep the class name `WitWorld`.

How one call works:
- The host calls `describe` once when it loads the component. The name must be the `name`
  in toolgate-plugin.toml; the tool is served as `plugin____NAME__`.
- Before `call` runs, the host validates the input against the schema, checks every field
  listed in `path_fields` against the workspace scope and the secrets deny-list, walks its
  permission ladder (rules, grants, asking the user), and rewrites each path field to where
  the plugin sees that file: under `context.workspace_root`, which is `/workspace`.
- The sandbox holds only the paths granted in the manifest (`fs_read`, `fs_write`); opening
  anything else fails. There is no network unless the manifest asks for hosts under `http`.
- `call` returns an `Output` or raises `tool_error(code, message)`. Any other exception is a
  trap, reported as `crashed` with nothing useful for the model: catch and convert.
- `print` goes nowhere (the plugin has no stdout).
"""

import json

import wit_world
from wit_world.imports import types

from toolgate_guest import Budget, Context, io_error, output, tool_error

# Lines shown when the input does not say how many.
DEFAULT_LINES = 10

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": 'A text file in the workspace, e.g. "README.md".'},
        "lines": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000,
            "description": "How many lines to show (default 10).",
        },
    },
    # Required: the host checks and rewrites a path field only when it is present.
    "required": ["path"],
    "additionalProperties": False,
}


def head(rel, text, lines, max_bytes):
    """The first `lines` lines of `text` that fit in `max_bytes`, with the file's line count."""
    all_lines = text.splitlines()
    budget = Budget(max_bytes)
    shown = 0
    for line in all_lines:
        if shown == lines or not budget.push_line(line):
            break
        shown += 1
    total = len(all_lines)
    return output(
        "%s: %d lines, showing the first %d" % (rel, total, shown),
        budget.text(),
        # The content is a preview of something larger.
        truncated=shown < total,
        # What was seen against what made it into the content.
        totals=[("lines", total, shown)],
        # Structured data for programs; None is `null`.
        data={"path": rel, "lines": total, "shown": shown},
    )


class WitWorld(wit_world.WitWorld):
    def describe(self) -> types.Descriptor:
        # What the tool is. Must not touch the filesystem (it runs with no capabilities).
        return types.Descriptor(
            # The tool's name: the manifest's `name`.
            name="__NAME__",
            # Written for the model that decides when to call the tool.
            description="Show the first lines of a text file in the workspace, and how many lines it has.",
            # JSON Schema of the input object; the host rejects input that does not fit.
            input_schema=json.dumps(SCHEMA),
            # The most dangerous thing the tool does. It never grants anything by itself.
            risk=types.Risk.READ_ONLY,
            # `path` is a path the tool reads: the host checks it and rewrites it before `call`.
            path_fields=[types.PathField(name="path", access=types.PathAccess.READ)],
        )

    def call(self, input: str, context: types.CallContext) -> types.Output:
        # `input` fits the schema; `cx` says where the workspace is mounted, how many bytes of
        # content the host passes on, and which paths are on the deny-list.
        cx = Context(context)
        args = json.loads(input)
        # Already rewritten by the host, e.g. `/workspace/README.md`.
        path = args["path"]
        lines = args.get("lines", DEFAULT_LINES)
        # Name paths relative to the workspace in messages: that is what the model knows.
        rel = cx.relative(path)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise io_error(rel, e)
        if b"\0" in data[:8192]:
            raise tool_error("binary", "%s is not a text file; give the path of a text file" % rel)
        # The budget: content past `max_output_bytes` would be cut by the host. Stop before
        # it and say so (`truncated`, totals) instead.
        return head(rel, data.decode("utf-8", "replace"), lines, cx.max_output_bytes)
"##;

pub(super) const README: &str = r##"# __NAME__: a toolgate plugin in Python

Shows the first lines of a text file in the workspace and how many lines it has. Served by
toolgate as `plugin____NAME__`.

- `app.py`: the tool (`WitWorld.describe`, `WitWorld.call`).
- `toolgate_guest.py`: helpers (call context, deny-list, output budget, file-name display,
  errors), the Python counterpart of the Rust SDK's.
- `wit/tool.wit`: the `toolgate:tool@0.1.0` world the component exports, written by the
  `toolgate` that made this folder (`toolgate plugin wit` prints it).
- `toolgate-plugin.toml`: the manifest: name, version, the WIT world, and the capabilities
  the plugin asks for (here: reading the workspace).

## Install the toolchain (once)

componentize-py (from PyPI) turns the Python code and a Python interpreter into a component:

```sh
python3 -m venv .venv
.venv/bin/pip install componentize-py==__COMPONENTIZE_PY__
```

## Build

```sh
.venv/bin/componentize-py -d wit -w tool componentize app -o __NAME__.wasm
```

`__NAME__.wasm` is about 18 MB: it holds the interpreter. To read the generated bindings
(`wit_world`, the types of `describe` and `call`), write them elsewhere:
`.venv/bin/componentize-py -d wit -w tool bindings /tmp/__NAME__-bindings`.

## Install

In the workspace that should have the plugin (or pass `--workspace DIR`):

```sh
toolgate plugin add /path/to/this/folder/__NAME__.wasm
```

The manifest is found beside the component (`toolgate-plugin.toml`); `--manifest FILE` names
another. toolgate shows what the component is, what it imports and what it asks for, and
installs it into `.toolgate/plugins/__NAME__/` after you confirm (`--yes` to skip the
question). Run `plugin add` again after every build.

componentize-py links `wasi:sockets`, `wasi:filesystem` and `wasi:cli` into every component;
toolgate accepts them, and they reach nothing that was not granted: no socket can be created,
there are no files besides the granted paths, no stdio and no environment besides the
granted names.

## Call

```sh
toolgate call plugin____NAME__ '{"path": "README.md", "lines": 5}' --grant plugin____NAME__
```

Plugins always go through the permission ladder: on a terminal toolgate asks, without one
the call needs a `--grant`, a policy `allow` rule or a saved approval. `plugin add` compiles
the component (it holds a whole interpreter: up to a minute on a slow machine) and toolgate
caches the result, so later processes load it in a fraction of a second.
"##;

pub(super) const GITIGNORE: &str = "/.venv\n__pycache__/\n*.wasm\n";

/// The helpers module, as the Python example has it.
pub(super) const HELPERS: &str =
    include_str!("../../../guest-tools/examples/word-count-py/toolgate_guest.py");
