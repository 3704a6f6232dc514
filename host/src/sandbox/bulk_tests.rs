use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// A scan that notes how many of its kind run at once, then takes 30 ms.
async fn counted(running: Arc<AtomicUsize>, most: Arc<AtomicUsize>) -> CallReport {
    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
    most.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(30)).await;
    running.fetch_sub(1, Ordering::SeqCst);
    report("done")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_beyond_their_turns_wait_and_every_one_ends() {
    let turns = scan_threads() + 1;
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let calls: Vec<_> = (0..turns * 3)
        .map(|_| {
            let (running, most) = (running.clone(), most.clone());
            tokio::spawn(async move {
                let cancel = CancelToken::new();
                run(counted(running, most), &cancel).await
            })
        })
        .collect();
    for call in calls {
        let r = call.await.unwrap();
        assert_eq!(r.net_refusals, vec!["done".to_string()]);
    }
    let most = most.load(Ordering::SeqCst);
    assert!(
        (1..=turns).contains(&most),
        "{most} scans ran at once; at most {turns} may"
    );
}

#[tokio::test]
async fn a_scan_cancelled_while_it_waits_never_starts() {
    // Every turn taken (other tests' scans end within their own few milliseconds).
    let all = turns()
        .acquire_many(scan_threads() as u32 + 1)
        .await
        .unwrap();
    let cancel = CancelToken::new();
    let started = Arc::new(AtomicBool::new(false));
    let call = {
        let started = started.clone();
        async move {
            started.store(true, Ordering::SeqCst);
            report("ran")
        }
    };
    let waiting = tokio::spawn({
        let cancel = cancel.clone();
        async move { run(call, &cancel).await }
    });
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(!waiting.is_finished(), "the scan did not wait for a turn");
    cancel.cancel();
    let r = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap_or_else(|_| panic!("the cancelled scan kept waiting"))
        .unwrap();
    drop(all);
    let message = r.result.err().unwrap().to_string();
    assert!(message.contains("cancelled"), "{message}");
    assert!(message.contains("nothing was run"), "{message}");
    assert!(!started.load(Ordering::SeqCst), "the cancelled scan ran");
}
