// `word-count`: the example toolgate plugin, in JavaScript (built with componentize-js).
//
// Counts lines, words and bytes of a file, or of every regular file under a directory, like
// `wc`: the same tool, input and output as the Rust example in `../word-count`.
//
// - `describe` says what the tool is: name (the manifest's `name`), description for the
//   model, JSON Schema of the input, risk, and which input fields are paths.
// - `call` handles one call. The host has validated the input against the schema and
//   rewritten the `path` field to where the plugin sees it (under `/workspace`); the sandbox
//   holds only what the manifest asked for and the user granted (here: reading the workspace).
// - Files are read through `wasi:filesystem` (the JavaScript engine has no file API of its
//   own): the world in wit/world.wit imports it, and the host gives it only the granted
//   directories as preopens.
// - Errors are thrown as `ToolError`s (a stable code and a message saying what to do). Any
//   other exception is a trap: the call is reported as `crashed`, with nothing useful.
// - File names are printed through `display`: whoever made a file chose its name.

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

// ---- helpers: the parts of the Rust SDK (`toolgate-guest`) a plugin needs; copy them ----

/** A failed call's result: `throw new ToolError(code, message)`. */
export class ToolError extends Error {
  constructor(code, message, data = null) {
    super(message);
    this.code = code;
    this.data = JSON.stringify(data);
    // What componentize-js lowers as the `err` of `result<output, tool-error>`.
    this.payload = { code, message, data: this.data };
  }
}

const fsCode = (e) => (e && typeof e.payload === "string" ? e.payload : String(e));

/** A `ToolError` for a failed filesystem operation on the workspace-relative `rel`. */
function ioError(rel, e) {
  const code = fsCode(e);
  const shown = display(rel);
  if (code === "no-entry") return new ToolError("not-found", `not found: ${shown}`);
  if (code === "access" || code === "not-permitted")
    return new ToolError("permission-denied", `${shown}: permission denied`);
  if (code === "exist") return new ToolError("already-exists", `${shown}: already exists`);
  return new ToolError("io", `${shown}: ${code}`);
}

function isEscaped(c) {
  const o = c.codePointAt(0);
  return (
    o <= 0x1f || (o >= 0x7f && o <= 0x9f) || o === 0xad || o === 0x061c || o === 0x180e ||
    (o >= 0x200b && o <= 0x200f) || (o >= 0x2028 && o <= 0x202e) ||
    (o >= 0x2060 && o <= 0x2064) || (o >= 0x2066 && o <= 0x206f) || o === 0xfeff ||
    (o >= 0xfff9 && o <= 0xfffb) || (o >= 0xe0000 && o <= 0xe007f)
  );
}

/** Whether `display` quotes `name` (the Rust SDK's `names::needs_quoting`). */
function needsQuoting(name) {
  if (name === "" || name[0] === '"') return true;
  let ascii = true;
  for (const c of name) {
    const o = c.codePointAt(0);
    if (o < 0x20 || o === 0x7f || c === ":") return true;
    ascii = ascii && o < 0x80;
  }
  if (ascii) return name[0] === " " || name[name.length - 1] === " ";
  const chars = [...name];
  return /\s/u.test(chars[0]) || /\s/u.test(chars[chars.length - 1]) || chars.some(isEscaped);
}

function quote(name) {
  let out = '"';
  for (const c of name) {
    const o = c.codePointAt(0);
    if (c === "\\") out += "\\\\";
    else if (c === '"') out += '\\"';
    else if (c === "\n") out += "\\n";
    else if (c === "\r") out += "\\r";
    else if (c === "\t") out += "\\t";
    else if (o < 0x20 || o === 0x7f) out += "\\x" + o.toString(16).padStart(2, "0");
    else if (isEscaped(c)) out += "\\u{" + o.toString(16) + "}";
    else out += c;
  }
  return out + '"';
}

/** `name` as toolgate prints file names: unchanged, or quoted and escaped. */
export function display(name) {
  return needsQuoting(name) ? quote(name) : name;
}

const encoder = new TextEncoder();

/** Lines collected while they fit in `max` UTF-8 bytes (newline included). */
class Budget {
  constructor(max) {
    this.max = max;
    this.parts = [];
    this.len = 0;
    this.full = false;
  }
  pushLine(line) {
    const n = encoder.encode(line).length + 1;
    if (this.full || this.len + n > this.max) {
      this.full = true;
      return false;
    }
    this.parts.push(line, "\n");
    this.len += n;
    return true;
  }
  text() {
    return this.parts.join("");
  }
}

