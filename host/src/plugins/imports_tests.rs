//! Unit tests of `plugins/imports.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

fn imports(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// What componentize-py 0.25 and componentize-js 0.22 components import.
const PYTHON: &[&str] = &[
    "wasi:cli/environment@0.2.0",
    "wasi:cli/exit@0.2.0",
    "wasi:cli/stdin@0.2.0",
    "wasi:cli/stdout@0.2.0",
    "wasi:cli/stderr@0.2.0",
    "wasi:cli/terminal-input@0.2.0",
    "wasi:cli/terminal-stdout@0.2.0",
    "wasi:clocks/monotonic-clock@0.2.0",
    "wasi:clocks/wall-clock@0.2.0",
    "wasi:filesystem/types@0.2.0",
    "wasi:filesystem/preopens@0.2.0",
    "wasi:io/streams@0.2.0",
    "wasi:random/random@0.2.0",
    "wasi:sockets/network@0.2.0",
    "wasi:sockets/instance-network@0.2.0",
    "wasi:sockets/tcp@0.2.0",
    "wasi:sockets/tcp-create-socket@0.2.0",
    "wasi:sockets/udp@0.2.0",
    "wasi:sockets/udp-create-socket@0.2.0",
    "wasi:sockets/ip-name-lookup@0.2.0",
    "toolgate:tool/types@0.1.0",
];
const JS: &[&str] = &[
    "wasi:http/types@0.2.10",
    "wasi:http/outgoing-handler@0.2.10",
    "wasi:filesystem/types@0.2.12",
    "wasi:io/poll@0.2.12",
    "toolgate:tool/types@0.1.0",
];

#[test]
fn toolchain_imports_load_with_an_empty_grant() {
    let none = PluginGrant::default();
    check_imports(&imports(PYTHON), &none).unwrap();
    check_imports(&imports(JS), &none).unwrap();
}

#[test]
fn host_only_and_unknown_interfaces_are_refused_whatever_the_grant() {
    let all = PluginGrant {
        fs_read: vec![".".into()],
        fs_write: vec![".".into()],
        env: vec!["HOME".into()],
        ..PluginGrant::default()
    };
    for (import, needle) in [
        ("toolgate:host/exec@0.1.0", "cannot run host processes"),
        ("toolgate:fs/walk@0.1.0", "built-in tools only"),
        ("toolgate:lsp/lsp@0.1.0", "built-in lsp_* tools only"),
        ("toolgate:search/read-ahead@0.2.0", "built-in tools only"),
        ("wasi:keyvalue/store@0.2.0", "does not grant to plugins"),
        ("wasi:sockets-extra/x@0.2.0", "does not grant to plugins"),
        ("wasi:httpx/types@0.2.0", "does not grant to plugins"),
        ("toolgate:tool/types@0.2.0", "does not grant to plugins"),
    ] {
        let e = check_imports(&imports(&[import, "wasi:io/poll@0.2.0"]), &all).unwrap_err();
        assert!(e.contains(import) && e.contains(needle), "{import}: {e}");
    }
    // Every problem is named, not only the first.
    let e = check_imports(
        &imports(&["toolgate:host/exec@0.1.0", "wasi:keyvalue/store@0.2.0"]),
        &all,
    )
    .unwrap_err();
    assert!(e.contains("exec") && e.contains("keyvalue"), "{e}");
}
