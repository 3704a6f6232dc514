//! Unit tests of the stdio transport: ids of bad lines, request ids kept apart, bad lines told apart.

use super::*;

#[test]
fn the_top_level_id_is_found_in_a_line_start() {
    let id = |s: &str| leading_id(s.as_bytes());
    assert_eq!(
        id(r#"{"jsonrpc":"2.0","id":7,"method":"x","params":{"#),
        json!(7)
    );
    assert_eq!(id(r#"{ "id" : "a\"b", "method""#), json!("a\"b"));
    assert_eq!(
        id(r#"{"params":{"id":3,"s":"}\"{"},"id":-4,"p":"aaa"#),
        json!(-4)
    );
    assert_eq!(
        id(r#"{"method":"x","params":{"id":3,"path":"aaaa"#),
        Value::Null
    );
    assert_eq!(id(r#"{"jsonrpc":"2.0","id":12"#), Value::Null, "maybe 123");
    assert_eq!(id(r#"{"id":null,"#), Value::Null);
    assert_eq!(id(r#"[{"id":1}"#), Value::Null);
}

fn rx(v: Value) -> RxJsonRpcMessage<RoleServer> {
    serde_json::from_value(v).unwrap()
}

fn answer(id: &Value) -> TxJsonRpcMessage<RoleServer> {
    serde_json::from_value(json!({"jsonrpc":"2.0","id":id,"result":{}})).unwrap()
}

fn id_of<T: serde::Serialize>(m: &T) -> Value {
    let v = serde_json::to_value(m).unwrap();
    if v.get("method") == Some(&json!("notifications/cancelled")) {
        return v["params"]["requestId"].clone();
    }
    v["id"].clone()
}

#[test]
fn a_reused_id_is_a_new_request_and_the_cancelled_one_stays_cancelled() {
    let mut ids = Ids::default();
    let call = ids
        .inbound(rx(json!({"jsonrpc":"2.0","id":5,"method":"ping"})))
        .unwrap();
    let first = id_of(&call);
    assert_ne!(first, json!(5));
    let cancel = ids
        .inbound(rx(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled",
            "params":{"requestId":5}}),
        ))
        .unwrap();
    assert_eq!(id_of(&cancel), first, "the cancellation names our id");
    let again = ids
        .inbound(rx(json!({"jsonrpc":"2.0","id":5,"method":"ping"})))
        .unwrap();
    let second = id_of(&again);
    assert_ne!(second, first);
    // The cancelled call's late answer goes nowhere; the new request's gets id 5.
    assert!(ids.outbound(answer(&first)).is_none());
    assert_eq!(id_of(&ids.outbound(answer(&second)).unwrap()), json!(5));
    assert!(ids.outbound(answer(&second)).is_none(), "answered once");
    // A cancellation of nothing in flight (or of one of our own ids) is dropped.
    assert!(ids
        .inbound(rx(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled",
            "params":{"requestId":5}})
        ))
        .is_none());
    assert!(ids
        .inbound(rx(
            json!({"jsonrpc":"2.0","method":"notifications/cancelled",
            "params":{"requestId":second}})
        ))
        .is_none());
    // String ids come back as strings.
    let s = ids
        .inbound(rx(json!({"jsonrpc":"2.0","id":"a","method":"ping"})))
        .unwrap();
    assert_eq!(
        id_of(&ids.outbound(answer(&id_of(&s))).unwrap()),
        json!("a")
    );
    assert!(ids.client.is_empty() && ids.ours.is_empty());
}

#[test]
fn bad_lines_are_told_apart() {
    assert!(matches!(
        parse(b"{\"a\":\n"),
        Line::Bad(Value::Null, -32700, _)
    ));
    assert!(matches!(parse(b"[]\n"), Line::Bad(Value::Null, -32600, _)));
    assert!(matches!(
        parse(b"{\"id\":2}\n"),
        Line::Bad(Value::Number(_), -32600, _)
    ));
    assert!(matches!(
        parse(b"{\"jsonrpc\":\"2.0\",\"method\":\"x/y\"}\n"),
        Line::Skip | Line::Message(_)
    ));
    assert!(matches!(parse(b" \r\n"), Line::Skip));
}

/// The direct read and the read through `Value` give the same message, and what only the
/// second judges (a batch, duplicate keys) still reaches it.
#[test]
fn a_message_read_directly_is_the_one_read_through_a_value() {
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"path":"a.txt","offset":2}}}"#,
        r#" {"jsonrpc":"2.0","id":"x","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
        // Duplicate keys: the direct read refuses them, the `Value` keeps the last.
        r#"{"jsonrpc":"2.0","id":4,"method":"ping","id":5}"#,
    ];
    for line in lines {
        let Line::Message(direct) = parse(line.as_bytes()) else {
            panic!("{line} was not read");
        };
        let through: RxJsonRpcMessage<RoleServer> =
            serde_json::from_value(serde_json::from_str::<Value>(line).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_value(&*direct).unwrap(),
            serde_json::to_value(&through).unwrap(),
            "{line}"
        );
    }
    // Arrays (a batch, or a message's fields by position) are not messages.
    for line in [
        r#"["2.0", 7, {"method": "ping"}]"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
    ] {
        assert!(
            matches!(parse(line.as_bytes()), Line::Bad(_, -32600, _)),
            "{line}"
        );
    }
}
