//! Attacks on untrusted workspaces (issue #13): redaction.
//!
//! Secrets planted in tool inputs (write content, edit strings, shell text, fetch URLs) must
//! never reach the audit log by value: not in `toolgate audit --json`, not in the bytes of
//! `state.db` or its WAL. The input's sha256 (over the raw input) is still there.

use crate::common::*;
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use toolgate::state::AuditQuery;

/// One planted secret: the kind its marker must name, the text planted, and the part of it
/// that must never be stored.
struct Planted {
    kind: &'static str,
    text: &'static str,
    secret: &'static str,
}

/// One of every kind the scanner knows. No two share a long substring, so each absence check
/// stands alone.
fn planted() -> Vec<Planted> {
    let p = |kind, text, secret| Planted { kind, text, secret };
    vec![
        p("aws-access-key", "AKIAQ3EGTBXN7LR4KDPA", "AKIAQ3EGTBXN7LR4KDPA"),
        p(
            "aws-secret-key",
            "aws_secret_access_key = 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",
            "wT9sLq2Vx7Nb4Kc8Hm1Zp6Rd3Fg5Jy0UeAoIiWtS",
        ),
        p(
            "github-token",
            "ghp_Z8y7X6w5V4u3T2s1R0q9P8o7N6m5L4k3J2i1",
            "ghp_Z8y7X6w5V4u3T2s1R0q9P8o7N6m5L4k3J2i1",
        ),
        p(
            "github-token",
            "github_pat_11AZ9QW0Y0bcdfGHJKLM_npqrstUVWXyz0123456789bcdfGHJK",
            "github_pat_11AZ9QW0Y0bcdfGHJKLM_npqrstUVWXyz0123456789bcdfGHJK",
        ),
        p(
            "gitlab-token",
            "glpat-Rk2pLq9WvZ3mN8bYt4Hc",
            "glpat-Rk2pLq9WvZ3mN8bYt4Hc",
        ),
        p(
            "slack-token",
            "xoxb-2048576123-4096152637-Qm7Rz2pKq9WvB3mN8bYt4Hc6",
            "xoxb-2048576123-4096152637-Qm7Rz2pKq9WvB3mN8bYt4Hc6",
        ),
        p(
            "stripe-key",
            "sk_live_51Hc6Fd1Gs5Ae0KuIoPzQJx7Rk2p",
            "sk_live_51Hc6Fd1Gs5Ae0KuIoPzQJx7Rk2p",
        ),
        p(
            "google-api-key",
            "AIzaSyB7Rk2pLq9WvZ3mN8bYt4Hc6Fd1Gs5Ae0K",
            "AIzaSyB7Rk2pLq9WvZ3mN8bYt4Hc6Fd1Gs5Ae0K",
        ),
        p(
            "openai-key",
            "sk-proj-Vb8Nc4Xz1Lk7Jh3Gf9Ds5Aq2Wp6Eo0Ri",
            "sk-proj-Vb8Nc4Xz1Lk7Jh3Gf9Ds5Aq2Wp6Eo0Ri",
        ),
        p(
            "anthropic-key",
            "sk-ant-api03-Hy6Tg2Rf8Ed4Ws0Qa7Zx3Cv9Bn5Mk1Lj-AA",
            "sk-ant-api03-Hy6Tg2Rf8Ed4Ws0Qa7Zx3Cv9Bn5Mk1Lj-AA",
        ),
        p(
            "jwt",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0b29sZ2F0ZSJ9.Pq4Wm8Xn2Bv6Cz0Lk3Jh7Gf1Ds5Ae9Ry",
            "eyJzdWIiOiJ0b29sZ2F0ZSJ9.Pq4Wm8Xn2Bv6Cz0Lk3Jh7Gf1Ds5Ae9Ry",
        ),
        p(
            "private-key",
            "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
        ),
        p("password", "password=Tr0ub4dor-x9", "Tr0ub4dor-x9"),
        p(
            "high-entropy",
            "blob Qm7Rk2pLq9WvZ3mN8bYt4Hc6Fd1Gs5Ae end",
            "Qm7Rk2pLq9WvZ3mN8bYt4Hc6Fd1Gs5Ae",
        ),
    ]
}

