//! The bindings of the WIT packages at version 0.2.0 (the 0.1.0 ones stay linked beside them).

/// `toolgate:fs@0.2.0`: the host-assisted walk, with `files-matching`.
pub(crate) mod fs {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/fs/since_v0.2.0",
        world: "walk-host",
    });
}
