//! toolgate: a tool host for AI agents, CI jobs and plugins.
//!
//! Every tool call passes one gate ([`gate::Gate::call`]): the input is validated, every path
//! is checked against the workspace scope, the call is decided, and the tool runs as a
//! WebAssembly component with only the capabilities that decision granted. The result is an
//! honest, budgeted [`tools::Observation`], and everything is audited in the workspace's state
//! database.
//!
//! The modules, top layer first; a module uses only its own layer and those below (see
//! docs/architecture.md; `tests/integration/layering.rs` checks it):
//!
//! - [`mcp`]: the MCP server (stdio and streamable HTTP, elicitation, 2026-07-28 request state).
//! - [`console`]: the local console's page and API (approvals, live audit, grants, undo).
//! - [`gate`]: one call's pipeline: validate, mode, rules, hooks, grants, ask, then run.
//! - [`policy`]: policy layers and files, modes, hook specs, project grants, workspace trust.
//! - [`tools`]: the registry of built-in and plugin components, and the observation format.
//! - [`plugins`]: third-party components: manifests, install records, capability intersection.
//! - [`sandbox`]: the engine, artifact cache, capabilities → WASI context, guards, host walk.
//! - [`history`]: file history and the user's undo (restores on directory descriptors).
//! - [`exec`]: the shell's host side: command analysis, confinement, spawning, jobs.
//! - [`state`]: the SQLite state (audit, reads, history, session grants) and the signing key.
//! - [`telemetry`]: export of the audit over OTLP/HTTP.
//! - [`workspace`]: the workspace's rules: scope, deny-list, `.toolgate/` layout, link view.
//! - [`key`]: call keys (`tool:target`), key patterns and rule decisions.
//! - [`cancel`]: the cancel token a surface passes down with a call.
//! - [`text`]: cutting text to a budget, visibly; names and text shown plainly.
//! - [`error`]: the library's error type and typed limits.
//! - [`fsutil`]: filesystem helpers that never block on or follow what a workspace planted.
//! - [`userdirs`]: the user's config, cache and state directories.

pub mod cancel;
pub mod console;
pub mod error;
pub mod exec;
pub mod fsutil;
pub mod gate;
pub mod history;
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
