#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use sha2::{Digest, Sha256};

#[test]
fn build_time_digests_are_the_sha256_of_the_builtins() {
    assert_eq!(BUILTINS.len(), BUILTIN_DIGESTS.len());
    for ((name, bytes), digest) in BUILTINS.iter().zip(BUILTIN_DIGESTS) {
        assert_eq!(hex::encode(Sha256::digest(bytes)), *digest, "{name}");
    }
}

#[test]
fn the_builtin_enum_names_every_builtin() {
    let names: Vec<&str> = BUILTINS.iter().map(|(name, _)| *name).collect();
    let kinds: Vec<&str> = crate::tools::Builtin::ALL
        .iter()
        .map(|b| b.as_str())
        .collect();
    assert_eq!(names, kinds);
}

#[test]
fn build_time_digests_are_the_sha256_of_the_parts() {
    assert!(!PARTS.is_empty());
    for (of, what, bytes, digest) in PARTS {
        assert_eq!(
            hex::encode(Sha256::digest(bytes)),
            *digest,
            "{of} for {what}"
        );
        assert!(BUILTINS.iter().any(|(name, _)| name == of), "{of}");
    }
}

/// A registry whose `read` has `bytes` (another built-in's component) as its part.
fn with_part(bytes: &'static [u8]) -> Registry {
    let mut registry = Registry::new();
    registry.parts = vec![Part {
        of: "read",
        what: "a test",
        bytes,
        digest: BUILTIN_DIGESTS[BUILTINS.iter().position(|(_, b)| *b == bytes).unwrap()],
        loaded: OnceLock::new(),
    }];
    registry
}

#[tokio::test]
async fn a_part_must_describe_itself_as_its_tool_and_a_plugin_has_none() {
    let cache = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(Some(cache.path().to_path_buf())).unwrap();
    let limits = Limits::default();
    // `write` as `read`'s part: another name, risk and description, refused whatever it
    // could do; the call it would have answered stays an error.
    let write = BUILTINS.iter().find(|(n, _)| *n == "write").unwrap().1;
    let registry = with_part(write);
    let read = registry.tool(&sandbox, &limits, "read").await.unwrap();
    match registry.part(&sandbox, &limits, &read).await {
        Some(Err(e)) => assert!(e.to_string().contains("write"), "{e}"),
        Some(Ok(_)) => panic!("a part that is another tool was accepted"),
        None => panic!("read has a part"),
    }
    assert!(registry.parts[0].loaded.get().is_none());

    // A tool that is not a built-in never reaches a part, even under a built-in's name.
    let meta = sandbox.cached_meta(read.info.digest.as_str()).unwrap();
    let impostor = register(&meta, read.loaded.clone(), None, false).unwrap();
    assert_eq!(impostor.info.name, "read");
    assert!(Registry::new()
        .part(&sandbox, &limits, &impostor)
        .await
        .is_none());
}
