//! Which interfaces a plugin component may import, checked at install and at every load.
//!
//! An import is a request for a capability, not the capability: what a call can reach is
//! decided by the WASI context and the host hooks it runs with. So the standard WASI 0.2
//! interfaces that language toolchains link in whether or not the code uses them
//! (componentize-py links `wasi:sockets`, `wasi:filesystem` and `wasi:cli`; StarlingMonkey,
//! the engine of componentize-js, links `wasi:http` and `wasi:filesystem`) are accepted, and
//! each of them is inert unless the grant says otherwise:
//!
//! | interface | without a grant |
//! |---|---|
//! | `wasi:io`, `wasi:clocks`, `wasi:random` | nothing to grant: streams, time, random bytes |
//! | `wasi:cli` | empty environment (only granted `env` names), no arguments, stdin empty, stdout and stderr discarded, `exit` ends the call |
//! | `wasi:filesystem` | no preopens, so no descriptor exists and no path can be opened; with `fs_read`/`fs_write` only the granted directories, with the deny-list |
//! | `wasi:http` | every request is refused by the host (`HTTP-request-denied`) before any name is resolved; with `http` only the granted hosts |
//! | `wasi:sockets` | never granted: creating a TCP or UDP socket fails (`access-denied`) and name lookup fails, so no other socket operation has a socket to act on |
//!
//! Refused always: the host exec capability (`toolgate:host/exec`), language servers
//! (`toolgate:lsp`: built-in `lsp_*` tools only), the host-assisted walk
//! and read-ahead (`toolgate:fs/walk`, `toolgate:search/read-ahead`: built-ins only), and any
//! interface the host does not know.

use super::PluginGrant;

/// The host exec capability's interface: a component that imports it is session-capped (see
/// `crate::tools::Ceiling`), and a plugin that imports it is refused.
pub const EXEC_INTERFACE_PREFIX: &str = "toolgate:host/exec";

/// Interfaces any plugin may import; see the module documentation for what each can do
/// without a grant.
pub const ACCEPTED: &[&str] = &[
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:cli/",
    "wasi:filesystem/",
    "wasi:http/",
    "wasi:sockets/",
    "toolgate:tool/types@0.1.",
];

/// Check a component's imports. The standard WASI interfaces in [`ACCEPTED`] pass whatever the
/// grant (the call's WASI context and host hooks hold only what was granted); the host exec
/// capability, the host-assisted walk and read-ahead, and anything unknown never do.
pub fn check_imports(imports: &[String], grant: &PluginGrant) -> std::result::Result<(), String> {
    // The grant no longer decides which imports load; it decides what they reach
    // (`Capabilities` of each call). Kept in the signature so install and load stay one check.
    let _ = grant;
    let mut problems = Vec::new();
    for import in imports {
        if ACCEPTED.iter().any(|p| import.starts_with(p)) {
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
        if import.starts_with(crate::sandbox::LSP_INTERFACE_PREFIX) {
            problems.push(format!(
                "it imports `{import}`: language servers are for the built-in lsp_* tools only in this version of toolgate"
            ));
            continue;
        }
        if import.starts_with(EXEC_INTERFACE_PREFIX) {
            problems.push(format!(
                "it imports `{import}`: plugins cannot run host processes in this version of toolgate"
            ));
            continue;
        }
        problems.push(format!(
            "it imports `{import}`, an interface toolgate does not grant to plugins (it accepts wasi:io, wasi:clocks, wasi:random, wasi:cli, wasi:filesystem, wasi:http, wasi:sockets and toolgate:tool/types); build it without that interface"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

#[cfg(test)]
#[path = "imports_tests.rs"]
mod tests;
