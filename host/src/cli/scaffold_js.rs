//! `toolgate plugin new NAME --lang js`: a plugin built with componentize-js. The files are
//! fixed templates with `__NAME__` replaced by the plugin's name; the helpers at the top of
//! `app.js` are those of the JavaScript example (`guest-tools/examples/word-count-js/app.js`),
//! the world is the example's (`toolgate:tool` plus `wasi:filesystem`), and the WIT packages
//! are the binary's own (`plugin wit`) and the WASI 0.2.12 ones the world names.

/// The componentize-js version the scaffold's package.json pins (and the tests build with).
pub(super) const COMPONENTIZE_JS: &str = "0.22.0";

/// The JavaScript example, whose helper section every scaffold starts with.
const EXAMPLE: &str = include_str!("../../../guest-tools/examples/word-count-js/app.js");
const HELPERS_START: &str = "// ---- helpers";
const HELPERS_END: &str = "// ---- the tool ----";

/// The example's helpers (from `// ---- helpers` up to `// ---- the tool ----`).
pub(super) fn helpers() -> &'static str {
    let start = EXAMPLE.find(HELPERS_START).unwrap_or(0);
    let end = EXAMPLE.find(HELPERS_END).unwrap_or(EXAMPLE.len());
    EXAMPLE.get(start..end).unwrap_or("")
}

/// `app.js`: the header, the `import` of the preopens, the helpers, then the tool.
pub(super) fn app_js() -> String {
    format!("{APP_HEAD}{}{APP_TOOL}", helpers())
}

const APP_HEAD: &str = r##"// `__NAME__`: a toolgate plugin in JavaScript.
//
// It shows the first lines of a text file in the workspace and says how many lines the file
// has. Replace `describe` and `call` with your own tool; keep both exported.
//
// How one call works:
// - The host calls `describe` once when it loads the component. The name must be the `name`
//   in toolgate-plugin.toml; the tool is served as `plugin____NAME__`.
// - Before `call` runs, the host validates the input against the schema, checks every field
//   listed in `pathFields` against the workspace scope and the secrets deny-list, walks its
//   permission ladder (rules, grants, asking the user), and rewrites each path field to where
//   the plugin sees that file: under `context.workspaceRoot`, which is `/workspace`.
// - Files are read through `wasi:filesystem` (StarlingMonkey, the JavaScript engine, has no
//   file API of its own): wit/world.wit imports it, and the host preopens only the paths
//   granted in the manifest (`fs_read`, `fs_write`). There is no network unless the manifest
//   asks for hosts under `http` (then `fetch` works for those hosts).
// - `call` returns an output record or throws a `ToolError`. Any other exception is a trap,
//   reported as `crashed` with nothing useful for the model: catch and convert.
// - `u64` fields (`maxOutputBytes`, totals) are BigInts.

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

"##;

const APP_TOOL: &str = r##"// ---- the tool ----

// Lines shown when the input does not say how many.
const DEFAULT_LINES = 10;

/** The whole file at `dir`/`sub` as bytes. */
function readAll(dir, sub) {
  const file = dir.openAt(FOLLOW, sub, {}, { read: true });
  const chunks = [];
  let size = 0;
  for (let offset = 0n; ; ) {
    const [block, end] = file.read(65536n, offset);
    chunks.push(block);
    size += block.length;
    offset += BigInt(block.length);
    if (end || block.length === 0) break;
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.length;
  }
  return all;
}

/** The first `lines` lines of `text` that fit in `maxBytes`, with the file's line count. */
function head(rel, text, lines, maxBytes) {
  const all = text.split("\n");
  if (all.length > 0 && all[all.length - 1] === "") all.pop();
  const budget = new Budget(maxBytes);
  let shown = 0;
  for (const line of all) {
    if (shown === lines || !budget.pushLine(line.replace(/\r$/, ""))) break;
    shown++;
  }
  return {
    summary: `${rel}: ${all.length} lines, showing the first ${shown}`,
    content: budget.text(),
    // The content is a preview of something larger.
    truncated: shown < all.length,
    // What was seen against what made it into the content (u64: BigInt).
    totals: [{ unit: "lines", seen: BigInt(all.length), returned: BigInt(shown) }],
    // Structured data for programs, as JSON text ("null" when there is none).
    data: JSON.stringify({ path: rel, lines: all.length, shown }),
  };
}

/** What the tool is. Must not touch the filesystem (it runs with no capabilities at all). */
export function describe() {
  return {
    // The tool's name: the manifest's `name`.
    name: "__NAME__",
    // Written for the model that decides when to call the tool.
    description: "Show the first lines of a text file in the workspace, and how many lines it has.",
    // JSON Schema of the input object; the host rejects input that does not fit.
    inputSchema: JSON.stringify({
      type: "object",
      properties: {
        path: { type: "string", description: 'A text file in the workspace, e.g. "README.md".' },
        lines: {
          type: "integer",
          minimum: 1,
          maximum: 1000,
          description: "How many lines to show (default 10).",
        },
      },
      // Required: the host checks and rewrites a path field only when it is present.
      required: ["path"],
      additionalProperties: false,
    }),
    // The most dangerous thing the tool does. It never grants anything by itself.
    risk: "read-only",
    // `path` is a path the tool reads: the host checks it and rewrites it before `call`.
    pathFields: [{ name: "path", access: "read" }],
  };
}

