//! The descriptions the model reads: one file per built-in tool, filled from this workspace's
//! policy at listing time (the shell's banned and read-only programs and its network, the hosts
//! fetch reaches), the same over MCP and `toolgate tools --json`.

use crate::common::*;
use serde_json::Value;
use toolgate::policy::PolicySource;
use toolgate::{Gate, GateOptions};

const POLICY: &str = r#"
mode = "ask"

[shell]
banned = ["terraform"]

[[rules]]
key = "fetch:docs.rs"
decision = "allow"

[[rules]]
key = "fetch:evil.example"
decision = "deny"
"#;

async fn gate_with_policy(ws: &Ws, policy: &str, grants: &[&str]) -> Gate {
    let file = ws.user_root().join("policy.toml");
    std::fs::write(&file, policy).unwrap();
    Gate::open(GateOptions {
        workspace: ws.root(),
        cache_dir: Some(cache_dir()),
        user_dirs: Some(ws.user_dirs()),
        policy: Some(PolicySource::File(file)),
        grants: grants.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    })
    .await
    .unwrap()
}

fn description(gate: &Gate, tool: &str) -> String {
    gate.listed_tools()
        .into_iter()
        .find(|t| t.name == tool)
        .unwrap_or_else(|| panic!("{tool} is not listed"))
        .description
}

#[tokio::test]
async fn the_shell_description_names_the_policys_banned_program_and_the_read_only_class() {
    let ws = Ws::new();
    let gate = gate_with_policy(&ws, POLICY, &[]).await;
    gate.preload().await;
    let shell = description(&gate, "shell");
    assert!(!shell.contains("{{"), "unfilled placeholder:\n{shell}");
    // The policy's own ban, beside the built-in ones.
    assert!(shell.contains("`terraform`"), "{shell}");
    assert!(shell.contains("`curl`"), "{shell}");
    // The read-only class, git's read-only subcommands included.
    assert!(
        shell.contains("`cat`") && shell.contains("`git` (status"),
        "{shell}"
    );
    // No network for shell commands by default, and what to use instead.
    assert!(shell.contains("no network"), "{shell}");

    // Another policy, another text: nothing is baked in.
    let ws2 = Ws::new();
    let plain = gate_with_policy(&ws2, "mode = \"ask\"\n[shell]\nnetwork = true\n", &[]).await;
    let shell2 = description(&plain, "shell");
    assert!(!shell2.contains("`terraform`"), "{shell2}");
    assert!(shell2.contains("reach the network directly"), "{shell2}");
}

#[tokio::test]
async fn the_fetch_description_names_the_hosts_allowed_and_denied() {
    let ws = Ws::new();
    let gate = gate_with_policy(&ws, POLICY, &["fetch:crates.io"]).await;
    let fetch = description(&gate, "fetch");
    assert!(!fetch.contains("{{"), "unfilled placeholder:\n{fetch}");
    assert!(fetch.contains("`docs.rs`"), "{fetch}");
    assert!(fetch.contains("`crates.io`"), "a --grant host: {fetch}");
    assert!(fetch.contains("`evil.example`"), "{fetch}");
    assert!(fetch.contains("allow_private"), "{fetch}");

    let ws2 = Ws::new();
    let none = gate_with_policy(&ws2, "mode = \"ask\"\n", &[]).await;
    let fetch2 = description(&none, "fetch");
    assert!(fetch2.contains("No host is allowed in advance"), "{fetch2}");
}

#[tokio::test]
async fn every_builtin_description_is_written_for_the_model_and_fully_filled() {
    let ws = Ws::new();
    let gate = gate_with_policy(&ws, POLICY, &[]).await;
    gate.preload().await;
    let names: Vec<String> = gate.listed_tools().into_iter().map(|t| t.name).collect();
    for t in gate.listed_tools().into_iter().filter(|t| t.builtin) {
        let d = &t.description;
        assert!(!d.contains("{{"), "{}: unfilled placeholder:\n{d}", t.name);
        assert!(
            d.len() > 300,
            "{}: a description for the model says when to use the tool: {d}",
            t.name
        );
        // Each one points to another tool where that one is better.
        let others = names
            .iter()
            .filter(|n| *n != &t.name && d.contains(&format!("`{n}`")))
            .count();
        assert!(others > 0, "{} names no other tool:\n{d}", t.name);
    }
}

#[test]
fn tools_json_lists_the_filled_descriptions() {
    let ws = Ws::new();
    let policy = ws.user_root().join("p.toml");
    std::fs::write(&policy, POLICY).unwrap();
    let out = toolgate_command(&ws)
        .arg("--policy")
        .arg(&policy)
        .args(["tools", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let shell = tools.iter().find(|t| t["name"] == "shell").unwrap();
    let text = shell["description"].as_str().unwrap();
    assert!(
        text.contains("`terraform`") && !text.contains("{{"),
        "{text}"
    );
}

/// Over MCP each tool's listed form is made once per server, except a description that follows
/// the mode or the grants: after the mode changes, `tools/list` shows fetch's new hosts line
/// (a form kept from the first listing would still say no host is allowed).
#[tokio::test]
async fn over_mcp_the_fetch_description_follows_the_mode_while_other_forms_are_kept() {
    use rmcp::ServiceExt as _;
    let ws = Ws::new();
    let gate = std::sync::Arc::new(gate_with_policy(&ws, "mode = \"ask\"\n", &[]).await);
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = toolgate::mcp::McpConnection::new(gate.clone());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let conn = ().serve(client_io).await.unwrap();
    let listed = |tools: &[rmcp::model::Tool], name: &str| -> String {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        serde_json::to_string(t).unwrap()
    };

    let before = conn.list_all_tools().await.unwrap();
    assert!(
        listed(&before, "fetch").contains("No host is allowed in advance"),
        "{}",
        listed(&before, "fetch")
    );
    gate.set_mode(toolgate::policy::Mode::AllowAll);
    let after = conn.list_all_tools().await.unwrap();
    let fetch = listed(&after, "fetch");
    let hosts = fetch.split("Hosts:").nth(1).unwrap_or(&fetch);
    assert!(
        hosts.contains("Every public host is reached without asking"),
        "the fetch description did not follow the mode: Hosts:{}",
        hosts.chars().take(160).collect::<String>()
    );
    assert_eq!(listed(&before, "read"), listed(&after, "read"));
    conn.cancel().await.unwrap();
}
