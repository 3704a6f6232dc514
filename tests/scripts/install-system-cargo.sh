#!/usr/bin/env bash
# Makes sure a cargo that any user can run is at /usr/bin/cargo (Debian's `cargo`, with its
# `rustc`), for the confined `cargo test` of a tiny crate that the integration tests run as
# uid 65534 (tests/integration/unprivileged.rs): rustup's cargo lives under /root, which nobody
# can enter. Prints the cargo's version on the last line of stdout.
#   - /usr/bin/cargo runs: print its version.
#   - else, as root with apt-get: install `cargo` (apt-get update first when the package is
#     not known yet, or when installing from the lists at hand fails), print it.
#   - else exit 1 saying what is missing.
set -euo pipefail

have() {
    [ -x /usr/bin/cargo ] && /usr/bin/cargo --version 2>/dev/null
}
if have; then
    exit 0
fi
if [ "${EUID:-$(id -u)}" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "/usr/bin/cargo is missing and apt-get is not available as root; install Debian's cargo package" >&2
    exit 1
fi
log="$(mktemp -t install-system-cargo.XXXXXX.log)"
echo "installing Debian's cargo with apt-get (log: $log)" >&2
install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cargo
}
update() {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
}
if ! {
    if apt-cache show cargo >/dev/null 2>&1; then
        install || { update && install; }
    else
        update && install
    fi
} >"$log" 2>&1; then
    echo "apt-get could not install cargo; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi
if have; then
    exit 0
fi
echo "apt-get ran but /usr/bin/cargo still does not run (see $log)" >&2
exit 1
