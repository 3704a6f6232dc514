//! A call's report: the network refusals come back beside the guest's result, whether the
//! guest returned or was stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::cancel::CancelToken;
use crate::error::{Error, Limit};
use crate::sandbox::net::NetGrant;
use crate::sandbox::{wit, Capabilities, GuestResult, Limits, Sandbox};
use crate::workspace::GUEST_ROOT;
use serde_json::json;
use std::time::Duration;

fn test_plugin() -> Vec<u8> {
    let file = format!(
        "{}/toolgate_tool_test_plugin.wasm",
        crate::tools::registry::GUEST_ARTIFACT_DIR
    );
    std::fs::read(file).unwrap()
}

/// A grant that allows no host at all.
fn nothing_allowed() -> NetGrant {
    NetGrant {
        allow: vec![],
        also: None,
        allow_private: vec![],
        max_response_bytes: 1 << 20,
        timeout: Duration::from_secs(5),
        deadline: None,
        refusals: Default::default(),
        credentials: Default::default(),
        leaks: Default::default(),
    }
}

/// Run the test plugin with `input` under `net` and `limits`.
async fn run(net: NetGrant, limits: Limits, input: serde_json::Value) -> super::CallReport {
    let cache = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(Some(cache.path().to_path_buf())).unwrap();
    let loaded = sandbox.load("test-plugin", &test_plugin()).unwrap();
    let caps = Capabilities {
        net: Some(net),
        ..Capabilities::default()
    };
    let context = wit::CallContext {
        workspace_root: GUEST_ROOT.to_string(),
        max_output_bytes: 1 << 20,
        denied_globs: Vec::new(),
    };
    sandbox
        .call_report(
            &loaded,
            &caps,
            &limits,
            &input.to_string(),
            &context,
            &CancelToken::never(),
        )
        .await
}

#[tokio::test]
async fn a_refused_request_is_reported_beside_the_tool_error() {
    let input = json!({"mode": "send", "url": "http://refused.example/"});
    let report = run(nothing_allowed(), Limits::default(), input).await;
    assert!(matches!(report.result, Ok(GuestResult::ToolError(_))));
    assert_eq!(report.net_refusals.len(), 1, "{:?}", report.net_refusals);
    assert!(
        report.net_refusals[0].contains("refused.example"),
        "{:?}",
        report.net_refusals
    );
}

/// No test guest makes a request and then traps, so the refusal is recorded in the call's
/// grant the way the host records one, and the guest then runs into the deadline.
#[tokio::test]
async fn a_refusal_is_reported_when_the_guest_is_stopped() {
    let grant = nothing_allowed();
    grant
        .refusals
        .lock()
        .unwrap()
        .push("http://refused.example:80: refused".into());
    let limits = Limits {
        timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let report = run(grant, limits, json!({"mode": "loop"})).await;
    assert!(
        matches!(
            report.result,
            Err(Error::Limit {
                limit: Limit::Timeout,
                ..
            })
        ),
        "the guest was not stopped at the deadline"
    );
    assert_eq!(report.net_refusals, ["http://refused.example:80: refused"]);
}

/// Several components compiled side by side come back in the order asked, each with its own
/// result: one that does not compile does not take the others down.
#[test]
fn components_loaded_together_keep_their_order_and_their_own_errors() {
    let cache = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(Some(cache.path().to_path_buf())).unwrap();
    let good = test_plugin();
    let bad = b"not a component".to_vec();
    let digest = |b: &[u8]| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b));
    let (dg, db) = (digest(&good), digest(&bad));
    let items: Vec<(&str, &[u8], &str)> = vec![
        ("bad first", &bad, &db),
        ("good", &good, &dg),
        ("bad last", &bad, &db),
    ];
    let loaded = sandbox.load_many(&items);
    assert_eq!(loaded.len(), 3);
    for (i, name) in [(0, "bad first"), (2, "bad last")] {
        let Err(e) = &loaded[i] else {
            panic!("{name} compiled")
        };
        assert!(e.to_string().contains(name), "{e}");
    }
    assert!(loaded[1].is_ok(), "the good component failed");
}
