//! `test-sockets`: a component that imports `wasi:sockets`, for the host test that refuses to
//! load such tools. Never ship it to users.
//!
//! Its call opens a TCP connection with `std::net`, which on wasm32-wasip2 goes through
//! `wasi:sockets/tcp`; the import is what matters, not whether the connection succeeds.

use toolgate_guest::{json, Context, Descriptor, Output, Risk, Tool, ToolError, Value};

struct TestSockets;

impl Tool for TestSockets {
    fn describe() -> Descriptor {
        Descriptor::new(
            "test-sockets",
            "Test-only tool that opens a raw TCP socket. Not for real use.",
            json!({"type": "object"}),
            Risk::ReadOnly,
        )
    }

    fn call(_input: Value, _cx: &Context) -> Result<Output, ToolError> {
        match std::net::TcpStream::connect("127.0.0.1:9") {
            Ok(_) => Ok(Output::new("connected", "connected to 127.0.0.1:9")),
            Err(e) => Err(ToolError::new(
                "connect-failed",
                format!("connecting to 127.0.0.1:9 failed: {e}"),
            )),
        }
    }
}

toolgate_guest::register_tool!(TestSockets);
