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
