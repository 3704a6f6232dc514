#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn dotenv_values_are_kept_with_their_names_and_quotes_stripped() {
    let text = "# comment\nAPI_KEY=sk-abcdefghijkl\nexport DB_PASSWORD=\"hunter2hunter2\"\nSHORT=abc\nQUOTED='with space inside'\n";
    let v = values_of(".env", text);
    assert!(
        v.contains(&("sk-abcdefghijkl".into(), "API_KEY".into())),
        "{v:?}"
    );
    assert!(
        v.contains(&("hunter2hunter2".into(), "DB_PASSWORD".into())),
        "{v:?}"
    );
    assert!(
        v.contains(&("with space inside".into(), "QUOTED".into())),
        "{v:?}"
    );
    assert!(!v.iter().any(|(x, _)| x == "abc"), "{v:?}");
}

#[test]
fn other_files_keep_secret_named_fields_netrc_passwords_pem_lines_and_token_files() {
    let v = values_of(
        "a/.aws/credentials",
        "[default]\nregion = us-east-1-long\naws_secret_access_key = wJalrXUtnFEMIK7MDENG\n",
    );
    assert_eq!(
        v,
        vec![(
            "wJalrXUtnFEMIK7MDENG".into(),
            "aws_secret_access_key".into()
        )]
    );
    let v = values_of(
        ".netrc",
        "machine example.com login me password s3cr3t-pass\n",
    );
    assert!(
        v.contains(&("s3cr3t-pass".into(), "password".into())),
        "{v:?}"
    );
    let v = values_of(
        "credentials.json",
        r#"{"client_id": "public-id-123", "client_secret": "abcdefgh12345678"}"#,
    );
    assert_eq!(v, vec![("abcdefgh12345678".into(), "client_secret".into())]);
    let v = values_of("k.pem", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n");
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!(v[0].1, "private key");
    let v = values_of(".vault-token", "hvs.CAESIJ1234567890abcdef\n");
    assert_eq!(
        v,
        vec![("hvs.CAESIJ1234567890abcdef".into(), "whole file".into())]
    );
}

#[test]
fn every_form_of_a_registered_value_is_replaced() {
    let value = "unit-test/secret-Zq81xW";
    register(value, "[secret value from .env:UNIT]");
    let b64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("x:{value}"))
    };
    for text in [
        format!("say {value} twice {value}"),
        format!("{{\"v\":\"{}\"}}", value.replace('/', "\\/")),
        format!("auth {b64}"),
        hex::encode(value),
    ] {
        let out = scrub_known(&text).unwrap_or_else(|| panic!("not scrubbed: {text}"));
        assert!(!out.contains(value), "{out}");
        assert!(
            out.contains("[secret value from .env:UNIT]"),
            "{text} -> {out}"
        );
    }
    assert_eq!(scrub_known("nothing to see here"), None);
}

#[test]
fn a_watched_workspace_is_read_again_when_its_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join(".env"), "FIRST_TOKEN=first-value-AbC123xyz\n").unwrap();
    watch_workspace(root.clone(), Box::new(|| Some(vec![".env".to_string()])));
    assert!(scrub_known("x first-value-AbC123xyz y")
        .is_some_and(|s| s.contains("[secret value from .env:FIRST_TOKEN]")));
    std::fs::write(root.join(".env"), "SECOND_TOKEN=second-value-QwE987rty\n").unwrap();
    std::thread::sleep(REFRESH + Duration::from_millis(100));
    let out = scrub_known("x second-value-QwE987rty y").unwrap();
    assert!(
        out.contains("[secret value from .env:SECOND_TOKEN]"),
        "{out}"
    );
}
