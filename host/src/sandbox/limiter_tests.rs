//! The limiter records the limit a refused growth hit, and the call's error is classified from
//! that record.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::cancel::CancelToken;
use crate::error::{Error, Limit};
use crate::sandbox::{classify, Capabilities, Limits, Sandbox, SandboxOptions};

/// A core module whose one memory starts at 32 pages (2 MiB).
const MEMORY_OF_32_PAGES: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    0x05, 0x03, 0x01, 0x00, 0x20, // memory section: one memory, no maximum, 32 pages
];

#[tokio::test]
async fn a_memory_over_the_limit_is_classified_from_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::with_options(
        Some(dir.path().to_path_buf()),
        SandboxOptions {
            progress: false,
            one_shot: true,
        },
    )
    .unwrap();
    let limits = Limits {
        max_memory_bytes: 1 << 20,
        ..Limits::default()
    };
    let mut store = crate::sandbox::store::fresh(
        &sandbox.engine,
        &Capabilities::none(),
        &limits,
        &CancelToken::never(),
    )
    .unwrap();
    let module = wasmtime::Module::new(&sandbox.engine, MEMORY_OF_32_PAGES).unwrap();
    let error = wasmtime::Instance::new_async(&mut store, &module, &[])
        .await
        .expect_err("a 2 MiB memory under a 1 MiB limit is refused");
    assert_eq!(store.data().limits.hit, Some(Limit::Memory));
    match classify(error, &limits, store.data().limits.hit) {
        Error::Limit { limit, message } => {
            assert_eq!(limit, Limit::Memory);
            assert_eq!(
                message,
                "the tool tried to use more than its 1048576 byte memory limit and was stopped"
            );
        }
        other => panic!("not a memory limit: {other:?}"),
    }
}

#[test]
fn no_record_no_memory_limit() {
    let error = wasmtime::Error::msg("forcing trap when growing memory to 9 bytes");
    assert!(matches!(
        classify(error, &Limits::default(), None),
        Error::Trap(_)
    ));
}
