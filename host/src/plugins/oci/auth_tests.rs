//! Unit tests of `plugins/oci/auth.rs`.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn bearer_and_basic_challenges_parse() {
    let c = parse_challenge(
            r#"Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
    assert_eq!(
        c,
        Challenge::Bearer {
            realm: "https://auth.example.com/token".into(),
            service: Some("registry.example.com".into()),
            scope: Some("repository:a/b:pull,push".into()),
        }
    );
    assert_eq!(
        parse_challenge(r#"Basic realm="Registry""#),
        Some(Challenge::Basic)
    );
    assert_eq!(parse_challenge("Negotiate"), None);
    assert_eq!(parse_challenge(r#"Bearer service="x""#), None, "no realm");
}

#[test]
fn credentials_come_from_auth_files_outside_the_workspace_only() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
    let body = format!(r#"{{"auths":{{"https://127.0.0.1:5000/v1/":{{"auth":"{auth}"}}}}}}"#);
    let user_file = home.path().join("config.json");
    std::fs::write(&user_file, &body).unwrap();
    let ws_file = ws.path().join("config.json");
    std::fs::write(&ws_file, body.replace("YWxp", "Ym9i")).unwrap();
    let found = lookup_in(
        &[ws_file.clone(), user_file.clone()],
        "127.0.0.1:5000",
        ws.path(),
    );
    let c = found.credentials.unwrap();
    assert_eq!((c.user.as_str(), c.password.as_str()), ("alice", "s3cret"));
    assert_eq!(c.from, user_file);
    assert!(
        found.notes[0].contains("inside the workspace"),
        "{:?}",
        found.notes
    );
    let found = lookup_in(&[ws_file], "127.0.0.1:5000", ws.path());
    assert!(found.credentials.is_none());
}

#[test]
fn a_credential_helper_is_named_not_run() {
    let home = tempfile::tempdir().unwrap();
    let f = home.path().join("config.json");
    std::fs::write(&f, r#"{"auths":{"ghcr.io":{}},"credsStore":"desktop"}"#).unwrap();
    let found = lookup_in(&[f], "ghcr.io", Path::new("/nonexistent-ws"));
    assert!(found.credentials.is_none());
    assert!(
        found.notes[0].contains("docker-credential-desktop"),
        "{:?}",
        found.notes
    );
}
