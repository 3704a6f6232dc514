//! Every tool declares the observation's JSON Schema as its MCP `outputSchema`, and what each
//! tool returns as `structuredContent` (ok, error and denied alike) conforms to it.

use crate::common::*;
use serde_json::{json, Value};
use toolgate::mcp::{mcp_tool, render};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tools_structured_result_conforms_to_its_declared_output_schema() {
    let ws = Ws::new();
    ws.write("src/a.txt", "alpha\nbeta\n");
    let gate = gate_granting(&ws, &["write", "edit", "multiedit", "shell:echo"]).await;
    gate.preload().await;
    read_first(&gate, "src/a.txt").await;
    let calls: Vec<(&str, Value)> = vec![
        ("read", json!({"path": "src/a.txt"})),
        ("read", json!({"path": "src/missing.txt"})),
        ("ls", json!({"path": "src"})),
        ("glob", json!({"pattern": "**/*.txt"})),
        ("grep", json!({"pattern": "alpha"})),
        ("grep", json!({"pattern": "("})),
        ("write", json!({"path": "src/b.txt", "content": "new\n"})),
        (
            "edit",
            json!({"path": "src/a.txt", "old_string": "beta", "new_string": "gamma"}),
        ),
        (
            "multiedit",
            json!({"path": "src/a.txt", "edits": [{"old_string": "alpha", "new_string": "delta"}]}),
        ),
        ("fetch", json!({"url": "http://127.0.0.1:9/"})),
        ("shell", json!({"command": "echo hi"})),
        ("job_output", json!({"job_id": "none"})),
        ("job_kill", json!({"job_id": "none"})),
        ("read", json!({"path": "../outside"})),
        ("read", json!({"nonsense": true})),
    ];
    let mut statuses = std::collections::BTreeSet::new();
    for (tool, input) in calls {
        let info = gate.tools().find(|t| t.name == tool).unwrap().clone();
        let declared = mcp_tool(&info)
            .output_schema
            .unwrap_or_else(|| panic!("{tool} declares no outputSchema"));
        let validator = jsonschema::validator_for(&Value::Object((*declared).clone())).unwrap();
        let o = call(&gate, tool, input.clone()).await;
        statuses.insert(o.status.as_str());
        let structured = render(&o).structured_content.unwrap();
        let problems: Vec<String> = validator
            .iter_errors(&structured)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(
            problems.is_empty(),
            "{tool} {input}: {problems:?}\n{structured:#}"
        );
    }
    // The calls above reached every way a call ends but waiting.
    for s in ["ok", "error", "denied"] {
        assert!(statuses.contains(s), "no call ended {s}: {statuses:?}");
    }
}
