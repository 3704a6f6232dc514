#!/usr/bin/env bash
# Makes sure Debian's docker-registry (the CNCF distribution registry) and htpasswd are there
# for the OCI plugin tests (tests/integration/plugin_oci.rs), and prints the registry's path on
# the last line of stdout.
#   - /usr/bin/docker-registry and htpasswd present: print it.
#   - else, as root with apt-get: apt-get update once, install docker-registry and
#     apache2-utils, print it.
#   - else exit 1 saying what is missing.
set -euo pipefail

registry=/usr/bin/docker-registry
if [ -x "$registry" ] && command -v htpasswd >/dev/null 2>&1; then
    echo "$registry"
    exit 0
fi

if [ "${EUID:-$(id -u)}" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "$registry or htpasswd is missing and apt-get is not available as root; install Debian's docker-registry and apache2-utils packages" >&2
    exit 1
fi

log="$(mktemp -t install-docker-registry.XXXXXX.log)"
echo "installing docker-registry and apache2-utils with apt-get (log: $log)" >&2
if ! {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry apache2-utils
} >"$log" 2>&1; then
    echo "apt-get could not install docker-registry and apache2-utils; the end of $log:" >&2
    tail -n 30 "$log" >&2
    exit 1
fi

if [ -x "$registry" ] && command -v htpasswd >/dev/null 2>&1; then
    echo "$registry"
    exit 0
fi
echo "apt-get ran but $registry or htpasswd is still missing (see $log)" >&2
exit 1