/** One call. `input` is the JSON input, already validated and with `path` rewritten. */
export function call(input, context) {
  const cx = new Context(context);
  const args = JSON.parse(input);
  // Already rewritten by the host, e.g. `/workspace/README.md`.
  const path = args.path;
  const lines = args.lines ?? DEFAULT_LINES;
  // Name paths relative to the workspace in messages: that is what the model knows.
  const rel = cx.relative(path);
  let bytes;
  try {
    const [dir, sub] = resolve(path);
    bytes = readAll(dir, sub);
  } catch (e) {
    throw ioError(rel, e);
  }
  if (bytes.subarray(0, 8192).includes(0))
    throw new ToolError("binary", `${rel} is not a text file; give the path of a text file`);
  // The budget: content past `maxOutputBytes` would be cut by the host. Stop before it and
  // say so (`truncated`, totals) instead.
  return head(rel, new TextDecoder().decode(bytes), lines, cx.maxOutputBytes);
}
"##;

/// `wit/world.wit`, as the JavaScript example has it.
pub(super) const WORLD: &str =
    include_str!("../../../guest-tools/examples/word-count-js/wit/world.wit");

/// The WASI 0.2.12 packages `wit/world.wit` needs, as `(path in the plugin, text)`.
pub(super) const WASI_DEPS: &[(&str, &str)] = &[
    (
        "wit/deps/wasi-io/package.wit",
        include_str!("../../../guest-tools/examples/word-count-js/wit/deps/wasi-io/package.wit"),
    ),
    (
        "wit/deps/wasi-clocks/package.wit",
        include_str!(
            "../../../guest-tools/examples/word-count-js/wit/deps/wasi-clocks/package.wit"
        ),
    ),
    (
        "wit/deps/wasi-filesystem/package.wit",
        include_str!(
            "../../../guest-tools/examples/word-count-js/wit/deps/wasi-filesystem/package.wit"
        ),
    ),
];

pub(super) const PACKAGE_JSON: &str = r##"{
  "name": "toolgate-plugin-__NAME__",
  "version": "0.1.0",
  "private": true,
  "type": "module",
  "description": "A toolgate plugin: a component that exports the toolgate:tool@0.1.0 world.",
  "scripts": {
    "build": "componentize-js app.js --wit wit --world-name plugin -o __NAME__.wasm"
  },
  "devDependencies": {
    "@bytecodealliance/componentize-js": "__COMPONENTIZE_JS__"
  }
}
"##;

pub(super) const README: &str = r##"# __NAME__: a toolgate plugin in JavaScript

Shows the first lines of a text file in the workspace and how many lines it has. Served by
toolgate as `plugin____NAME__`.

- `app.js`: the tool (`describe`, `call`), after helpers (call context, deny-list, output
  budget, file-name display, errors, finding a path among the preopens).
- `wit/world.wit`: the world the component is built for: `toolgate:tool@0.1.0` (in
  `wit/deps/toolgate-tool/`, written by the `toolgate` that made this folder; `toolgate plugin
  wit` prints it) plus `wasi:filesystem`, whose WASI 0.2.12 packages are in `wit/deps/`.
- `toolgate-plugin.toml`: the manifest: name, version, the WIT world, and the capabilities
  the plugin asks for (here: reading the workspace).
- `package.json`: pins componentize-js, the build tool (npm).

## Install the toolchain (once)

```sh
npm install
```

## Build

```sh
npm run build          # componentize-js app.js --wit wit --world-name plugin -o __NAME__.wasm
```

`__NAME__.wasm` is about 12 MB: it holds the JavaScript engine. A build takes a minute.

## Install

In the workspace that should have the plugin (or pass `--workspace DIR`):

```sh
toolgate plugin add /path/to/this/folder/__NAME__.wasm
```

The manifest is found beside the component (`toolgate-plugin.toml`); `--manifest FILE` names
another. toolgate shows what the component is, what it imports and what it asks for, and
installs it into `.toolgate/plugins/__NAME__/` after you confirm (`--yes` to skip the
question). Run `plugin add` again after every build.

The JavaScript engine links `wasi:http` (for `fetch`), `wasi:filesystem` and `wasi:cli` into
every component; toolgate accepts them, and they reach nothing that was not granted: every
request to a host not under `http` in the manifest is refused by toolgate, there are no files
besides the granted paths, no stdio and no environment besides the granted names.

## Call

```sh
toolgate call plugin____NAME__ '{"path": "README.md", "lines": 5}' --grant plugin____NAME__
```

Plugins always go through the permission ladder: on a terminal toolgate asks, without one
the call needs a `--grant`, a policy `allow` rule or a saved approval.
"##;

pub(super) const GITIGNORE: &str = "/node_modules\n*.wasm\n";
