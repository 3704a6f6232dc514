#!/bin/sh
# Runs client.py under the official MCP Python SDK (PyPI `mcp`, 2.x), installed into a venv
# under target/ on first use. Exit 3 (and a line naming what is missing) when Python, venv or
# the package cannot be had; any other failure is the test's.
set -u
here=$(cd "$(dirname "$0")" && pwd)
venv="${TG_MCP_PYTHON_VENV:-$here/../../target/mcp-python/venv}"
py=$(command -v python3 || true)
if [ -z "$py" ]; then
    echo "SKIP: python3 is not installed" >&2
    exit 3
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("mcp").startswith("2.") else 1)' 2>/dev/null; then
    mkdir -p "$(dirname "$venv")"
    if ! "$py" -m venv "$venv" >&2; then
        echo "SKIP: python3 -m venv failed (install the python3-venv package)" >&2
        exit 3
    fi
    if ! "$venv/bin/python" -m pip install -q 'mcp>=2,<3' >&2; then
        echo "SKIP: pip could not install the MCP Python SDK (PyPI package mcp>=2,<3); no network or no index?" >&2
        exit 3
    fi
fi
exec "$venv/bin/python" "$here/client.py" "$@"
