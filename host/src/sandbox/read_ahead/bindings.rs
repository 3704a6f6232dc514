//! The WIT bindings of `toolgate:search@0.1.0` and `@0.2.0`, and the two versions linked
//! together. They are here, not in `sandbox::bindings`, because they map the reader resource
//! to [`super::Reader`].

/// `toolgate:search@0.1.0` (the files' contents only).
pub(crate) mod v1 {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/search/since_v0.1.0",
        world: "read-ahead-host",
        with: {
            "toolgate:search/read-ahead.reader": super::super::Reader,
        },
    });
}

/// `toolgate:search@0.2.0` (binary files and needles sorted out by the host).
pub(crate) mod v2 {
    wasmtime::component::bindgen!({
        path: "../tools-wit/wit/search/since_v0.2.0",
        world: "read-ahead-host",
        with: {
            "toolgate:search/read-ahead.reader": super::super::Reader,
        },
    });
}

/// Both versions, linked together (one reader per call across them).
pub(crate) struct ReadAheadHost;

impl ReadAheadHost {
    /// Add both versions' imports to `linker`.
    pub(crate) fn add_to_linker<T, D>(
        linker: &mut wasmtime::component::Linker<T>,
        host_getter: fn(&mut T) -> D::Data<'_>,
    ) -> wasmtime::Result<()>
    where
        T: 'static,
        D: wasmtime::component::HasData,
        for<'a> D::Data<'a>:
            v1::toolgate::search::read_ahead::Host + v2::toolgate::search::read_ahead::Host,
    {
        v1::ReadAheadHost::add_to_linker::<T, D>(linker, host_getter)?;
        v2::ReadAheadHost::add_to_linker::<T, D>(linker, host_getter)
    }
}
