//! Which interfaces a plugin component may import, checked at install and at every load.

use super::PluginGrant;

/// Check a component's imports against a grant. Interfaces every tool may import (I/O
/// streams, clocks, random, the CLI basics with an empty environment unless granted, the
/// toolgate types) pass; the filesystem only with an `fs_read`/`fs_write` grant; `wasi:http`
/// only with an `http` grant; sockets, the host exec capability, the host-assisted walk and
/// read-ahead (`toolgate:fs/walk`, `toolgate:search/read-ahead`: built-ins only) and anything
/// unknown never.
pub fn check_imports(imports: &[String], grant: &PluginGrant) -> std::result::Result<(), String> {
    const ALWAYS: &[&str] = &[
        "wasi:io/",
        "wasi:clocks/",
        "wasi:random/",
        "wasi:cli/",
        "toolgate:tool/types@0.1.",
    ];
    let fs = !grant.fs_read.is_empty() || !grant.fs_write.is_empty();
    let http = !grant.http.is_empty();
    let mut problems = Vec::new();
    for import in imports {
        if ALWAYS.iter().any(|p| import.starts_with(p)) {
            continue;
        }
        if import.starts_with("wasi:filesystem/") {
            if !fs {
                problems.push(format!(
                    "it imports `{import}` but has no filesystem grant: request `fs_read`/`fs_write` paths in the manifest (and grant them), or build it without filesystem access"
                ));
            }
            continue;
        }
        if import.starts_with("wasi:http/") {
            if !http {
                problems.push(format!(
                    "it imports `{import}` but has no network grant: request the hosts it needs under `http` in the manifest (and grant them)"
                ));
            }
            continue;
        }
        if import.starts_with("wasi:sockets/") {
            problems.push(format!(
                "it imports `{import}`: raw sockets are never granted to plugins; make HTTP requests through wasi:http with an `http` grant instead"
            ));
            continue;
        }
        if import.starts_with(crate::sandbox::WALK_INTERFACE_PREFIX)
            || import.starts_with(crate::sandbox::SEARCH_INTERFACE_PREFIX)
        {
            problems.push(format!(
                "it imports `{import}`: the host-assisted walk and read-ahead are for the built-in tools only in this version of toolgate; walk the granted directories through wasi:filesystem instead (e.g. the SDK without its `host-walk` and `host-read-ahead` features)"
            ));
            continue;
        }
        if import.starts_with(crate::tools::registry::EXEC_INTERFACE_PREFIX) {
            problems.push(format!(
                "it imports `{import}`: plugins cannot run host processes in this version of toolgate"
            ));
            continue;
        }
        problems.push(format!(
            "it imports `{import}`, an interface toolgate does not grant to plugins"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
