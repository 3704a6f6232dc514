//! Unit tests of `mcp/mrtr.rs`.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::tools::Risk;
use serde_json::json;

fn question() -> ApprovalRequest {
    ApprovalRequest {
        id: "c-approval".into(),
        session: "conv-1".into(),
        tool: "write".into(),
        key: "write:a.txt".into(),
        description: "write a.txt".into(),
        risk: Risk::Write,
        input_sha256: "ab".into(),
        choices: vec![Answer::Once, Answer::Session, Answer::Deny],
        scopes: Vec::new(),
        expires_in_secs: 300,
    }
}

#[test]
fn a_sealed_state_opens_only_for_its_call_and_key() {
    let key = StateKey::random().unwrap();
    let args = json!({"path": "a.txt", "content": "x"});
    let state = ApprovalState::new(&question(), "write", &args, "conv-1");
    let sealed = key.seal(&state);
    assert_eq!(key.open(&sealed, "write", &args, "conv-1").unwrap(), state);
    let other = json!({"path": "a.txt", "content": "y"});
    assert_eq!(
        key.open(&sealed, "write", &other, "conv-1"),
        Err(StateRejected::OtherInput)
    );
    assert_eq!(
        key.open(&sealed, "edit", &args, "conv-1"),
        Err(StateRejected::OtherInput)
    );
    assert_eq!(
        key.open(&sealed, "write", &args, "conv-2"),
        Err(StateRejected::OtherConversation)
    );
    // Another process's key, or an altered payload, is a forgery.
    let stranger = StateKey::random().unwrap();
    assert_eq!(
        stranger.open(&sealed, "write", &args, "conv-1"),
        Err(StateRejected::Forged)
    );
    let mut forged = state.clone();
    forged.choices.push(Answer::Project);
    let (_, tag) = sealed.rsplit_once('.').unwrap();
    let tampered = format!(
        "{SEALED_PREFIX}{}.{tag}",
        hex::encode(serde_json::to_vec(&forged).unwrap())
    );
    assert_eq!(
        key.open(&tampered, "write", &args, "conv-1"),
        Err(StateRejected::Forged)
    );
    // Used once, refused after.
    assert!(key.mark_used(&state));
    assert_eq!(
        key.open(&sealed, "write", &args, "conv-1"),
        Err(StateRejected::Used)
    );
    // Expired.
    let mut old = ApprovalState::new(&question(), "write", &args, "conv-1");
    old.expires = now_secs() - 1;
    assert_eq!(
        key.open(&key.seal(&old), "write", &args, "conv-1"),
        Err(StateRejected::Expired)
    );
}

#[test]
fn a_key_file_is_shared_and_must_be_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("k");
    std::fs::write(&file, format!("{}\n", "f".repeat(64))).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let a = StateKey::from_file(&file).unwrap();
    let b = StateKey::from_file(&file).unwrap();
    let args = json!({});
    let sealed = a.seal(&ApprovalState::new(&question(), "write", &args, "c"));
    assert!(b.open(&sealed, "write", &args, "c").is_ok());
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = format!("{:#}", StateKey::from_file(&file).unwrap_err());
    assert!(e.contains("chmod 600"), "{e}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&file, "short\n").unwrap();
    let e = format!("{:#}", StateKey::from_file(&file).unwrap_err());
    assert!(e.contains("openssl rand -hex 32"), "{e}");
}

#[test]
fn answers_are_read_from_the_elicitation_result() {
    let r = |v: Value| {
        let mut m = InputResponses::new();
        m.insert(APPROVAL_INPUT.into(), v);
        answer_from(&m)
    };
    assert_eq!(
        r(json!({"action":"accept","content":{"decision":"session"}})),
        Some(Answer::Session)
    );
    assert_eq!(r(json!({"action":"decline"})), Some(Answer::Deny));
    assert_eq!(
        r(json!({"action":"accept","content":{"decision":"always"}})),
        Some(Answer::Deny)
    );
    assert_eq!(answer_from(&InputResponses::new()), None);
}
