//! Guest SDK for toolgate tools.
//!
//! A tool is a type that implements [`Tool`] plus one [`register_tool!`] call. Build the crate
//! with `cargo build --release --target wasm32-wasip2` and the result is a component that
//! exports the `toolgate:tool` world (see `tools-wit/`).
//!
//! ```ignore
//! use toolgate_guest::{json, Context, Descriptor, Output, Risk, Tool, ToolError, Value};
//!
//! struct Hello;
//! impl Tool for Hello {
//!     fn describe() -> Descriptor {
//!         Descriptor::new("hello", "Say hello.", json!({"type": "object"}), Risk::ReadOnly)
//!     }
//!     fn call(_input: Value, _cx: &Context) -> Result<Output, ToolError> {
//!         Ok(Output::new("said hello", "hello"))
//!     }
//! }
//! toolgate_guest::register_tool!(Hello);
//! ```
//!
//! The host validates the input against the schema and rewrites every declared path field to
//! the canonical path inside the sandbox before `call` runs; the sandbox only holds what the
//! host granted for this one call.
//!
//! Optional host capabilities are cargo features: `exec` (module `exec`: host processes
//! through the host's gate) and `http` (module `http`: outgoing HTTP to the hosts the tool is
//! allowed to reach). `lsp` (module `lsp`, built-in tools only): the workspace's language
//! servers through the host. `host-walk` and `host-read-ahead` (built-in tools only) make
//! [`walk::walk`] and [`files::files`] ask the host to list and read ahead.

mod context;
#[cfg(feature = "exec")]
pub mod exec;
pub mod files;
#[cfg(feature = "http")]
pub mod http;
pub mod ioerr;
#[cfg(feature = "lsp")]
pub mod lsp;
pub mod names;
mod output;
pub mod text;
pub mod walk;

pub use context::Context;
pub use ioerr::plain_io_error;
pub use output::{Budget, Descriptor, Output, PathAccess, Report, Risk, ToolError};
pub use serde_json::{self, json, Value};

/// The generated WIT bindings. Not part of the SDK's API: use the re-exports above.
#[doc(hidden)]
pub mod __wit {
    wit_bindgen::generate!({
        path: "../../tools-wit/wit/since_v0.1.0",
        world: "tool",
        pub_export_macro: true,
        default_bindings_module: "toolgate_guest::__wit",
    });
}

/// A tool: its description and its behaviour for one call.
pub trait Tool {
    /// The tool's self-description. Must not touch the filesystem.
    fn describe() -> Descriptor;

    /// Handle one call. `input` has been validated against the schema by the host.
    fn call(input: Value, cx: &Context) -> Result<Output, ToolError>;
}

/// Glue between [`Tool`] and the generated bindings; used by [`register_tool!`].
#[doc(hidden)]
pub mod __private {
    use super::{Context, Tool, ToolError};
    use crate::__wit::toolgate::tool::types as wit;

    pub fn describe<T: Tool>() -> wit::Descriptor {
        T::describe().into_wit()
    }

    pub fn call<T: Tool>(
        input: String,
        cx: wit::CallContext,
    ) -> Result<wit::Output, wit::ToolError> {
        let input: crate::Value = serde_json::from_str(&input).map_err(|e| {
            ToolError::new("bad-input", format!("the input is not valid JSON: {e}")).into_wit()
        })?;
        let cx = Context::from_wit(cx);
        T::call(input, &cx)
            .map(|o| o.into_wit())
            .map_err(|e| e.into_wit())
    }
}

/// Export a [`Tool`] implementation as this component's `toolgate:tool` world.
#[macro_export]
macro_rules! register_tool {
    ($tool:ty) => {
        struct __ToolgateExport;

        impl $crate::__wit::Guest for __ToolgateExport {
            fn describe() -> $crate::__wit::toolgate::tool::types::Descriptor {
                $crate::__private::describe::<$tool>()
            }

            fn call(
                input: ::std::string::String,
                context: $crate::__wit::toolgate::tool::types::CallContext,
            ) -> ::std::result::Result<
                $crate::__wit::toolgate::tool::types::Output,
                $crate::__wit::toolgate::tool::types::ToolError,
            > {
                $crate::__private::call::<$tool>(input, context)
            }
        }

        $crate::__wit::export!(__ToolgateExport with_types_in $crate::__wit);
    };
}
