"""`word-count`: the example toolgate plugin, in Python (built with componentize-py).

Counts lines, words and bytes of a file, or of every regular file under a directory, like
`wc`: the same tool, input and output as the Rust example in `../word-count`.

- `describe` says what the tool is: name (the manifest's `name`), description for the model,
  JSON Schema of the input, risk, and which input fields are paths.
- `call` handles one call. The host has validated the input against the schema and rewritten
  the `path` field to where the plugin sees it (under `/workspace`); the sandbox holds only
  what the manifest asked for and the user granted (here: reading the workspace).
- Errors are raised as `tool_error(...)` (a stable code and a message saying what to do).
  An uncaught exception is a trap: the call is reported as `crashed`, with nothing useful.
- File names are printed through `display`: whoever made a file chose its name.
"""

import json
import os
import stat

import wit_world
from wit_world.imports import types

from toolgate_guest import Budget, Context, Escaped, display, io_error, output, tool_error

# Directory names never descended into.
SKIP_DIRS = (".git", "target", "node_modules")
# Bytes of the output budget kept free for the notes and the total line.
NOTE_RESERVE = 512
# ASCII whitespace as `wc` (and the Rust example) counts it: what `bytes.split()` splits on.
SPACE = b" \t\n\r\x0b\x0c"
# Every byte mapped to b" " (whitespace) or b"x" (part of a word): a word starts at each b" x"
# of the mapped block, so counting needs no list of words (one object per word costs more
# than the rest of the count in a fresh interpreter).
WORDS = bytes(0x20 if b in SPACE else 0x78 for b in range(256))

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": 'A file or directory in the workspace, e.g. "src" or "." for the whole workspace.',
        }
    },
    "required": ["path"],
    "additionalProperties": False,
}


def count_file(path):
    """(lines, words, bytes) of the file at `path`, read a block at a time."""
    lines = words = size = 0
    in_word = False
    # Unbuffered: each `read` is one read of the file, with nothing copied in between.
    with open(path, "rb", buffering=0) as f:
        while True:
            block = f.read(64 * 1024)
            if not block:
                break
            size += len(block)
            lines += block.count(b"\n")
            marks = block.translate(WORDS)
            words += marks.count(b" x")
            # A word at the start of the block, unless the previous block ended inside it.
            if not in_word and marks[0] == 0x78:
                words += 1
            in_word = marks[-1] == 0x78
    return (lines, words, size)


def walk(cx, directory, tally):
    try:
        # scandir: each entry's type comes with the listing, so a file costs no `lstat`.
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as e:
        tally["errors"].append("%s: %s" % (display(cx.relative(directory)), e.strerror or e))
        return
    for entry in entries:
        name = entry.name
        path = directory.rstrip("/") + "/" + name
        rel = cx.relative(path)
        # Secrets and the host's own state: skip quietly, but count them.
        if cx.is_denied(rel):
            tally["denied"] += 1
            continue
        try:
            # A symlink is not followed (it could point anywhere).
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.is_file(follow_symlinks=False)
        except OSError:
            tally["errors"].append("%s: cannot read its metadata" % display(rel))
            continue
        if is_dir:
            if name not in SKIP_DIRS:
                walk(cx, path, tally)
        elif is_file:
            add_file(path, rel, tally)


def add_file(path, rel, tally):
    try:
        tally["files"].append((rel, count_file(path)))
    except OSError as e:
        tally["errors"].append("%s: %s" % (display(rel), e.strerror or e))


def row(counts, label):
    return "%8d %8d %10d  %s" % (counts[0], counts[1], counts[2], label)


def render(tally, what, max_output_bytes):
    """The table within `max_output_bytes`: a header, one row per file while they fit, a note
    when rows were left out, and the total over every file."""
    total = [0, 0, 0]
    for _, c in tally["files"]:
        for i in range(3):
            total[i] += c[i]
    budget = Budget(max(max_output_bytes - NOTE_RESERVE, 1))
    budget.push_line("%8s %8s %10s  path" % ("lines", "words", "bytes"))
    shown = 0
    escaped = Escaped()
    for rel, c in tally["files"]:
        name = display(rel)
        if not budget.push_line(row(c, name)):
            break
        if name != rel:
            escaped.note(rel)
        shown += 1
    seen = len(tally["files"])
    content = budget.text()
    truncated = shown < seen
    if truncated:
        content += (
            "[truncated: listing %d of %d files; the total below counts all of them. "
            "Count a subdirectory to see its files]\n" % (shown, seen)
        )
    content += row(total, "total (%d files)" % seen) + "\n"
    if tally["denied"]:
        content += "[%d entries on the deny-list were skipped]\n" % tally["denied"]
    if tally["errors"]:
        content += "[%d entries could not be read, first: %s]\n" % (
            len(tally["errors"]),
            tally["errors"][0],
        )
    data = {
        "files": seen,
        "lines": total[0],
        "words": total[1],
        "bytes": total[2],
        "denied_skipped": tally["denied"],
        "errors": tally["errors"],
    }
    escaped.add_to(data)
    return output(
        "word-count %s: %d files, %d lines, %d words, %d bytes"
        % (display(what), seen, total[0], total[1], total[2]),
        content,
        truncated=truncated,
        totals=[("files", seen, shown)],
        data=data,
    )


class WitWorld(wit_world.WitWorld):
    def describe(self) -> types.Descriptor:
        # Must not touch the filesystem: it runs with no capabilities at all.
        return types.Descriptor(
            name="word-count",
            description="Count lines, words and bytes of a file, or of every file under a directory "
            "(skipping .git, target and node_modules), like `wc`. Returns one row per file "
            "(paths relative to the workspace root) and a total.",
            input_schema=json.dumps(SCHEMA),
            risk=types.Risk.READ_ONLY,
            # `path` is a path the plugin reads: the host checks and rewrites it before `call`.
            path_fields=[types.PathField(name="path", access=types.PathAccess.READ)],
        )

    def call(self, input: str, context: types.CallContext) -> types.Output:
        cx = Context(context)
        path = json.loads(input).get("path")
        if not isinstance(path, str) or not path:
            raise tool_error("bad-input", "`path` is required: a file or directory in the workspace")
        rel = cx.relative(path)
        tally = {"files": [], "denied": 0, "errors": []}
        try:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
        except OSError as e:
            raise io_error(rel, e)
        if is_dir:
            walk(cx, path, tally)
        else:
            add_file(path, rel, tally)
        return render(tally, rel, cx.max_output_bytes)
