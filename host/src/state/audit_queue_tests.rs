use super::*;
use std::sync::mpsc;

#[test]
fn a_burst_is_one_batch_and_a_flush_ends_the_linger() {
    let (tx, rx) = queue::<u32>();
    let writer = std::thread::spawn(move || {
        let mut batches = Vec::new();
        while let Some(b) = rx.next_batch(Duration::from_secs(30)) {
            batches.push(b);
        }
        batches
    });
    for i in 0..10 {
        tx.send(i, false).unwrap();
    }
    // Urgent: written now, not after the 30 s linger.
    let started = Instant::now();
    tx.send(10, true).unwrap();
    tx.send(11, false).unwrap();
    drop(tx);
    let batches = writer.join().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the linger was not cut short"
    );
    let all: Vec<u32> = batches.iter().flatten().copied().collect();
    assert_eq!(all, (0..12).collect::<Vec<_>>(), "nothing lost, in order");
    assert!(batches.len() <= 2, "a burst is gathered: {batches:?}");
}

#[test]
fn closing_ends_the_writer_after_what_was_queued() {
    let (tx, rx) = queue::<u32>();
    tx.send(1, false).unwrap();
    tx.close();
    assert_eq!(
        tx.send(2, false),
        Err(2),
        "a closed queue takes nothing more"
    );
    assert_eq!(rx.next_batch(Duration::from_secs(30)), Some(vec![1]));
    assert_eq!(rx.next_batch(Duration::from_secs(30)), None);
}

#[test]
fn a_gone_writer_hands_items_back_and_releases_what_waited() {
    let (tx, rx) = queue::<mpsc::Sender<()>>();
    let (reply, waiting) = mpsc::channel();
    tx.send(reply, true).unwrap();
    drop(rx);
    // The queued reply was dropped with the writer: whoever waited on it is not left hanging.
    assert!(waiting.recv().is_err());
    let (reply, _w) = mpsc::channel();
    assert!(
        tx.send(reply, false).is_err(),
        "sends come back once the writer is gone"
    );
}

#[test]
fn an_idle_writer_is_woken_by_the_first_send() {
    let (tx, rx) = queue::<u32>();
    let (got_tx, got) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        while let Some(b) = rx.next_batch(Duration::from_millis(1)) {
            got_tx.send(b).unwrap();
        }
    });
    // Let the writer go idle first.
    std::thread::sleep(Duration::from_millis(50));
    tx.send(7, false).unwrap();
    assert_eq!(got.recv_timeout(Duration::from_secs(10)).unwrap(), vec![7]);
    drop(tx);
    writer.join().unwrap();
}
