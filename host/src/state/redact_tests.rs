use super::*;
use pretty_assertions::assert_eq;

/// (input, expected output) for every rule.
#[test]
fn each_kind_is_replaced_by_its_marker() {
    let cases: &[(&str, &str)] = &[
        (
            "key AKIAIOSFODNN7EXAMPLE here",
            "key [redacted:aws-access-key:AKIA…] here",
        ),
        (
            "ASIAY34FZKBOKMUTVV7A",
            "[redacted:aws-access-key:ASIA…]",
        ),
        (
            "aws_secret_access_key = \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"",
            "aws_secret_access_key = \"[redacted:aws-secret-key:wJal…]\"",
        ),
        (
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "AWS_SECRET_ACCESS_KEY=[redacted:aws-secret-key:wJal…]",
        ),
        (
            "push ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 now",
            "push [redacted:github-token:ghp_…] now",
        ),
        (
            "gho_16C7e42F292c6912E7710c838347Ae178B4a",
            "[redacted:github-token:gho_…]",
        ),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "[redacted:github-token:gith…]",
        ),
        (
            "glpat-xYz12345678901234567",
            "[redacted:gitlab-token:glpa…]",
        ),
        (
            "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy",
            "[redacted:slack-token:xoxb…]",
        ),
        (
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "[redacted:stripe-key:sk_l…]",
        ),
        (
            "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
            "[redacted:stripe-key:sk_t…]",
        ),
        (
            "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
            "[redacted:google-api-key:AIza…]",
        ),
        (
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345",
            "[redacted:anthropic-key:sk-a…]",
        ),
        (
            "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "[redacted:openai-key:sk-p…]",
        ),
        (
            "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH",
            "[redacted:openai-key:sk-a…]",
        ),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "Authorization: Bearer [redacted:jwt:eyJh…]",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nafter",
            "[redacted:private-key:----…]\nafter",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA (cut)",
            "[redacted:private-key:----…]",
        ),
        ("password=hunter2 next", "password=[redacted:password:…] next"),
        ("db_passwd: hunter22", "db_passwd: [redacted:password:…]"),
        (
            r#"{"api_key": "abc", "client_secret": "s3cr3t-v4lue-long-enough"}"#,
            r#"{"api_key": "[redacted:key:…]", "client_secret": "[redacted:secret:s3cr…]"}"#,
        ),
        (
            "TOKEN=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 echo hi",
            "TOKEN=[redacted:github-token:ghp_…] echo hi",
        ),
        (
            "export API_KEY=abc123def; make",
            "export API_KEY=[redacted:key:…]; make",
        ),
        (
            "mysql --password hunter2 db",
            "mysql --password [redacted:password:…] db",
        ),
        (
            "curl -H 'Authorization: Basic dXNlcjpwYXNz' x",
            "curl -H 'Authorization: Basic [redacted:auth:…]' x",
        ),
        (
            "git clone https://alice:hunter2@example.com/r.git",
            "git clone https://alice:[redacted:url-credential:…]@example.com/r.git",
        ),
        (
            "https://example.com/a?x=1&token=abc123&access_key=zzz#f",
            "https://example.com/a?x=1&token=[redacted:token:…]&access_key=[redacted:key:…]#f",
        ),
        (
            "blob Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTBBQkNERUZHSA== end",
            "blob [redacted:high-entropy:Zm9v…] end",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(scan(input), *want, "input: {input}");
    }
}

