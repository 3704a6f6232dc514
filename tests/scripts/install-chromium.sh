#!/usr/bin/env bash
# Makes sure a Chromium is there for the browser tests (tests/integration/browser.rs) and
# prints its path on the last line of stdout.
#   - TOOLGATE_CHROMIUM=/path: use that binary (it must be executable).
#   - chromium / chromium-browser / google-chrome on PATH: print it.
#   - else, as root with apt-get: install Debian's chromium package (and a font), print it.
#   - else exit 1 saying what is missing.
set -euo pipefail

if [ -n "${TOOLGATE_CHROMIUM:-}" ]; then
    if [ -x "$TOOLGATE_CHROMIUM" ] && [ -f "$TOOLGATE_CHROMIUM" ]; then
        echo "$TOOLGATE_CHROMIUM"
        exit 0
    fi
    echo "TOOLGATE_CHROMIUM=$TOOLGATE_CHROMIUM is not an executable file" >&2
    exit 1
fi

find_chromium() {
    local name
    for name in chromium chromium-browser google-chrome google-chrome-stable; do
        if command -v "$name" >/dev/null 2>&1; then
            command -v "$name"
            return 0
        fi
    done
    return 1
}

if find_chromium; then
    exit 0
fi

if [ "${EUID:-$(id -u)}" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium is not installed and apt-get is not available as root; install Debian's chromium package" >&2
    exit 1
fi

log="$(mktemp -t install-chromium.XXXXXX.log)"
echo "installing chromium with apt-get (log: $log)" >&2
if ! {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            chromium fonts-dejavu-core
} >"$log" 2>&1; then
    echo "apt-get could not install chromium; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi

if find_chromium; then
    exit 0
fi
echo "apt-get installed chromium but no chromium is on PATH (see $log)" >&2
exit 1
