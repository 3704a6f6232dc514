//! Plugins as OCI artifacts against a real registry (Debian's `docker-registry`, the CNCF
//! distribution registry) started here on a free loopback port with its storage in a temp dir:
//! push, add by tag and by digest, the pinned digest after the tag moves, cosign-style
//! signatures (right key, wrong key, unsigned, a signature for another digest), a registry
//! that sends other bytes or too many, and credentials from DOCKER_CONFIG only.

use crate::common::*;
use crate::plugins::artifact;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const WASM: &str = "toolgate_plugin_word_count.wasm";

fn example_manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../guest-tools/examples/word-count/toolgate-plugin.toml")
}

/// The registry binary, installed by tests/scripts/install-docker-registry.sh if missing;
/// `None` (with a message naming what is missing) when it cannot be had.
fn registry_binary() -> Option<PathBuf> {
    static FOUND: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let bin = PathBuf::from("/usr/bin/docker-registry");
            let have_htpasswd = Command::new("sh").args(["-c", "command -v htpasswd"]).output().is_ok_and(|o| o.status.success());
            if bin.exists() && have_htpasswd {
                return Some(bin);
            }
            let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/scripts/install-docker-registry.sh");
            let out = Command::new("bash").arg(&script).output();
            match out {
                Ok(o) if o.status.success() && bin.exists() => Some(bin),
                Ok(o) => {
                    eprintln!(
                        "skipped: the OCI plugin tests need /usr/bin/docker-registry and htpasswd (Debian's docker-registry and apache2-utils); {} said: {}",
                        script.display(),
                        String::from_utf8_lossy(&o.stderr).trim()
                    );
                    None
                }
                Err(e) => {
                    eprintln!("skipped: the OCI plugin tests need /usr/bin/docker-registry; {} could not run: {e}", script.display());
                    None
                }
            }
        })
        .clone()
}

/// A registry this test started; killed (only this process) when dropped.
struct Registry {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Start one, with htpasswd basic auth for `user:password` if given.
    fn start(basic: Option<(&str, &str)>) -> Option<Registry> {
        let bin = registry_binary()?;
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = basic {
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "htpasswd: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let file = dir.path().join("htpasswd");
            std::fs::write(&file, &out.stdout).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: toolgate-test\n    path: {}\n",
                file.display()
            ));
        }
        let cfg = dir.path().join("config.yml");
        std::fs::write(&cfg, config).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let r = Registry { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the registry did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(r)
    }

    fn repo(&self, rest: &str) -> String {
        format!("oci://127.0.0.1:{}/{rest}", self.port)
    }

    /// The file the registry keeps blob `digest` in.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir.path().join(format!(
            "data/docker/registry/v2/blobs/sha256/{}/{hex}/data",
            &hex[..2]
        ))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The user's home for a CLI run: its own HOME, XDG_RUNTIME_DIR and DOCKER_CONFIG, so no
/// real credentials are read.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn docker_config(&self) -> PathBuf {
        self.dir.path().join("docker")
    }
}

fn tg(ws: &Ws, home: &Home, docker_config: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = toolgate_command(ws);
    cmd.env("HOME", home.dir.path())
        .env("XDG_RUNTIME_DIR", home.dir.path().join("run"))
        .env_remove("REGISTRY_AUTH_FILE")
        .env(
            "DOCKER_CONFIG",
            docker_config.map_or_else(|| home.docker_config(), Path::to_path_buf),
        )
        .args(args);
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `plugin push` of `wasm` to `reference`; returns the digest it printed.
fn push(ws: &Ws, home: &Home, wasm: &Path, reference: &str, key: Option<&Path>) -> String {
    let manifest = example_manifest();
    let mut args = vec![
        "plugin",
        "push",
        wasm.to_str().unwrap(),
        reference,
        "--manifest",
        manifest.to_str().unwrap(),
    ];
    if let Some(k) = key {
        args.extend(["--sign-key", k.to_str().unwrap()]);
    }
    let out = tg(ws, home, None, &args);
    assert!(out.status.success(), "push failed: {}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("digest "))
        .unwrap_or_else(|| panic!("no digest printed: {stdout}"))
        .to_string()
}

fn add(ws: &Ws, home: &Home, reference: &str, extra: &[&str]) -> Output {
    let mut args = vec!["plugin", "add", "--yes", reference];
    args.extend(extra);
    tg(ws, home, None, &args)
}

/// Call the installed word-count plugin on `src`; returns its content.
fn run_word_count(ws: &Ws, home: &Home) -> String {
    let out = tg(
        ws,
        home,
        None,
        &[
            "--grant",
            "plugin__word-count:**",
            "call",
            "plugin__word-count",
            r#"{"path": "src"}"#,
        ],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)));
    assert_eq!(v["status"], "ok", "{v:#}");
    v["content"].as_str().unwrap().to_string()
}

