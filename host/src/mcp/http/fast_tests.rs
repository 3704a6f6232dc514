//! Unit tests of reading a call's message as rmcp reads it.

use super::*;
use rmcp::model::ClientJsonRpcMessage;
use serde_json::json;

/// What rmcp makes of `message` when it is a request: the request, serialized back.
fn rmcp_reads(message: &Value) -> Option<Value> {
    match serde_json::from_value::<ClientJsonRpcMessage>(message.clone()) {
        Ok(JsonRpcMessage::Request(r)) => Some(serde_json::to_value(r).unwrap()),
        _ => None,
    }
}

#[test]
fn a_message_is_read_as_a_request_exactly_when_rmcp_reads_it_as_one_and_the_same() {
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "read", "arguments": {"path": "a"}}}),
        json!({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "read", "_meta": {"progressToken": 3, "k": "v"}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read", "requestState": "s", "inputResponses": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read"}, "extra": true}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
        // Requests, but no calls (rmcp reads them as requests of its own kind for unknown ones).
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call"}),
        json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 11, "method": "no/such", "params": {}}),
        // Not requests, or not requests rmcp reads.
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "read"}, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "read"}, "error": {"code": 1, "message": "m"}}),
        json!({"jsonrpc": "1.0", "id": 7, "method": "tools/call", "params": {"name": "read"}}),
        json!({"id": 8, "method": "tools/call", "params": {"name": "read"}}),
        json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "read"}}),
        json!({"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": {"name": "read"}}),
        json!({"jsonrpc": "2.0", "id": 12, "result": {}}),
        json!([1, 2]),
        json!("tools/call"),
    ];
    let mut requests = 0;
    for message in messages {
        let ours = request(message.clone()).map(|r| serde_json::to_value(r).unwrap());
        assert_eq!(ours, rmcp_reads(&message), "{message}");
        requests += usize::from(ours.is_some());
    }
    assert_eq!(
        requests, 8,
        "the cases meant to be requests are read as requests"
    );
}