#[test]
fn ordinary_text_is_left_alone() {
    let texts = [
        // Prose.
        "The token is refreshed every hour; see the password policy in docs/security.md.",
        "Set the key to something memorable, then press Enter.",
        // Paths and target triples.
        "/home/alice/work/toolgate/host/src/state/redact.rs",
        "target/x86_64-unknown-linux-gnu/release/deps/toolgate-3f2a1b4c5d6e7f80",
        "C:\\Users\\Alice\\AppData\\Local\\Temp\\tmpA1b2C3\\file.txt",
        // Rust code that names secrets without holding one.
        "pub struct Creds { pub token: String, pub api_key: Option<String> }",
        "let key = self.key.clone();\nfn auth(password: &str) -> Result<()> { check(password) }",
        "if token.len() > MAX_TOKEN_LEN { return Err(Error::TooLong) }",
        "let secret = std::env::var(\"SECRET\")?; env!(\"CARGO_PKG_VERSION\")",
        "HttpServerConfig2BuilderFactory::new().with_timeout(Duration::from_secs(30))",
        // References to a secret, not the secret.
        "TOKEN=$GITHUB_TOKEN cargo publish && echo ${{ secrets.NPM_TOKEN }}",
        "token_count=42 password_file=/run/secrets/db key_id=7",
        // Digests and ids: hex is never judged by entropy.
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "commit 6ea7f46c0a7d4e0b9a7b1f0e2c3d4e5f60718293 Author: A <a@b.c>",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "ssh://git@github.com/owner/repo.git and https://example.com/x?page=2",
        // Markers are not scanned again.
        "password=[redacted:password:…] [redacted:github-token:ghp_…]",
    ];
    for t in texts {
        assert_eq!(scan(t), t);
    }
}

#[test]
fn secret_names_are_told_apart_from_names_about_secrets() {
    let cases = [
        ("GITHUB_TOKEN", Some("token")),
        ("accessToken", Some("token")),
        ("DB_PASSWORD", Some("password")),
        ("x-api-key", Some("key")),
        ("Authorization", Some("auth")),
        ("client_secret", Some("secret")),
        ("AWS_SECRET_ACCESS_KEY", Some("aws-secret-key")),
        ("token_count", None),
        ("password_file", None),
        ("key_id", None),
        ("author", None),
        ("monkey", None),
        ("input_sha256", None),
        ("path", None),
    ];
    for (name, kind) in cases {
        assert_eq!(secret_name_kind(name), kind, "{name}");
    }
}

#[test]
fn markers_show_a_prefix_only_of_long_values() {
    assert_eq!(marker("password", "hunter2"), "[redacted:password:…]");
    assert_eq!(
        marker("token", "0123456789abcdefXYZ"),
        "[redacted:token:0123…]"
    );
    assert_eq!(
        marker("token", "ééééééééééééééééé"),
        "[redacted:token:éééé…]"
    );
}

#[test]
fn a_jwt_needs_a_json_header() {
    // Three dotted base64url parts whose first part is not JSON: not a JWT.
    let t = "eyJub3QganNvbg.abc.def";
    assert_eq!(scan(t), t);
}

#[test]
fn hostile_input_is_scanned_in_linear_time() {
    // Each of these would make a naive anchored scan quadratic; they must just finish.
    for unit in ["xoxb-", "eyJa.", "key:", "a-", "-----BEGIN ", "://a:"] {
        let s = unit.repeat(200_000 / unit.len());
        let _ = scan(&s);
    }
}

#[test]
fn non_ascii_text_keeps_its_characters() {
    let t = "mot de passe: «secret» — password=pässwörd123 fin";
    assert_eq!(
        scan(t),
        "mot de passe: «secret» — password=[redacted:password:…] fin"
    );
}

#[test]
fn names_are_decided_the_same_when_remembered_and_past_the_memory_s_size() {
    // Each name twice (the second answer comes from the memory), over more names than it
    // holds, so it is emptied on the way; long names are never remembered.
    for round in 0..2 {
        for i in 0..(MEMO_MAX + 300) {
            let secret = format!("service{i}_password");
            let benign = format!("service{i}_password_file");
            assert_eq!(
                secret_name_kind(&secret),
                Some("password"),
                "{round} {secret}"
            );
            assert_eq!(secret_name_kind(&benign), None, "{round} {benign}");
        }
    }
    let long = format!("{}_api_key", "x".repeat(MEMO_NAME_MAX));
    assert_eq!(secret_name_kind(&long), Some("key"));
    assert_eq!(secret_name_kind(&long), Some("key"));
}
