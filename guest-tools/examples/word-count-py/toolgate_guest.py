"""Helpers for toolgate plugins written in Python: the parts of the Rust SDK (`toolgate-guest`)
a plugin needs, on top of the bindings componentize-py generates from the WIT (`wit_world`).

- `Context`: the call context (`root`, `max_output_bytes`, `relative`, `is_denied`).
- `display(name)`: a file name as toolgate prints it (quoted and escaped when it holds control
  or invisible characters, a `:`, a leading `"` or surrounding spaces), and `Escaped`, which
  collects the names that needed it for the call's `data`.
- `Budget`: lines collected while they fit in a byte budget.
- `output(...)` and `tool_error(...)`: the WIT records, with `data` as JSON.
- `io_error(rel, err)`: a `ToolError` for a failed file operation, coded like the Rust SDK's
  (`not-found`, `permission-denied`, `already-exists`, `io`).

This file is plain Python with no dependencies besides the generated bindings; copy it.
"""

import json
import re

from componentize_py_types import Err
from wit_world.imports import types

MAX_ESCAPED_NAMES = 20


def _is_escaped(c: str) -> bool:
    o = ord(c)
    return (
        o <= 0x1F
        or 0x7F <= o <= 0x9F
        or o in (0xAD, 0x061C, 0x180E, 0xFEFF)
        or 0x200B <= o <= 0x200F
        or 0x2028 <= o <= 0x202E
        or 0x2060 <= o <= 0x2064
        or 0x2066 <= o <= 0x206F
        or 0xFFF9 <= o <= 0xFFFB
        or 0xE0000 <= o <= 0xE007F
    )


def needs_quoting(name: str) -> bool:
    """Whether `display` quotes `name` (the same rule as the Rust SDK's `names::needs_quoting`)."""
    if not name or name[0] == '"':
        return True
    ascii_only = True
    for c in name:
        o = ord(c)
        if o < 0x20 or o == 0x7F or c == ":":
            return True
        ascii_only = ascii_only and o < 0x80
    if ascii_only:
        return name[0] == " " or name[-1] == " "
    return name[0].isspace() or name[-1].isspace() or any(_is_escaped(c) for c in name)


def quote(name: str) -> str:
    out = ['"']
    for c in name:
        o = ord(c)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        elif _is_escaped(c):
            out.append("\\u{%x}" % o)
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def display(name: str) -> str:
    """`name` as toolgate prints file names: unchanged, or quoted and escaped."""
    return quote(name) if needs_quoting(name) else name


class Escaped:
    """The names `display` had to quote, for `data.escaped_names`."""

    def __init__(self):
        self.listed = []
        self.seen = set()

    def note(self, name: str):
        if name in self.seen:
            return
        self.seen.add(name)
        if len(self.listed) < MAX_ESCAPED_NAMES:
            self.listed.append(name)

    def add_to(self, data: dict):
        if self.seen:
            data["escaped_names"] = list(self.listed)
            data["escaped_names_total"] = len(self.seen)


class Budget:
    """Lines collected while they fit in `max_bytes` (UTF-8 bytes, newline included)."""

    def __init__(self, max_bytes: int):
        self.max = max_bytes
        self.parts = []
        self.len = 0
        self.full = False

    def push_line(self, line: str) -> bool:
        n = len(line.encode("utf-8", "surrogateescape")) + 1
        if self.full or self.len + n > self.max:
            self.full = True
            return False
        self.parts.append(line)
        self.parts.append("\n")
        self.len += n
        return True

    def text(self) -> str:
        return "".join(self.parts)


