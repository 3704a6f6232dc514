//! Spares: a call served by an instance made ahead sees exactly its own capabilities, limits,
//! deadline and cancellation, never those of the call before it or of the empty state the
//! spare was made in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::cancel::CancelToken;
use crate::error::{Error, Limit};
use crate::sandbox::{wit, Capabilities, GuestResult, Limits, Loaded, Preopen, Sandbox};
use crate::workspace::GUEST_ROOT;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::Duration;

struct Fixture {
    _cache: tempfile::TempDir,
    sandbox: Sandbox,
    loaded: Loaded,
}

fn fixture() -> Fixture {
    let cache = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(Some(cache.path().to_path_buf())).unwrap();
    let file = format!(
        "{}/toolgate_tool_test_plugin.wasm",
        crate::tools::registry::GUEST_ARTIFACT_DIR
    );
    let loaded = sandbox
        .load("test-plugin", &std::fs::read(file).unwrap())
        .unwrap();
    Fixture {
        _cache: cache,
        sandbox,
        loaded,
    }
}

impl Fixture {
    async fn call(
        &self,
        caps: &Capabilities,
        limits: &Limits,
        input: Value,
        cancel: &CancelToken,
    ) -> crate::error::Result<GuestResult> {
        let context = wit::CallContext {
            workspace_root: GUEST_ROOT.to_string(),
            max_output_bytes: 1 << 20,
            denied_globs: Vec::new(),
        };
        self.sandbox
            .call_report(
                &self.loaded,
                caps,
                limits,
                &input.to_string(),
                &context,
                cancel,
            )
            .await
            .result
    }

    /// One call, then the server's idle moment: the next call of the component finds a spare.
    async fn warm(&self, caps: &Capabilities) {
        self.sandbox.idle().await;
        let r = self
            .call(caps, &Limits::default(), json!({"mode": "ok"}), &never())
            .await;
        assert!(matches!(r, Ok(GuestResult::Output(_))));
        self.sandbox.idle().await;
    }

    fn spares_used(&self) -> u64 {
        self.sandbox.stores.spares_used.load(Ordering::Relaxed)
    }
}

/// A fixture whose next call of the component, with the returned capabilities (an empty
/// directory), finds a spare.
async fn warmed() -> (Fixture, tempfile::TempDir, Capabilities) {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let caps = caps(dir.path(), &[]);
    f.warm(&caps).await;
    (f, dir, caps)
}

fn never() -> CancelToken {
    CancelToken::never()
}

/// `dir` mounted read-only at the guest root, with `env`.
fn caps(dir: &std::path::Path, env: &[(&str, &str)]) -> Capabilities {
    Capabilities {
        preopens: vec![Preopen {
            host: dir.to_path_buf(),
            guest: GUEST_ROOT.to_string(),
            writable: false,
        }],
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Capabilities::default()
    }
}

