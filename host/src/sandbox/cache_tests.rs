#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn sidecar_for(bytes: &[u8]) -> Sidecar {
    Sidecar {
        artifact_len: bytes.len() as u64,
        artifact_sha256: hex::encode(Sha256::digest(bytes)),
        artifact_stamp: None,
        meta: None,
    }
}

fn stamp_of(file: &Path, sidecar: &Sidecar) -> Option<Stamp> {
    artifact_matches(file, sidecar).map(|v| v.stamp)
}

#[test]
fn an_artifact_must_match_its_sidecar() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.cwasm");
    std::fs::write(&file, b"artifact bytes").unwrap();
    assert!(artifact_matches(&file, &sidecar_for(b"artifact bytes")).is_some());
    assert!(artifact_matches(&file, &sidecar_for(b"artifact bytez")).is_none());
    assert!(artifact_matches(&file, &sidecar_for(b"artifact")).is_none());
    assert!(artifact_matches(&dir.path().join("none"), &sidecar_for(b"")).is_none());
}

#[test]
fn a_verified_artifact_is_not_hashed_again_until_the_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (artifact, sidecar) = (dir.path().join("a.cwasm"), dir.path().join("a.json"));
    write_entry(&artifact, &sidecar, b"artifact bytes").unwrap();
    let mut found = read_sidecar(&sidecar).unwrap();
    let stamp = found
        .artifact_stamp
        .expect("written with the file's identity");
    assert_eq!(stamp_of(&artifact, &found), Some(stamp));
    // The recorded identity is what skips the hash: with a wrong sum it still matches...
    found.artifact_sha256 = hex::encode(Sha256::digest(b"other bytes"));
    assert_eq!(stamp_of(&artifact, &found), Some(stamp));

    // ...until the file is written, even in place with the same length and its modification
    // time put back: the change time moves, so the bytes are hashed, and refused.
    let modified = std::fs::metadata(&artifact).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    {
        use std::io::{Seek, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&artifact)
            .unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(b"ARTIFACT").unwrap();
        f.set_modified(modified).unwrap();
    }
    let found = read_sidecar(&sidecar).unwrap();
    assert_eq!(found.artifact_stamp, Some(stamp));
    assert_eq!(
        stamp_of(&artifact, &found),
        None,
        "a rewritten artifact was trusted"
    );

    // A file put in its place by a rename (same bytes, same length) is hashed, and accepted.
    let other = dir.path().join("b");
    std::fs::write(&other, b"artifact bytes").unwrap();
    std::fs::rename(&other, &artifact).unwrap();
    let again = stamp_of(&artifact, &found).expect("same bytes");
    assert_ne!(again, stamp);
}

/// What is mapped is the file that was checked: an artifact renamed over between the check
/// and the map is not read.
#[test]
fn the_checked_file_is_the_one_mapped_even_after_a_rename_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let (artifact, sidecar) = (dir.path().join("a.cwasm"), dir.path().join("a.json"));
    write_entry(&artifact, &sidecar, b"artifact bytes").unwrap();
    let verified = artifact_matches(&artifact, &read_sidecar(&sidecar).unwrap()).unwrap();
    let other = dir.path().join("b");
    std::fs::write(&other, b"attacker bytes").unwrap();
    std::fs::rename(&other, &artifact).unwrap();
    let map = opened_path(&verified.file, &artifact);
    assert_eq!(
        std::fs::read(&map).unwrap(),
        b"artifact bytes",
        "mapped {}",
        map.display()
    );
}

#[test]
fn a_changed_sidecar_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.json");
    write_sidecar(&file, &sidecar_for(b"x")).unwrap();
    assert!(read_sidecar(&file).is_some());
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("\"artifact_len\":1", "\"artifact_len\":2");
    std::fs::write(&file, text).unwrap();
    assert!(read_sidecar(&file).is_none());
}

/// A component compiled now is run from the artifact just written (pages of the file, which
/// the kernel can share and drop), not from the copy the compiler made in memory: a server
/// compiling a cold cache kept ~150 MB of compiled code as its own memory.
#[test]
fn a_component_compiled_now_is_mapped_from_its_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(format!(
        "{}/toolgate_tool_test_plugin.wasm",
        crate::tools::registry::GUEST_ARTIFACT_DIR
    ))
    .unwrap();
    let digest = hex::encode(Sha256::digest(&bytes));
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    let engine = Engine::new(&config).unwrap();
    let cache = ArtifactCache::new(Some(dir.path().to_path_buf()), &engine, false);
    let (component, _) = cache.load(&engine, "test plugin", &bytes, &digest).unwrap();
    let artifact = with_ext(&cache.stem(&digest).unwrap(), "cwasm");
    assert!(artifact.is_file(), "no artifact was written");
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(
        maps.contains(&*artifact.to_string_lossy()),
        "the compiled component is not the mapped artifact {}",
        artifact.display()
    );
    drop(component);
}
