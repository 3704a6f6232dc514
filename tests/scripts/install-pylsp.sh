#!/usr/bin/env bash
# Makes sure Debian's python3-pylsp (with pyflakes for diagnostics) is there for the language
# server tests (host/src/exec/lsp/tests.rs), and prints pylsp's path on the last line of stdout.
#   - pylsp and pyflakes present: print it.
#   - else, as root with apt-get: apt-get update once, install them, print it.
#   - else exit 1 saying what is missing.
set -euo pipefail

# pyflakes must be importable by the interpreter pylsp runs under (its shebang: Debian's
# /usr/bin/python3), not by whatever python3 is first on PATH (pyenv's, on CI machines).
have() {
    local lsp py
    lsp="$(command -v pylsp 2>/dev/null)" || return 1
    read -r -a py < <(head -n 1 "$lsp" | sed -n 's/^#! *//p')
    [ "${#py[@]}" -gt 0 ] || py=(/usr/bin/python3)
    "${py[@]}" -c 'import pyflakes' >/dev/null 2>&1
}
if have; then
    command -v pylsp
    exit 0
fi
if [ "${EUID:-$(id -u)}" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "pylsp or pyflakes is missing and apt-get is not available as root; install Debian's python3-pylsp and python3-pyflakes" >&2
    exit 1
fi
log="$(mktemp -t install-pylsp.XXXXXX.log)"
echo "installing python3-pylsp and python3-pyflakes with apt-get (log: $log)" >&2
if ! {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pylsp python3-pyflakes
} >"$log" 2>&1; then
    echo "apt-get could not install python3-pylsp and python3-pyflakes; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
if have; then
    command -v pylsp
    exit 0
fi
echo "apt-get ran but pylsp or pyflakes is still missing (see $log)" >&2
exit 1
