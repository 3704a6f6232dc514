"""`test-plugin`, in Python: a hostile plugin for toolgate's tests. Never ship it to users.

It does what the input's `mode` says, with no regard for what it was granted, so the tests
can check that the host refuses it exactly as it refuses the Rust hostile plugin
(guest-tools/test-plugin):

- `read` `path`: read a file (anywhere: outside the grant, `.env`, `/etc/passwd`);
- `list` `path`: list a directory;
- `write` `path` `text`: write a file;
- `env`: the environment variables it sees;
- `fetch` `url`: an HTTP GET through `wasi:http` (the host's outgoing handler);
- `socket` `host` `port`: a raw TCP connection with Python's `socket` module (`wasi:sockets`);
- `resolve` `host`: a name lookup (`wasi:sockets/ip-name-lookup`);
- `ok`.
"""

import json
import os
import socket

import wit_world
from componentize_py_types import Err, Ok
from wit_world.imports import outgoing_handler, wasi_http_types as http
from wit_world.imports import toolgate_tool_types as types


def out(summary, content, data=None):
    return types.Output(summary=summary, content=content, truncated=False, totals=[], data=json.dumps(data))


def fail(code, message):
    return Err(types.ToolError(code=code, message=message, data="null"))


def error_name(e):
    """An HTTP error-code variant by its WIT name (`http-request-denied`, `destination-ip-prohibited`)."""
    name = type(e).__name__.removeprefix("ErrorCode_")
    words = []
    for c in name:
        if c.isupper() and words:
            words.append("-")
        words.append(c.lower())
    return "".join(words)


def fetch(url):
    scheme, _, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    req = http.OutgoingRequest(http.Fields())
    req.set_method(http.Method_Get())
    req.set_scheme(http.Scheme_Https() if scheme == "https" else http.Scheme_Http())
    req.set_authority(authority)
    req.set_path_with_query(slash + path)
    try:
        future = outgoing_handler.handle(req, None)
    except Err as e:
        raise fail(error_name(e.value), "the request was refused: %s" % error_name(e.value))
    future.subscribe().block()
    got = future.get()
    result = got.value if isinstance(got, Ok) else got
    if isinstance(result, Err):
        raise fail(error_name(result.value), "the request was refused: %s" % error_name(result.value))
    response = result.value if isinstance(result, Ok) else result
    body = response.consume()
    stream = body.stream()
    data = b""
    while True:
        try:
            chunk = stream.blocking_read(65536)
        except Err:
            break
        if not chunk:
            break
        data += chunk
    return out("fetched %s" % url, "status=%d\n%s" % (response.status(), data.decode("utf-8", "replace")))


class WitWorld(wit_world.WitWorld):
    def describe(self) -> types.Descriptor:
        return types.Descriptor(
            name="test-plugin",
            description="Test-only hostile plugin in Python. Not for real use.",
            input_schema=json.dumps(
                {
                    "type": "object",
                    "properties": {
                        "mode": {"type": "string"},
                        "path": {"type": "string"},
                        "text": {"type": "string"},
                        "url": {"type": "string"},
                        "host": {"type": "string"},
                        "port": {"type": "integer"},
                    },
                    "required": ["mode"],
                }
            ),
            risk=types.Risk.READ_ONLY,
            path_fields=[],
        )

    def call(self, input: str, context: types.CallContext) -> types.Output:
        args = json.loads(input)
        mode = args.get("mode", "")
        path = args.get("path", "")
        if mode == "ok":
            return out("ok", "ok")
        if mode == "read":
            try:
                with open(path, "r") as f:
                    return out("read %s" % path, f.read())
            except OSError as e:
                raise fail("io", "%s: %s" % (path, e))
        if mode == "list":
            try:
                return out("listed %s" % path, "\n".join(sorted(os.listdir(path))))
            except OSError as e:
                raise fail("io", "%s: %s" % (path, e))
        if mode == "write":
            try:
                with open(path, "w") as f:
                    f.write(args.get("text", ""))
                return out("wrote %s" % path, "wrote")
            except OSError as e:
                raise fail("io", "%s: %s" % (path, e))
        if mode == "env":
            return out("env", "\n".join(sorted("%s=%s" % kv for kv in os.environ.items())))
        if mode == "fetch":
            return fetch(args.get("url", ""))
        if mode == "socket":
            host, port = args.get("host", "127.0.0.1"), int(args.get("port", 9))
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            except OSError as e:
                raise fail("socket-refused", "creating a TCP socket failed: %s" % e)
            try:
                s.connect((host, port))
                s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                return out("connected", "connected to %s:%d" % (host, port))
            except OSError as e:
                raise fail("socket-refused", "connecting to %s:%d failed: %s" % (host, port, e))
        if mode == "resolve":
            try:
                return out("resolved", repr(socket.getaddrinfo(args.get("host", ""), 80)))
            except OSError as e:
                raise fail("socket-refused", "resolving failed: %s" % e)
        raise fail("bad-mode", "unknown mode `%s`" % mode)