/** A deny-list glob (`**` `/`, `*`, `?`, `[...]`, `{a,b}`; `*` never crosses `/`) as a RegExp source. */
function globSource(p) {
  let out = "";
  let depth = 0;
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (p.startsWith("**/", i)) { out += "(?:.*/)?"; i += 2; continue; }
    if (p.startsWith("/**", i) && i + 3 === p.length) { out += "/.*"; i += 2; continue; }
    if (p.startsWith("**", i)) { out += ".*"; i += 1; continue; }
    if (c === "*") out += "[^/]*";
    else if (c === "?") out += "[^/]";
    else if (c === "[") {
      const j = p.indexOf("]", i + 2);
      if (j < 0) out += "\\[";
      else {
        let body = p.slice(i + 1, j).replace(/\\/g, "\\\\");
        if (body.startsWith("!")) body = "^" + body.slice(1);
        out += "[" + body + "]";
        i = j;
      }
    } else if (c === "{") { depth++; out += "(?:"; }
    else if (c === "}" && depth) { depth--; out += ")"; }
    else if (c === "," && depth) out += "|";
    else out += c.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
  }
  return out;
}

/** What the host tells the plugin about one call. */
class Context {
  constructor(cx) {
    this.root = cx.workspaceRoot.replace(/\/+$/, "") || "/";
    this.maxOutputBytes = Number(cx.maxOutputBytes);
    const parts = [];
    for (const g of cx.deniedGlobs) {
      try {
        new RegExp(globSource(g));
        parts.push(globSource(g));
      } catch {
        // the host enforces the deny-list on its side as well
      }
    }
    this.denied = parts.length ? new RegExp("^(?:" + parts.join("|") + ")$", "s") : null;
  }
  /** `path` relative to the workspace root, `.` for the root. */
  relative(path) {
    if (path === this.root || path === this.root + "/") return ".";
    const prefix = this.root.endsWith("/") ? this.root : this.root + "/";
    if (path.startsWith(prefix)) return path.slice(prefix.length).replace(/\/+$/, "") || ".";
    return path;
  }
  /** Whether the workspace-relative `rel` is on the host's deny-list. */
  isDenied(rel) {
    return this.denied !== null && this.denied.test(rel);
  }
}

/** The preopened directory holding `path` (the longest match) and the path below it. */
function resolve(path) {
  let best = null;
  for (const [dir, at] of getDirectories()) {
    const base = at.replace(/\/+$/, "");
    if (path === base || path.startsWith(base + "/")) {
      if (best === null || base.length > best[1].length) best = [dir, base];
    }
  }
  if (best === null) throw { payload: "no-entry" };
  const rest = path.slice(best[1].length).replace(/^\/+/, "");
  return [best[0], rest === "" ? "." : rest];
}

const FOLLOW = { symlinkFollow: true };
const NOFOLLOW = {};

// ---- the tool ----

// Directory names never descended into.
const SKIP_DIRS = [".git", "target", "node_modules"];
// Bytes of the output budget kept free for the notes and the total line.
const NOTE_RESERVE = 512;
const BLOCK = 64n * 1024n;

// ASCII whitespace as `wc` (and the Rust example) counts it.
const isSpace = (b) => b === 32 || (b >= 9 && b <= 13);

/** [lines, words, bytes] of an open file, read a block at a time. */
function countFile(file) {
  let lines = 0, words = 0, bytes = 0, inWord = false, offset = 0n;
  for (;;) {
    const [block, end] = file.read(BLOCK, offset);
    bytes += block.length;
    offset += BigInt(block.length);
    for (let i = 0; i < block.length; i++) {
      const b = block[i];
      if (b === 10) lines++;
      if (isSpace(b)) inWord = false;
      else if (!inWord) {
        inWord = true;
        words++;
      }
    }
    if (end || block.length === 0) break;
  }
  return [lines, words, bytes];
}

function addFile(dir, sub, rel, tally) {
  try {
    const file = dir.openAt(FOLLOW, sub, {}, { read: true });
    tally.files.push([rel, countFile(file)]);
  } catch (e) {
    tally.errors.push(`${display(rel)}: ${fsCode(e)}`);
  }
}

