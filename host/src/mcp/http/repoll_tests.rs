use super::*;
use std::sync::atomic::AtomicUsize;

/// A runtime waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Wakes itself during its first `times` polls, then is ready with how often it was polled.
struct WakesItself {
    times: usize,
    polls: usize,
}

impl Future for WakesItself {
    type Output = usize;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls += 1;
        if self.polls > self.times {
            return Poll::Ready(self.polls);
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn poll_once<F: Future, N: Fn() -> bool + Unpin>(
    f: &mut Repoll<F, N>,
    count: &Arc<Count>,
) -> Poll<F::Output> {
    let waker = Waker::from(count.clone());
    Pin::new(f).poll(&mut Context::from_waker(&waker))
}

#[test]
fn a_wake_during_the_poll_polls_again_in_place_without_waking_the_runtime() {
    let count = Arc::new(Count::default());
    let mut f = Repoll::new(WakesItself { times: 2, polls: 0 }, || true);
    assert_eq!(poll_once(&mut f, &count), Poll::Ready(3));
    assert_eq!(count.0.load(Ordering::SeqCst), 0, "the runtime was woken");
}

#[test]
fn while_not_now_a_wake_during_the_poll_goes_to_the_runtime_as_unwrapped() {
    let count = Arc::new(Count::default());
    let mut f = Repoll::new(WakesItself { times: 2, polls: 0 }, || false);
    assert_eq!(poll_once(&mut f, &count), Poll::Pending);
    assert_eq!(f.inner.polls, 1);
    assert_eq!(count.0.load(Ordering::SeqCst), 1);
}

#[test]
fn a_future_that_keeps_waking_itself_goes_back_to_the_runtime() {
    let count = Arc::new(Count::default());
    let mut f = Repoll::new(
        WakesItself {
            times: usize::MAX,
            polls: 0,
        },
        || true,
    );
    assert_eq!(poll_once(&mut f, &count), Poll::Pending);
    assert_eq!(f.inner.polls, MAX_REPOLLS as usize + 1);
    // Its last wake is the runtime's: it is polled again in the runtime's turn.
    assert_eq!(count.0.load(Ordering::SeqCst), 1);
}

/// Pending until `ready` is set; keeps the waker it was last polled with.
struct Parked {
    ready: Arc<std::sync::atomic::AtomicBool>,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl Future for Parked {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.ready.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn a_wake_between_polls_goes_to_the_runtime_waker_of_the_latest_poll() {
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let kept = Arc::new(Mutex::new(None::<Waker>));
    let mut f = Repoll::new(
        Parked {
            ready: ready.clone(),
            waker: kept.clone(),
        },
        || true,
    );
    let (first, second) = (Arc::new(Count::default()), Arc::new(Count::default()));
    assert_eq!(poll_once(&mut f, &first), Poll::Pending);
    assert_eq!(poll_once(&mut f, &second), Poll::Pending);
    kept.lock().unwrap().take().unwrap().wake();
    assert_eq!(first.0.load(Ordering::SeqCst), 0);
    assert_eq!(second.0.load(Ordering::SeqCst), 1);
    ready.store(true, Ordering::SeqCst);
    assert_eq!(poll_once(&mut f, &second), Poll::Ready(()));
}

/// Wakes from other threads at any moment, during polls or between them, are never lost:
/// every one of many hand-offs between two tasks completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_wake_is_lost_between_threads() {
    for _ in 0..2000 {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let (back_tx, back_rx) = tokio::sync::oneshot::channel::<u32>();
        let task = tokio::spawn(Repoll::new(
            async move {
                let v = rx.await.unwrap();
                back_tx.send(v + 1).unwrap();
            },
            || true,
        ));
        let sender = std::thread::spawn(move || tx.send(41).unwrap());
        let waited = tokio::time::timeout(std::time::Duration::from_secs(10), back_rx).await;
        let Ok(got) = waited else {
            panic!("a wake was lost: the task never finished");
        };
        let got = got.unwrap();
        assert_eq!(got, 42);
        sender.join().unwrap();
        task.await.unwrap();
    }
}
