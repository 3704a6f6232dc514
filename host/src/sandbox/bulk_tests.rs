use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn report(text: &str) -> CallReport {
    CallReport {
        result: Err(Error::Sandbox(text.to_string())),
        net_refusals: vec![text.to_string()],
    }
}

/// A call that runs until its token is cancelled, and says whether it saw that.
async fn until_cancelled(cancel: CancelToken, saw: Arc<AtomicBool>) -> CallReport {
    for _ in 0..500 {
        if cancel.is_cancelled() {
            saw.store(true, Ordering::SeqCst);
            return report("cancelled");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    report("ran to the end")
}

#[tokio::test]
async fn a_scan_whose_caller_goes_away_is_cancelled() {
    let cancel = CancelToken::new();
    let saw = Arc::new(AtomicBool::new(false));
    let call = until_cancelled(cancel.clone(), saw.clone());
    // The caller waits 50 ms, then drops the call (a client disconnect, a select's other arm).
    let waited = tokio::time::timeout(Duration::from_millis(50), run(call, &cancel)).await;
    assert!(waited.is_err(), "the call ended by itself");
    assert!(
        cancel.is_cancelled(),
        "dropping the wait did not cancel the call"
    );
    for _ in 0..200 {
        if saw.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the call on the scan thread never saw its cancellation");
}

#[tokio::test]
async fn a_scan_that_ends_is_reported_and_not_cancelled() {
    let cancel = CancelToken::new();
    let r = run(async { report("done") }, &cancel).await;
    assert_eq!(r.net_refusals, vec!["done".to_string()]);
    assert!(!cancel.is_cancelled());
}

#[tokio::test]
async fn a_scan_that_panics_is_an_error_not_a_crash() {
    let cancel = CancelToken::new();
    let r = run(
        async {
            if std::hint::black_box(true) {
                panic!("a bug in a host function");
            }
            report("unreachable")
        },
        &cancel,
    )
    .await;
    let message = r.result.err().unwrap().to_string();
    assert!(message.contains("stopped unexpectedly"), "{message}");
    assert!(message.contains("retried"), "{message}");
}