def _glob_regex(pattern: str) -> str:
    """A glob as the host writes deny-list patterns (`**/`, `*`, `?`, `[...]`, `{a,b}`; `*`
    never crosses a `/`) as a regular expression."""
    out = []
    i, n = 0, len(pattern)
    depth = 0
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == n:
            out.append("/.*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class Context:
    """What the host tells the plugin about one call (`wit_world.imports.types.CallContext`)."""

    def __init__(self, cx):
        self.root = cx.workspace_root.rstrip("/") or "/"
        self.max_output_bytes = cx.max_output_bytes
        self.denied_globs = list(cx.denied_globs)
        self._denied = None

    def relative(self, path: str) -> str:
        """`path` (as the plugin sees it) relative to the workspace root, `.` for the root."""
        if path == self.root or path == self.root + "/":
            return "."
        prefix = self.root if self.root.endswith("/") else self.root + "/"
        if path.startswith(prefix):
            return path[len(prefix) :].rstrip("/") or "."
        return path

    def is_denied(self, rel: str) -> bool:
        """Whether the workspace-relative `rel` is on the host's deny-list."""
        if self._denied is None:
            self._denied = DenyList(self.denied_globs)
        return self._denied.matches(rel)


_WILD = set("*?[{")


def _plain(s: str) -> bool:
    return not (_WILD & set(s))


class DenyList:
    """The host's deny-list globs, tested together. The shapes the host's patterns have
    (`**/NAME`, `**/*.EXT`, `**/PREFIX*`, `**/PRE*SUF`, `DIR/**`, `**/DIR/**`, `NAME`) are
    sorted into sets and tuples so that one path costs a handful of string tests whatever the
    number of globs, because compiling regular expressions costs more than a whole call in a
    fresh plugin instance; anything else becomes a regular expression."""

    def __init__(self, globs):
        exact, dirs = set(), set()
        roots, tails, suffixes, prefixes, parts, infixes, regexes = [], [], [], [], [], [], []
        for glob in globs:
            if glob.startswith("**/") and glob.endswith("/**") and _plain(glob[3:-3]):
                # Anything below a directory of that name, at any depth.
                mid = glob[3:-3]
                if "/" in mid:
                    parts.append("/" + mid + "/")
                else:
                    dirs.add(mid)
                continue
            if glob.endswith("/**") and _plain(glob[:-3]):
                roots.append(glob[:-3] + "/")
                continue
            if glob.startswith("**/"):
                rest = glob[3:]
                if _plain(rest):
                    tails.append("/" + rest)
                    continue
                if "/" not in rest and rest.count("*") == 1 and _plain(rest.replace("*", "")):
                    head, _, tail = rest.partition("*")
                    if not head:
                        suffixes.append(tail)
                    elif not tail:
                        prefixes.append(head)
                    else:
                        infixes.append((head, tail))
                    continue
            if _plain(glob):
                exact.add(glob)
                continue
            try:
                regexes.append(re.compile(_glob_regex(glob) + r"\Z"))
            except re.error:
                pass  # the host enforces the deny-list on its side as well
        self.exact = frozenset(exact)
        self.dirs = frozenset(dirs)
        self.roots = tuple(roots)
        self.tails = tuple(tails)
        self.suffixes = tuple(suffixes)
        self.prefixes = tuple(prefixes)
        self.parts = tuple(parts)
        self.infixes = tuple(infixes)
        self.regexes = tuple(regexes)

    def matches(self, rel: str) -> bool:
        """Whether the workspace-relative `rel` matches one of the globs."""
        if rel in self.exact or rel.startswith(self.roots):
            return True
        slashed = "/" + rel
        if slashed.endswith(self.tails):
            return True
        base = rel.rpartition("/")[2]
        if base.endswith(self.suffixes) or base.startswith(self.prefixes):
            return True
        for head, tail in self.infixes:
            if len(base) >= len(head) + len(tail) and base.startswith(head) and base.endswith(tail):
                return True
        # `**/DIR/**`: a directory of that name above `rel`.
        if self.dirs and "/" in rel and not self.dirs.isdisjoint(rel.split("/")[:-1]):
            return True
        for part in self.parts:
            if part in slashed:
                return True
        for pattern in self.regexes:
            if pattern.match(rel) is not None:
                return True
        return False


def output(summary, content, truncated=False, totals=(), data=None):
    """A successful call's result. `totals` is `(unit, seen, returned)` triples."""
    return types.Output(
        summary=summary,
        content=content,
        truncated=truncated,
        totals=[types.Total(unit=u, seen=s, returned=r) for (u, s, r) in totals],
        data=json.dumps(data),
    )


def tool_error(code: str, message: str, data=None) -> Err:
    """A failed call's result; `raise tool_error(...)` from `call`."""
    return Err(types.ToolError(code=code, message=message, data=json.dumps(data)))


def io_error(rel: str, err: OSError) -> Err:
    """`tool_error` for a failed file operation on the workspace-relative `rel`."""
    shown = display(rel)
    if isinstance(err, FileNotFoundError):
        return tool_error("not-found", "not found: " + shown)
    if isinstance(err, PermissionError):
        code = "permission-denied"
    elif isinstance(err, FileExistsError):
        code = "already-exists"
    else:
        code = "io"
    return tool_error(code, "%s: %s" % (shown, err.strerror or err))
