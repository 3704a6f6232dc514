#!/usr/bin/env bash
# Makes sure ripgrep is there for the grep comparison tests (tests/integration/grep_modes.rs)
# and prints its path on the last line of stdout.
#   - TOOLGATE_RG=/path: use that binary (it must be executable).
#   - rg on PATH: print it.
#   - else, as root with apt-get: install Debian's ripgrep package, print it.
#   - else exit 1 saying what is missing.
set -euo pipefail

if [ -n "${TOOLGATE_RG:-}" ]; then
    if [ -x "$TOOLGATE_RG" ] && [ -f "$TOOLGATE_RG" ]; then
        echo "$TOOLGATE_RG"
        exit 0
    fi
    echo "TOOLGATE_RG=$TOOLGATE_RG is not an executable file" >&2
    exit 1
fi

if command -v rg >/dev/null 2>&1; then
    command -v rg
    exit 0
fi

if [ "${EUID:-$(id -u)}" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "rg is not installed and apt-get is not available as root; install Debian's ripgrep package" >&2
    exit 1
fi

log="$(mktemp -t install-ripgrep.XXXXXX.log)"
echo "installing ripgrep with apt-get (log: $log)" >&2
if ! {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ripgrep
} >"$log" 2>&1; then
    echo "apt-get could not install ripgrep; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi

if command -v rg >/dev/null 2>&1; then
    command -v rg
    exit 0
fi
echo "apt-get installed ripgrep but no rg is on PATH (see $log)" >&2
exit 1
