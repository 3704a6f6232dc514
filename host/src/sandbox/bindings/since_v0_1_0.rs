//! The bindings of the WIT packages at version 0.1.0: the `toolgate:tool` world the tools
//! export, and the host capabilities they import (`exec`, `fs/walk`, `lsp`).

/// `toolgate:tool@0.1.0`: the world every tool exports.
pub(crate) mod tool {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/since_v0.1.0",
        world: "tool",
        exports: { default: async },
    });
}

/// `toolgate:host@0.1.0`: the `exec` interface.
pub(crate) mod exec {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/host/since_v0.1.0",
        world: "exec-host",
        imports: { default: async },
    });
}

/// `toolgate:fs@0.1.0`: the host-assisted walk.
pub(crate) mod fs {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/fs/since_v0.1.0",
        world: "walk-host",
    });
}

/// `toolgate:lsp@0.1.0`: questions to the call's language servers.
pub(crate) mod lsp {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/lsp/since_v0.1.0",
        world: "lsp-host",
        imports: { default: async },
    });
}