fn installed(ws: &Ws) -> bool {
    ws.path(".toolgate/plugins/word-count").exists()
}

/// The same component with a custom section appended: another digest, the same behaviour.
fn variant(dir: &Path) -> PathBuf {
    let mut bytes = std::fs::read(artifact(WASM)).unwrap();
    bytes.extend([0x00, 7, 4, b't', b'e', b's', b't', b'v', b'2']);
    let p = dir.join("v2.wasm");
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A P-256 key pair from a seed: (private PKCS#8 PEM, public SPKI PEM).
fn keypair(dir: &Path, seed: u8) -> (PathBuf, PathBuf) {
    use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    let sk = p256::SecretKey::from_slice(&[seed; 32]).unwrap();
    let private = dir.join(format!("key{seed}.pem"));
    let public = dir.join(format!("key{seed}.pub"));
    std::fs::write(
        &private,
        sk.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes(),
    )
    .unwrap();
    std::fs::write(
        &public,
        sk.public_key().to_public_key_pem(LineEnding::LF).unwrap(),
    )
    .unwrap();
    (private, public)
}

fn workspace() -> Ws {
    let ws = Ws::new();
    ws.write("src/a.txt", "one two three\nfour\n");
    ws
}

#[test]
fn push_then_add_by_tag_and_by_digest_and_the_pinned_digest_survives_a_moved_tag() {
    let Some(reg) = Registry::start(None) else {
        return;
    };
    let home = Home::new();
    let ws = workspace();
    let tag = reg.repo("team/wc:v1");
    let v1 = push(&ws, &home, &artifact(WASM), &tag, None);

    let out = add(&ws, &home, &tag, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("team/wc@{v1}")),
        "{}",
        text(&out)
    );
    assert!(run_word_count(&ws, &home).contains("src/a.txt"));
    let record = ws.read(".toolgate/plugins/word-count/plugin.toml");
    assert!(
        record.contains(&format!(
            "source = \"{}\"",
            reg.repo(&format!("team/wc@{v1}"))
        )),
        "{record}"
    );

    // By digest, in another workspace.
    let ws2 = workspace();
    let out = add(&ws2, &home, &reg.repo(&format!("team/wc@{v1}")), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(run_word_count(&ws2, &home).contains("src/a.txt"));

    // v2 under the same tag: what is installed keeps running v1's bytes.
    let scratch = tempfile::tempdir().unwrap();
    let v2_wasm = variant(scratch.path());
    let v2 = push(&ws, &home, &v2_wasm, &tag, None);
    assert_ne!(v1, v2);
    let v1_bytes = std::fs::read(artifact(WASM)).unwrap();
    assert_eq!(
        ws.bytes(".toolgate/plugins/word-count/component.wasm"),
        v1_bytes
    );
    let list = tg(&ws, &home, None, &["plugin", "list", "--json"]);
    let rows: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(
        rows[0]["sha256"],
        toolgate::plugins::sha256_hex(&v1_bytes),
        "{rows:#}"
    );
    assert_eq!(rows[0]["state"], "ok", "{rows:#}");
    assert!(run_word_count(&ws, &home).contains("src/a.txt"));
    // Adding by the digest still gets v1; re-adding the tag shows the change.
    let out = add(&ws2, &home, &reg.repo(&format!("team/wc@{v1}")), &[]);
    assert!(
        out.status.success() && !text(&out).contains("was from"),
        "{}",
        text(&out)
    );
    let out = add(&ws, &home, &tag, &[]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains(&format!("team/wc@{v2}")), "{shown}");
    assert!(
        shown.contains("replaces")
            && shown.contains(&format!("was from {}", reg.repo(&format!("team/wc@{v1}")))),
        "{shown}"
    );
    assert_eq!(
        ws.bytes(".toolgate/plugins/word-count/component.wasm"),
        std::fs::read(&v2_wasm).unwrap()
    );

    // A digest the registry does not have, and a reference that is not one.
    let out = add(
        &workspace(),
        &home,
        &reg.repo(&format!("team/wc@sha256:{}", "0".repeat(64))),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("no such artifact"), "{}", text(&out));
    let out = add(&workspace(), &home, &reg.repo("team/wc"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("name a tag"), "{}", text(&out));
}

#[tokio::test]
async fn signatures_are_verified_before_anything_is_installed() {
    let Some(reg) = Registry::start(None) else {
        return;
    };
    let home = Home::new();
    let keys = tempfile::tempdir().unwrap();
    let (k1, k1_pub) = keypair(keys.path(), 1);
    let (_, k2_pub) = keypair(keys.path(), 2);
    let ws = workspace();
    let signed = reg.repo("team/wc:signed");
    let d_signed = push(&ws, &home, &artifact(WASM), &signed, Some(&k1));
    let scratch = tempfile::tempdir().unwrap();
    let unsigned = reg.repo("team/wc:unsigned");
    let d_unsigned = push(&ws, &home, &variant(scratch.path()), &unsigned, None);

    // The right key.
    let out = add(
        &ws,
        &home,
        &signed,
        &["--verify-key", k1_pub.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("signature  verified with {}", k1_pub.display())),
        "{}",
        text(&out)
    );
    assert!(run_word_count(&ws, &home).contains("src/a.txt"));

    // The wrong key, and no signature at all.
    let ws = workspace();
    let out = add(
        &ws,
        &home,
        &signed,
        &["--verify-key", k2_pub.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("does not verify with") && text(&out).contains(&signed),
        "{}",
        text(&out)
    );
    assert!(!installed(&ws));
    let out = add(
        &ws,
        &home,
        &unsigned,
        &["--verify-key", k1_pub.to_str().unwrap()],
    );
    assert!(
        text(&out).contains("is not signed") && text(&out).contains("--sign-key"),
        "{}",
        text(&out)
    );
    assert!(!installed(&ws));

    // The user's policy requires signatures by k1: unsigned and local adds are refused.
    let policy = ws.user_root().join("xdg-config/toolgate/policy.toml");
    std::fs::create_dir_all(policy.parent().unwrap()).unwrap();
    std::fs::write(
        &policy,
        format!(
            "[plugins]\nrequire_signature = true\ntrusted_keys = [\"{}\"]\n",
            k1_pub.display()
        ),
    )
    .unwrap();
    let out = add(&ws, &home, &unsigned, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("is not signed") && text(&out).contains("require_signature"),
        "{}",
        text(&out)
    );
    let manifest = example_manifest();
    let out = tg(
        &ws,
        &home,
        None,
        &[
            "plugin",
            "add",
            "--yes",
            artifact(WASM).to_str().unwrap(),
            "--manifest",
            manifest.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("carries no signature"),
        "{}",
        text(&out)
    );
    assert!(!installed(&ws));

    // k1's signature of the signed artifact, copied to the unsigned one's signature tag.
    let r = toolgate::plugins::oci::Reference::parse(&signed).unwrap();
    let mut c = toolgate::plugins::oci::client::Client::new(&r, "pull,push", &ws.root());
    let accept = [("accept", toolgate::plugins::oci::IMAGE_MANIFEST.to_string())];
    let tag = toolgate::plugins::oci::sign::signature_tag(&d_signed);
    let sig = c
        .send(
            http::Method::GET,
            &c.url(&format!("manifests/{tag}")),
            &accept,
            bytes::Bytes::new(),
            1 << 20,
        )
        .await
        .unwrap();
    assert_eq!(sig.status, 200);
    let to = toolgate::plugins::oci::sign::signature_tag(&d_unsigned);
    let ct = [(
        "content-type",
        toolgate::plugins::oci::IMAGE_MANIFEST.to_string(),
    )];
    let put = c
        .send(
            http::Method::PUT,
            &c.url(&format!("manifests/{to}")),
            &ct,
            sig.body.clone(),
            1 << 20,
        )
        .await
        .unwrap();
    assert_eq!(put.status, 201);
    let out = add(&ws, &home, &unsigned, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("not for this artifact"),
        "{}",
        text(&out)
    );
    assert!(!installed(&ws));
    // Signed by k1: installs under the policy.
    let out = add(&ws, &home, &signed, &[]);
    assert!(out.status.success(), "{}", text(&out));

    // A cloned repository's policy may require signatures but never names the trusted keys.
    let ws = workspace();
    ws.plant(
        ".toolgate/policy.toml",
        format!(
            "[plugins]\nrequire_signature = true\ntrusted_keys = [\"{}\"]\n",
            k1_pub.display()
        ),
    );
    let out = add(&ws, &home, &signed, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no trusted key is configured"),
        "{}",
        text(&out)
    );
    assert!(!installed(&ws));
}

#[test]
fn a_registry_that_sends_other_bytes_or_too_many_is_refused_and_nothing_is_installed() {
    let Some(reg) = Registry::start(None) else {
        return;
    };
    let home = Home::new();
    let ws = workspace();
    let tag = reg.repo("team/wc:v1");
    push(&ws, &home, &artifact(WASM), &tag, None);
    // Tamper with the component layer in the registry's storage (same length).
    let wasm = std::fs::read(artifact(WASM)).unwrap();
    let file = reg.blob_file(&toolgate::plugins::oci::digest_of(&wasm));
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let out = add(&ws, &home, &tag, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("sent other bytes") && text(&out).contains("application/wasm"),
        "{}",
        text(&out)
    );
    assert!(!installed(&ws));

    // A hostile registry: a layer that says it is 3 GiB, and one that sends more than it says.
    let port = hostile_registry();
    let out = add(&ws, &home, &format!("oci://127.0.0.1:{port}/x:huge"), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("3221225472 bytes, more than the 134217728"),
        "{}",
        text(&out)
    );
    let out = add(&ws, &home, &format!("oci://127.0.0.1:{port}/x:long"), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("more than the 10 toolgate accepts"),
        "{}",
        text(&out)
    );
    assert!(!installed(&ws));
}

/// A loopback server that answers like a registry with lying manifests.
fn hostile_registry() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let digest = |b: &[u8]| toolgate::plugins::oci::digest_of(b);
    let manifest = |size: u64| {
        serde_json::json!({
            "schemaVersion": 2,
            "mediaType": toolgate::plugins::oci::IMAGE_MANIFEST,
            "artifactType": toolgate::plugins::oci::ARTIFACT_TYPE,
            "config": {"mediaType": toolgate::plugins::oci::CONFIG_MEDIA_TYPE, "digest": digest(b"{}"), "size": 2},
            "layers": [
                {"mediaType": "application/wasm", "digest": digest(b"0123456789"), "size": size},
                {"mediaType": toolgate::plugins::oci::MANIFEST_LAYER, "digest": digest(b"x"), "size": 1},
            ],
        })
        .to_string()
    };
    let (huge, long) = (manifest(3 << 30), manifest(10));
    let config_path = format!("/v2/x/blobs/{}", digest(b"{}"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&head).to_string();
            let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
            let body: Vec<u8> = match path.as_str() {
                "/v2/x/manifests/huge" => huge.clone().into_bytes(),
                "/v2/x/manifests/long" => long.clone().into_bytes(),
                p if p == config_path => b"{}".to_vec(),
                p if p.starts_with("/v2/x/blobs/") => vec![b'a'; 1000],
                _ => {
                    let _ = s.write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                    continue;
                }
            };
            let _ = s.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            let _ = s.write_all(&body);
        }
    });
    port
}

#[test]
fn credentials_come_from_docker_config_and_never_from_the_workspace() {
    let Some(reg) = Registry::start(Some(("alice", "wonder-pass"))) else {
        return;
    };
    let home = Home::new();
    let ws = workspace();
    let tag = reg.repo("team/wc:v1");
    // No credentials anywhere: the registry's 401 becomes a message saying how to log in.
    let wasm = artifact(WASM);
    let manifest = example_manifest();
    let push_args = [
        "plugin",
        "push",
        wasm.to_str().unwrap(),
        tag.as_str(),
        "--manifest",
        manifest.to_str().unwrap(),
    ];
    let out = tg(&ws, &home, None, &push_args);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("asks for credentials") && text(&out).contains("docker login"),
        "{}",
        text(&out)
    );

    // docker login's file in DOCKER_CONFIG.
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:wonder-pass");
    let config = format!(
        r#"{{"auths":{{"127.0.0.1:{}":{{"auth":"{auth}"}}}}}}"#,
        reg.port
    );
    std::fs::create_dir_all(home.docker_config()).unwrap();
    std::fs::write(home.docker_config().join("config.json"), &config).unwrap();
    let digest = push(&ws, &home, &wasm, &tag, None);
    let out = add(&ws, &home, &tag, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&digest));

    // The same file shipped inside the workspace is never read, even when DOCKER_CONFIG
    // points there; a wrong password is refused by name.
    let ws2 = workspace();
    ws2.plant(".docker/config.json", &config);
    let out = tg(
        &ws2,
        &home,
        Some(ws2.path(".docker").as_path()),
        &["plugin", "add", "--yes", tag.as_str()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("asks for credentials") && text(&out).contains("inside the workspace"),
        "{}",
        text(&out)
    );
    assert!(!ws2.path(".toolgate/plugins/word-count").exists());
    let bad = base64::engine::general_purpose::STANDARD.encode("alice:wrong");
    std::fs::write(
        home.docker_config().join("config.json"),
        config.replace(&auth, &bad),
    )
    .unwrap();
    let out = add(&ws2, &home, &tag, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("refused the credentials of `alice`"),
        "{}",
        text(&out)
    );
}