fn content(r: crate::error::Result<GuestResult>) -> Result<String, String> {
    match r {
        Ok(GuestResult::Output(o)) => Ok(o.content),
        Ok(GuestResult::ToolError(e)) => Err(format!("{}: {}", e.code, e.message)),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test]
async fn a_call_in_a_spare_sees_its_own_files_and_environment_not_the_last_calls() {
    let f = fixture();
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(first.path().join("first.txt"), "first's secret").unwrap();
    std::fs::write(second.path().join("second.txt"), "second's file").unwrap();
    f.warm(&caps(first.path(), &[("FIRST_TOKEN", "s3cret")]))
        .await;

    let mine = caps(second.path(), &[("MINE", "yes")]);
    let read = |name: &str| json!({"mode": "read", "path": name});
    let own = content(
        f.call(&mine, &Limits::default(), read("second.txt"), &never())
            .await,
    );
    assert_eq!(f.spares_used(), 1, "the call did not run in the spare");
    assert_eq!(own.as_deref(), Ok("second's file"));

    f.sandbox.idle().await;
    let other = content(
        f.call(&mine, &Limits::default(), read("first.txt"), &never())
            .await,
    );
    assert!(
        other.is_err(),
        "the last call's file was readable: {other:?}"
    );

    f.sandbox.idle().await;
    let env = content(
        f.call(&mine, &Limits::default(), json!({"mode": "env"}), &never())
            .await,
    )
    .unwrap();
    assert_eq!(f.spares_used(), 3);
    assert_eq!(env, "MINE=yes", "the guest's environment");
}

#[tokio::test]
async fn a_spare_serves_one_call_only() {
    let (f, _dir, caps) = warmed().await;
    for _ in 0..3 {
        let r = f
            .call(&caps, &Limits::default(), json!({"mode": "ok"}), &never())
            .await;
        assert!(matches!(r, Ok(GuestResult::Output(_))));
    }
    assert_eq!(
        f.spares_used(),
        1,
        "calls after the first had no spare to take"
    );
}

#[tokio::test]
async fn a_call_in_a_spare_is_stopped_at_its_own_deadline_and_by_its_own_cancellation() {
    let (f, _dir, caps) = warmed().await;
    let limits = Limits {
        timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let started = std::time::Instant::now();
    let r = f
        .call(&caps, &limits, json!({"mode": "loop"}), &never())
        .await;
    assert_eq!(f.spares_used(), 1);
    assert!(
        matches!(
            r,
            Err(Error::Limit {
                limit: Limit::Timeout,
                ..
            })
        ),
        "the looping guest was not stopped at its deadline"
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    f.sandbox.idle().await;
    let cancel = CancelToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.cancel();
    });
    let r = f
        .call(&caps, &Limits::default(), json!({"mode": "loop"}), &cancel)
        .await;
    assert_eq!(f.spares_used(), 2);
    assert!(
        matches!(r, Err(Error::Cancelled { .. })),
        "the looping guest was not cancelled: {:?}",
        r.err()
    );
}

#[tokio::test]
async fn a_spare_made_under_a_larger_memory_limit_does_not_serve_a_smaller_one() {
    let (f, _dir, caps) = warmed().await;
    // Less than the component's own initial memory: instantiating it is refused.
    let tiny = Limits {
        max_memory_bytes: 64 << 10,
        ..Limits::default()
    };
    let r = f.call(&caps, &tiny, json!({"mode": "ok"}), &never()).await;
    assert!(
        matches!(
            r,
            Err(Error::Limit {
                limit: Limit::Memory,
                ..
            })
        ),
        "a call under a 64 KiB memory limit ran"
    );
}

#[tokio::test]
async fn only_a_read_only_calls_store_waits_for_the_idle_moment() {
    let (f, dir, read_only) = warmed().await;
    let waiting = || f.sandbox.stores.lock().done.len();
    let r = f
        .call(
            &read_only,
            &Limits::default(),
            json!({"mode": "ok"}),
            &never(),
        )
        .await;
    assert!(matches!(r, Ok(GuestResult::Output(_))));
    assert_eq!(waiting(), 1, "a read-only call's store waits to be dropped");

    let mut writable = read_only.clone();
    writable.preopens[0].writable = true;
    let input = json!({"mode": "write", "path": "out.txt", "text": "written"});
    let r = f.call(&writable, &Limits::default(), input, &never()).await;
    assert!(matches!(r, Ok(GuestResult::Output(_))), "{:?}", r.err());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "written"
    );
    assert_eq!(
        waiting(),
        0,
        "a call that could write kept its store (and its open files) past its end"
    );
}

#[tokio::test]
async fn under_load_nothing_waits_and_no_spare_is_made_until_the_next_idle_moment() {
    let (f, _dir, caps) = warmed().await;
    let waiting = || f.sandbox.stores.lock().done.len();
    let ok = || json!({"mode": "ok"});
    let r = f.call(&caps, &Limits::default(), ok(), &never()).await;
    assert!(matches!(r, Ok(GuestResult::Output(_))));
    assert_eq!((f.spares_used(), waiting()), (1, 1));

    // Calls overlap now: the kept store is dropped at once, and later calls keep none.
    f.sandbox.under_load();
    assert_eq!(waiting(), 0, "a finished store still waited under load");
    for _ in 0..2 {
        let r = f.call(&caps, &Limits::default(), ok(), &never()).await;
        assert!(matches!(r, Ok(GuestResult::Output(_))));
        assert_eq!(waiting(), 0, "a call under load kept its store");
    }
    assert_eq!(f.spares_used(), 1, "a call under load ran in a spare");

    // Quiet again: spares and the deferred drop come back.
    f.sandbox.idle().await;
    let r = f.call(&caps, &Limits::default(), ok(), &never()).await;
    assert!(matches!(r, Ok(GuestResult::Output(_))));
    assert_eq!((f.spares_used(), waiting()), (2, 1));
}
