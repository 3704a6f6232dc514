"""Drive `toolgate serve` with the official MCP Python SDK (2.x): one scenario per argument
set, each an approval round trip (a `write` that needs approval, answered `once` through the
SDK's elicitation callback). Prints one JSON line per scenario; exits 1 on any failure.

usage: client.py --mode auto|legacy (--stdio BINARY WORKSPACE | --http URL TOKEN) FILE
"""

import argparse
import asyncio
import json
import logging
import os
import sys

import mcp
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.seen = []

    def emit(self, record):
        self.seen.append(record.getMessage())


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True)
    ap.add_argument("--stdio", nargs=2, metavar=("BINARY", "WORKSPACE"))
    ap.add_argument("--http", nargs=2, metavar=("URL", "TOKEN"))
    ap.add_argument("file")
    a = ap.parse_args()

    warnings = Warnings()
    logging.getLogger("mcp").addHandler(warnings)
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "once"})

    if a.stdio:
        env = {k: v for k, v in os.environ.items() if k.startswith(("TOOLGATE_", "XDG_"))}
        server = StdioServerParameters(
            command=a.stdio[0], args=["--workspace", a.stdio[1], "serve"], env=env
        )
    else:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {a.http[1]}"})
        server = streamable_http_client(a.http[0], http_client=http)

    out = {"mode": a.mode, "transport": "stdio" if a.stdio else "http"}
    async with Client(server, mode=a.mode, elicitation_callback=elicit) as client:
        out["protocol"] = str(client.session.protocol_version)
        tools = await client.list_tools()
        out["tools"] = len(tools.tools)
        r = await client.call_tool("write", {"path": a.file, "content": "from python\n"})
        out["is_error"] = bool(r.is_error)
        out["text"] = "".join(getattr(c, "text", "") for c in r.content)[:300]
    out["asked"] = len(asked)
    out["warnings"] = warnings.seen
    out["sdk"] = mcp.__name__
    print(json.dumps(out), flush=True)
    ok = not out["is_error"] and out["asked"] == 1 and not warnings.seen
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
