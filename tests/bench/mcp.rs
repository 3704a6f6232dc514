//! MCP section of the benchmark (issue #15): ping, tools/list and tools/call over the real
//! binary on one stdio connection and over HTTP with keep-alive.

pub async fn run() {}
