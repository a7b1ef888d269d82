use super::*;

crate::reply_pool!(Texts, Result<&'static str, ()>);

type Outcome = Result<&'static str, ()>;

fn frame(text: &'static str) -> Outcome {
    Ok(text)
}

fn pooled() -> usize {
    parked::<Texts>()
}

#[tokio::test]
async fn a_sent_reply_arrives() {
    let (tx, rx) = channel::<Texts>();
    tx.send(frame("+OK\r\n"));
    assert_eq!(rx.await, Ok(frame("+OK\r\n")));
}

#[tokio::test]
async fn a_dropped_sender_closes_the_channel() {
    let (tx, rx) = channel::<Texts>();
    drop(tx);
    assert_eq!(rx.await, Err(Closed));
}

#[tokio::test]
async fn a_waiting_receiver_is_woken_from_another_thread() {
    let (tx, rx) = channel::<Texts>();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        tx.send(frame(":1\r\n"));
    });
    assert_eq!(rx.await, Ok(frame(":1\r\n")));
    sender.join().expect("sender thread");
}

#[test]
fn slots_are_reused_once_both_ends_are_gone() {
    // Counted after the first take: an empty pool refills from the process-wide one, which
    // the tests running alongside fill and drain.
    let (tx, rx) = channel::<Texts>();
    let before = pooled();
    tx.send(frame("+OK\r\n"));
    drop(rx);
    assert_eq!(pooled(), before + 1, "the finished slot is parked");
    let (tx, rx) = channel::<Texts>();
    assert_eq!(pooled(), before, "and taken again");
    // A recycled slot starts empty: no stale reply, not closed.
    let mut rx = Box::pin(rx);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(rx.as_mut().poll(&mut cx).is_pending());
    drop(tx);
    assert_eq!(rx.as_mut().poll(&mut cx), Poll::Ready(Err(Closed)));
}

#[test]
fn the_last_end_to_go_recycles_the_slot() {
    let (tx, rx) = channel::<Texts>();
    let before = pooled();
    drop(rx);
    assert_eq!(pooled(), before, "the sender still holds it");
    tx.send(frame("+late\r\n"));
    assert_eq!(
        pooled(),
        before + 1,
        "the sender was last, so it parks the slot"
    );
    let (tx, rx) = channel::<Texts>();
    drop(tx);
    assert_eq!(pooled(), before, "the receiver still holds it");
    drop(rx);
    assert_eq!(pooled(), before + 1);
}

#[test]
fn a_full_pool_spills_to_the_shared_one_and_refills_from_it() {
    // This thread frees many more slots than it takes (as a node connection's thread does):
    // its pool stays at most LOCAL_MAX, the surplus moves over in batches.
    let ends: Vec<_> = (0..LOCAL_MAX + BATCH).map(|_| channel::<Texts>()).collect();
    for (tx, rx) in ends {
        drop(rx);
        tx.send(frame("+OK\r\n"));
    }
    assert!(pooled() <= LOCAL_MAX, "the surplus went to the shared pool");
    // The batch moves themselves, on a shared pool of this test's own: the process-wide one
    // is also used by the tests running alongside.
    let fresh = || Arc::new(Slot::<Outcome>::new());
    let shared = Mutex::new(Slots::new());
    let mut full: Slots<Outcome> = (0..=LOCAL_MAX).map(|_| fresh()).collect();
    spill(&mut full, &shared);
    assert_eq!(full.len(), LOCAL_MAX + 1 - BATCH);
    assert_eq!(lock_pool(&shared).len(), BATCH);
    // Another thread with an empty pool takes a batch instead of allocating.
    let mut empty = Slots::new();
    refill(&mut empty, &shared);
    assert_eq!(empty.len(), BATCH, "a batch came over");
    assert!(lock_pool(&shared).is_empty());
    // A full shared pool frees the surplus instead of growing.
    let brim = Mutex::new((0..SHARED_MAX).map(|_| fresh()).collect::<Slots<Outcome>>());
    let mut over: Slots<Outcome> = (0..=LOCAL_MAX).map(|_| fresh()).collect();
    spill(&mut over, &brim);
    assert_eq!(over.len(), LOCAL_MAX + 1 - BATCH, "the batch was freed");
    assert_eq!(lock_pool(&brim).len(), SHARED_MAX);
}