function walk(cx, dir, sub, path, tally) {
  let names;
  try {
    const here = sub === "." ? dir : dir.openAt(FOLLOW, sub, { directory: true }, { read: true });
    const stream = here.readDirectory();
    names = [];
    for (let entry; (entry = stream.readDirectoryEntry()) !== undefined; ) names.push(entry.name);
  } catch (e) {
    tally.errors.push(`${display(cx.relative(path))}: ${fsCode(e)}`);
    return;
  }
  // Code point order, which is the byte order of the names' UTF-8 (as the Rust example sorts).
  names.sort((a, b) => {
    const x = [...a], y = [...b];
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      const d = x[i].codePointAt(0) - y[i].codePointAt(0);
      if (d !== 0) return d;
    }
    return x.length - y.length;
  });
  for (const name of names) {
    const childPath = path.replace(/\/+$/, "") + "/" + name;
    const childSub = sub === "." ? name : sub + "/" + name;
    const rel = cx.relative(childPath);
    // Secrets and the host's own state: skip quietly, but count them.
    if (cx.isDenied(rel)) {
      tally.denied++;
      continue;
    }
    let type;
    try {
      // Not following symlinks: a symlink could point anywhere.
      type = dir.statAt(NOFOLLOW, childSub).type;
    } catch {
      tally.errors.push(`${display(rel)}: cannot read its metadata`);
      continue;
    }
    if (type === "directory") {
      if (!SKIP_DIRS.includes(name)) walk(cx, dir, childSub, childPath, tally);
    } else if (type === "regular-file") {
      addFile(dir, childSub, rel, tally);
    }
  }
}

const pad = (v, n) => String(v).padStart(n, " ");
const row = (c, label) => `${pad(c[0], 8)} ${pad(c[1], 8)} ${pad(c[2], 10)}  ${label}`;

/** The table within `maxOutputBytes`: a header, one row per file while they fit, a note when
 * rows were left out, and the total over every file. */
function render(tally, what, maxOutputBytes) {
  const total = [0, 0, 0];
  for (const [, c] of tally.files) for (let i = 0; i < 3; i++) total[i] += c[i];
  const budget = new Budget(Math.max(maxOutputBytes - NOTE_RESERVE, 1));
  budget.pushLine(`${pad("lines", 8)} ${pad("words", 8)} ${pad("bytes", 10)}  path`);
  let shown = 0;
  const escaped = [];
  for (const [rel, c] of tally.files) {
    const name = display(rel);
    if (!budget.pushLine(row(c, name))) break;
    if (name !== rel && !escaped.includes(rel)) escaped.push(rel);
    shown++;
  }
  const seen = tally.files.length;
  let content = budget.text();
  const truncated = shown < seen;
  if (truncated)
    content += `[truncated: listing ${shown} of ${seen} files; the total below counts all of them. Count a subdirectory to see its files]\n`;
  content += row(total, `total (${seen} files)`) + "\n";
  if (tally.denied > 0) content += `[${tally.denied} entries on the deny-list were skipped]\n`;
  if (tally.errors.length > 0)
    content += `[${tally.errors.length} entries could not be read, first: ${tally.errors[0]}]\n`;
  const data = {
    files: seen,
    lines: total[0],
    words: total[1],
    bytes: total[2],
    denied_skipped: tally.denied,
    errors: tally.errors,
  };
  if (escaped.length > 0) {
    data.escaped_names = escaped.slice(0, 20);
    data.escaped_names_total = escaped.length;
  }
  return {
    summary: `word-count ${display(what)}: ${seen} files, ${total[0]} lines, ${total[1]} words, ${total[2]} bytes`,
    content,
    truncated,
    totals: [{ unit: "files", seen: BigInt(seen), returned: BigInt(shown) }],
    data: JSON.stringify(data),
  };
}

/** What the tool is. Must not touch the filesystem (it runs with no capabilities at all). */
export function describe() {
  return {
    name: "word-count",
    description:
      "Count lines, words and bytes of a file, or of every file under a directory " +
      "(skipping .git, target and node_modules), like `wc`. Returns one row per file " +
      "(paths relative to the workspace root) and a total.",
    inputSchema: JSON.stringify({
      type: "object",
      properties: {
        path: {
          type: "string",
          description: 'A file or directory in the workspace, e.g. "src" or "." for the whole workspace.',
        },
      },
      required: ["path"],
      additionalProperties: false,
    }),
    risk: "read-only",
    // `path` is a path the plugin reads: the host checks and rewrites it before `call`.
    pathFields: [{ name: "path", access: "read" }],
  };
}

/** One call. `input` is the JSON input, already validated and with `path` rewritten. */
export function call(input, context) {
  const cx = new Context(context);
  const path = JSON.parse(input).path;
  if (typeof path !== "string" || path === "")
    throw new ToolError("bad-input", "`path` is required: a file or directory in the workspace");
  const rel = cx.relative(path);
  const tally = { files: [], denied: 0, errors: [] };
  let dir, sub, type;
  try {
    [dir, sub] = resolve(path);
    type = dir.statAt(FOLLOW, sub).type;
  } catch (e) {
    throw ioError(rel, e);
  }
  if (type === "directory") walk(cx, dir, sub, path, tally);
  else addFile(dir, sub, rel, tally);
  return render(tally, rel, cx.maxOutputBytes);
}