/// `toolgate audit --json` for `ws`: its stdout.
fn audit_json(ws: &Ws) -> String {
    let out = toolgate_command(ws)
        .args(["audit", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The bytes of the state database and its WAL, as they are on disk.
fn db_bytes(ws: &Ws) -> Vec<u8> {
    let mut all = Vec::new();
    for f in ["state.db", "state.db-wal"] {
        if let Ok(b) = std::fs::read(ws.path(&format!(".toolgate/{f}"))) {
            all.extend(b);
        }
    }
    assert!(!all.is_empty(), "no state database");
    all
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Neither the audit as printed nor the database files hold any of `secrets`.
fn assert_nowhere(ws: &Ws, secrets: &[&str]) {
    let printed = audit_json(ws);
    let db = db_bytes(ws);
    for s in secrets {
        assert!(!printed.contains(s), "`{s}` in audit --json:\n{printed}");
        assert!(!contains(&db, s), "`{s}` in the bytes of state.db");
    }
}

/// The intent event of `call_id`.
fn intent(gate: &toolgate::Gate, call_id: &str) -> Value {
    let events = gate
        .state()
        .audit_events(&AuditQuery {
            call_id: Some(call_id.to_string()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(events[0].event, "intent");
    events[0].detail.clone()
}

fn sha256(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

#[tokio::test]
async fn write_content_is_stored_as_size_hash_and_a_redacted_excerpt() {
    let ws = Ws::new();
    let gate = ws.gate(true).await;
    let content = "[default]\naws_access_key_id = AKIAQ3EGTBXN7LR4KDPA\n";
    let input = json!({"path": "creds.ini", "content": content});
    let o = ok(&gate, "write", input.clone()).await;
    assert_eq!(
        intent(&gate, &o.audit_id),
        json!({
            "input": {
                "path": "creds.ini",
                "content": {
                    "bytes": content.len(),
                    "sha256": sha256(content),
                    "excerpt": "[default]\naws_access_key_id = [redacted:aws-access-key:AKIA…]\n",
                },
            },
            "input_sha256": sha256(&input.to_string()),
        })
    );
    // The file itself was written as asked (keeping it is history's job, not the audit's).
    assert_eq!(ws.read("creds.ini"), content);
}

#[tokio::test]
async fn every_secret_kind_planted_in_write_content_is_redacted() {
    let ws = Ws::new();
    // Writes are not allowed, so nothing is written and history keeps no copy: every byte of
    // the database that could hold the secret is the audit's.
    let gate = ws.gate(false).await;
    let planted = planted();
    let mut calls = Vec::new();
    for (i, p) in planted.iter().enumerate() {
        let content = format!("# config {i}\n{}\n", p.text);
        let input = json!({"path": format!("s{i}.txt"), "content": content});
        let o = call(&gate, "write", input.clone()).await;
        calls.push((o.audit_id, input, p));
    }
    for (id, input, p) in &calls {
        let detail = intent(&gate, id);
        let excerpt = detail["input"]["content"]["excerpt"].as_str().unwrap();
        assert!(
            excerpt.contains(&format!("[redacted:{}:", p.kind)),
            "{}: {excerpt}",
            p.kind
        );
        assert_eq!(detail["input_sha256"], json!(sha256(&input.to_string())));
    }
    gate.state().flush_audit();
    let secrets: Vec<&str> = calls.iter().map(|(_, _, p)| p.secret).collect();
    assert_nowhere(&ws, &secrets);
}

#[tokio::test]
async fn secrets_in_edit_and_multiedit_strings_are_redacted() {
    let ws = Ws::new();
    ws.write("app.env", "TOKEN=placeholder\nPASSWORD=placeholder\n");
    let gate = ws.gate(false).await;
    let edit = call(
        &gate,
        "edit",
        json!({
            "path": "app.env",
            "old_string": "TOKEN=ghp_Z8y7X6w5V4u3T2s1R0q9P8o7N6m5L4k3J2i1",
            "new_string": "TOKEN=glpat-Rk2pLq9WvZ3mN8bYt4Hc",
        }),
    )
    .await;
    let multi = call(
        &gate,
        "multiedit",
        json!({
            "path": "app.env",
            "edits": [
                {"old_string": "PASSWORD=placeholder", "new_string": "PASSWORD=Tr0ub4dor-x9"},
                {"old_string": "x", "new_string": "key: sk_live_51Hc6Fd1Gs5Ae0KuIoPzQJx7Rk2p"},
            ],
        }),
    )
    .await;
    let e = intent(&gate, &edit.audit_id);
    assert_eq!(
        (
            e["input"]["old_string"]["excerpt"].clone(),
            e["input"]["new_string"]["excerpt"].clone(),
        ),
        (
            json!("TOKEN=[redacted:github-token:ghp_…]"),
            json!("TOKEN=[redacted:gitlab-token:glpa…]"),
        )
    );
    let m = intent(&gate, &multi.audit_id);
    assert_eq!(
        m["input"]["edits"][0]["new_string"]["excerpt"],
        json!("PASSWORD=[redacted:password:…]")
    );
    assert_eq!(
        m["input"]["edits"][1]["new_string"]["excerpt"],
        json!("key: [redacted:stripe-key:sk_l…]")
    );
    gate.state().flush_audit();
    assert_nowhere(
        &ws,
        &[
            "ghp_Z8y7X6w5V4u3T2s1R0q9P8o7N6m5L4k3J2i1",
            "glpat-Rk2pLq9WvZ3mN8bYt4Hc",
            "Tr0ub4dor-x9",
            "sk_live_51Hc6Fd1Gs5Ae0KuIoPzQJx7Rk2p",
        ],
    );
}

#[tokio::test]
async fn a_token_assignment_in_shell_text_is_redacted_wherever_the_command_is_repeated() {
    let ws = Ws::new();
    let gate = ws.gate(false).await;
    // However the call ends (denied, needs approval), its intent and decision are audited,
    // and the decision's reason may quote the command.
    let commands = [
        "TOKEN=ghp_Z8y7X6w5V4u3T2s1R0q9P8o7N6m5L4k3J2i1 echo hi",
        "export API_KEY=Kx9Wq3Vb7Nm1Zr5Tc8Yh2; curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0b29sZ2F0ZSJ9.Pq4Wm8Xn2Bv6Cz0Lk3Jh7Gf1Ds5Ae9Ry' https://alice:Hunter2-Pass@127.0.0.1/",
    ];
    let mut ids = Vec::new();
    for c in commands {
        ids.push(call(&gate, "shell", json!({"command": c})).await.audit_id);
    }
    assert_eq!(
        intent(&gate, &ids[0])["input"]["command"],
        json!("TOKEN=[redacted:github-token:ghp_…] echo hi")
    );
    assert_eq!(
        intent(&gate, &ids[1])["input"]["command"],
        json!("export API_KEY=[redacted:key:Kx9W…]; curl -H 'Authorization: Bearer [redacted:jwt:eyJh…]' https://alice:[redacted:url-credential:…]@127.0.0.1/")
    );
    gate.state().flush_audit();
    assert_nowhere(
        &ws,
        &[
            "ghp_Z8y7X6w5V4u3T2s1R0q9P8o7N6m5L4k3J2i1",
            "Kx9Wq3Vb7Nm1Zr5Tc8Yh2",
            "eyJzdWIiOiJ0b29sZ2F0ZSJ9.Pq4Wm8Xn2Bv6Cz0Lk3Jh7Gf1Ds5Ae9Ry",
            "Hunter2-Pass",
        ],
    );
}

#[tokio::test]
async fn a_token_in_a_fetch_url_query_or_userinfo_is_redacted() {
    let ws = Ws::new();
    let gate = ws.gate(false).await;
    // Not granted: the call is refused before any request, but it is audited.
    let url = "http://bob:S3cretPass-77@127.0.0.1:9/x?page=2&token=Zt5Yq8Wm2Lp6Kc9Rv3Nb&access_key=Hq7Ej4Ud1Ob";
    let o = call(
        &gate,
        "fetch",
        json!({"url": url, "headers": {"X-Api-Key": "Fh3Jk6Lm9Np2Qr5St8", "Accept": "text/plain"}}),
    )
    .await;
    let input =
        json!({"url": url, "headers": {"X-Api-Key": "Fh3Jk6Lm9Np2Qr5St8", "Accept": "text/plain"}});
    assert_eq!(
        intent(&gate, &o.audit_id),
        json!({
            "input": {
                "url": "http://bob:[redacted:url-credential:…]@127.0.0.1:9/x?page=2&token=[redacted:token:Zt5Y…]&access_key=[redacted:key:…]",
                "headers": {"X-Api-Key": "[redacted]", "Accept": "text/plain"},
            },
            "input_sha256": sha256(&input.to_string()),
        })
    );
    gate.state().flush_audit();
    assert_nowhere(
        &ws,
        &[
            "S3cretPass-77",
            "Zt5Yq8Wm2Lp6Kc9Rv3Nb",
            "Hq7Ej4Ud1Ob",
            "Fh3Jk6Lm9Np2Qr5St8",
        ],
    );
}

#[test]
fn cli_calls_with_secrets_leave_none_in_audit_json_or_the_database_files() {
    let ws = Ws::new();
    let all: String = planted().iter().map(|p| format!("{}\n", p.text)).collect();
    let write = json!({"path": "all.txt", "content": all}).to_string();
    let grep = json!({"pattern": "ghp_Z8y7X6w5V4u3T2s1R0q9P8o7N6m5L4k3J2i1"}).to_string();
    let shell =
        json!({"command": "TOKEN=sk-ant-api03-Hy6Tg2Rf8Ed4Ws0Qa7Zx3Cv9Bn5Mk1Lj-AA echo hi"})
            .to_string();
    // Without --allow-write the write is not carried out, so only the audit holds its input.
    for input in [("write", &write), ("grep", &grep), ("shell", &shell)] {
        let out = toolgate_command(&ws)
            .args(["call", input.0, input.1])
            .output()
            .unwrap();
        assert!(out.status.code().is_some(), "{out:?}");
    }
    let printed = audit_json(&ws);
    let intents: Vec<Value> = printed
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "intent")
        .collect();
    assert_eq!(intents.len(), 3, "{printed}");
    for (e, input) in intents.iter().zip([&write, &grep, &shell]) {
        let raw: Value = serde_json::from_str(input).unwrap();
        assert_eq!(e["detail"]["input_sha256"], json!(sha256(&raw.to_string())));
    }
    assert!(
        printed.contains("[redacted:github-token:ghp_…]"),
        "{printed}"
    );
    assert!(
        printed.contains("[redacted:anthropic-key:sk-a…]"),
        "{printed}"
    );
    let secrets: Vec<&str> = planted().iter().map(|p| p.secret).collect();
    assert_nowhere(&ws, &secrets);
}
