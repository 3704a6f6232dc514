#!/usr/bin/env bash
# Installs the Python and JavaScript plugin toolchains for tests/integration/plugin_langs.rs and
# tests/bench/plugin_langs.rs into a cache under target/ (reused when present):
#   - componentize-py (PyPI) in a venv:            $CACHE/venv/bin/componentize-py
#   - componentize-js (npm) in a prefix:           $CACHE/js/node_modules/.bin/componentize-js
#     (the engine `jco componentize` runs; jco 1.35's own command cannot read a WIT folder
#     given by path in this setup, "failed to get path metadata", so the tests call
#     componentize-js's CLI directly and do not install jco)
# $CACHE is $TOOLGATE_PLUGIN_TOOLCHAINS, else target/plugin-toolchains of this checkout.
# Prints `python=PATH` and/or `js=PATH` lines on stdout for what is usable; a toolchain that
# cannot be installed (registry unreachable, no python3 venv, no npm) is reported on stderr
# with the reason and left out. Exit status 0 when at least one is usable, else 1.
set -uo pipefail

COMPONENTIZE_PY_VERSION=0.25.1
COMPONENTIZE_JS_VERSION=0.22.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${TOOLGATE_PLUGIN_TOOLCHAINS:-$here/../../target/plugin-toolchains}"
mkdir -p "$cache"
cache="$(cd "$cache" && pwd)"
ok=0

# ---- Python: componentize-py in a venv ----
venv="$cache/venv"
py_bin="$venv/bin/componentize-py"
py_stamp="$venv/.toolgate-componentize-py-$COMPONENTIZE_PY_VERSION"
if [ -x "$py_bin" ] && [ -f "$py_stamp" ]; then
    echo "python=$py_bin"
    ok=1
elif ! command -v python3 >/dev/null 2>&1; then
    echo "python toolchain: python3 is not installed" >&2
else
    log="$cache/install-python.log"
    rm -rf "$venv"
    if python3 -m venv "$venv" >"$log" 2>&1 &&
        "$venv/bin/pip" install --disable-pip-version-check -q \
            "componentize-py==$COMPONENTIZE_PY_VERSION" >>"$log" 2>&1 &&
        [ -x "$py_bin" ]; then
        touch "$py_stamp"
        echo "python=$py_bin"
        ok=1
    else
        echo "python toolchain: could not install componentize-py==$COMPONENTIZE_PY_VERSION from PyPI (is pypi.org reachable? python3-venv installed?); the end of $log:" >&2
        tail -n 15 "$log" >&2
        rm -rf "$venv"
    fi
fi

# ---- JavaScript: componentize-js with npm ----
js="$cache/js"
js_bin="$js/node_modules/.bin/componentize-js"
js_stamp="$js/.toolgate-componentize-js-$COMPONENTIZE_JS_VERSION"
if [ -x "$js_bin" ] && [ -f "$js_stamp" ]; then
    echo "js=$js_bin"
    ok=1
elif ! command -v npm >/dev/null 2>&1; then
    echo "js toolchain: npm is not installed" >&2
else
    log="$cache/install-js.log"
    rm -rf "$js"
    mkdir -p "$js"
    if npm install --prefix "$js" --no-audit --no-fund --no-save --loglevel=error \
            "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION" >"$log" 2>&1 &&
        [ -x "$js_bin" ]; then
        touch "$js_stamp"
        echo "js=$js_bin"
        ok=1
    else
        echo "js toolchain: could not install @bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION from npm (is registry.npmjs.org reachable?); the end of $log:" >&2
        tail -n 15 "$log" >&2
        rm -rf "$js"
    fi
fi

[ "$ok" = 1 ]
