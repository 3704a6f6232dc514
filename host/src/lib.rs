//! toolgate: a tool host for AI agents, CI jobs and plugins.
//!
//! Every tool call passes one gate ([`gate::Gate::call`]): the input is validated, every path
//! is checked against the workspace scope, the call is decided, and the tool runs as a
//! WebAssembly component with only the capabilities that decision granted. The result is an
//! honest, budgeted [`tools::Observation`], and everything is audited in the workspace's state
//! database.
//!
//! - [`gate`]: the ladder, from schema to decision, and the call pipeline.
//! - [`policy`]: policy files, key patterns and rules, project grants.
//! - [`sandbox`]: the engine, the artifact cache, capabilities -> WASI context, limits.
//! - [`tools`]: the registry of components and the observation format.
//! - [`state`]: SQLite state: audit, read records, file history.
//! - [`plugins`]: third-party components: manifests, install records, capability intersection.

pub mod cancel;
pub mod error;
pub mod exec;
pub mod fsutil;
pub mod gate;
pub mod key;
pub mod mcp;
pub mod plugins;
pub mod policy;
pub mod sandbox;
pub mod state;
pub mod telemetry;
pub mod text;
pub mod tools;
pub mod userdirs;
pub mod workspace;

pub use error::{Error, Result};
pub use gate::{Gate, GateOptions};
pub use tools::{Observation, Status};
