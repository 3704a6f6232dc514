//! End-to-end tests of toolgate: every call goes through the real gate, the real sandbox and
//! the real guest components (built by `host/build.rs`), in a fresh temporary workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod raw_stdio;

// The confinement's attack tests as nobody, as root without CAP_SYS_ADMIN, and with user
// namespaces refused (each re-runs one test in a child; see modes.rs).
mod modes;
#[macro_use]
mod unprivileged;

mod attacks;
mod ci_recipe;
mod cli;
mod doctor;
mod download;
mod fetch;
mod fsguard;
mod hooks;
mod ladder;
mod limits;
mod lsp;
mod mcp;
mod plugins;
mod read_ahead;
mod shell;
mod shell_classifier;
mod shell_exit;
mod shell_kernel;
mod shell_network;
mod shell_reuse;
mod state;
mod tools_edit;
mod tools_read;
mod tools_search;
mod walk;

// Untrusted workspaces (issue #13).
mod git_exec;
mod host_stall;
mod net_edge;
mod path_rules;
mod redaction;
mod trust;

// The host acts on what it checked (issue #14).
mod cancel_approval;
mod guard_race;
mod names;
mod state_files;
mod walk_race;

// The agent's path at full speed, MCP 2026-07-28 (issue #15).
mod cold_start;
mod mcp_2026;
mod mcp_2026_calls;
mod mcp_http_calls;
mod mcp_stdio_calls;
#[path = "../raw_http.rs"]
mod raw_http;
mod search_parallel;
mod telemetry;

// Structure (issue #16): imports point one way, no cycles, files stay small.
mod layering;

// The person beside the agent (issue #17): history and undo, approvals that show the
// change, a readable audit.
mod approval_diff;
mod audit_cli;
mod history;
mod plain_errors;

// The local console (issue #17): a real headless browser over the DevTools protocol.
mod browser;
mod console;
mod credentials;
mod shell_scopes;

// The model-facing surface (issue #18).
mod descriptions;
mod fetch_format;
mod grep_modes;
mod output_schema;
mod paging;
mod read_media;

// Plugin authors (issue #19).
mod plugin_kit;
mod plugin_langs;
mod plugin_oci;
mod plugin_trace;

// Issue #49: a hostile repository's own files and database, reflected credentials, a second
// client with a token of its own (one file per attack class, see hostile/mod.rs).
mod hostile;
