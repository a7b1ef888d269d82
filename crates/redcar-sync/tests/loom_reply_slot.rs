//! Every interleaving of a reply slot's two ends (loom): the reply sent while the receiver
//! waits, is polled once and cancelled, or is dropped; the sender dropped without a reply; and
//! the slot parked by exactly one end and reused clean. `RUSTFLAGS="--cfg loom" cargo test -p
//! redcar-sync --release` (scripts/test-all.sh).
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use loom::thread;
use redcar_sync::reply_slot::{channel, parked, ReplyReceiver};
use redcar_sync::Closed;

redcar_sync::reply_pool!(Numbers, u32);

mod common;

fn poll_once(rx: &mut ReplyReceiver<Numbers>) -> Poll<Result<u32, Closed>> {
    Pin::new(rx).poll(&mut Context::from_waker(Waker::noop()))
}

/// Takes a channel on this thread (the slot parked here, if any) and checks it starts empty:
/// no stale reply, not closed. Returns how many slots were parked here before.
fn reuse() -> usize {
    let before = parked::<Numbers>();
    let (tx, mut rx) = channel::<Numbers>();
    assert_eq!(
        poll_once(&mut rx),
        Poll::Pending,
        "a reused slot starts empty"
    );
    tx.send(2);
    assert_eq!(poll_once(&mut rx), Poll::Ready(Ok(2)));
    before
}

#[test]
fn a_reply_sent_while_the_receiver_waits_wakes_it() {
    common::model(|| {
        let (tx, rx) = channel::<Numbers>();
        let sender = thread::spawn(move || {
            tx.send(7);
            parked::<Numbers>()
        });
        assert_eq!(loom::future::block_on(rx), Ok(7));
        let theirs = sender.join().expect("sender");
        assert_eq!(
            parked::<Numbers>() + theirs,
            1,
            "parked once, by the last end"
        );
    });
}

#[test]
fn a_sender_dropped_while_the_receiver_waits_closes_it() {
    common::model(|| {
        let (tx, rx) = channel::<Numbers>();
        let sender = thread::spawn(move || {
            drop(tx);
            parked::<Numbers>()
        });
        assert_eq!(loom::future::block_on(rx), Err(Closed));
        let theirs = sender.join().expect("sender");
        assert_eq!(
            parked::<Numbers>() + theirs,
            1,
            "parked once, by the last end"
        );
    });
}

#[test]
fn a_receiver_cancelled_while_the_reply_comes_leaves_one_clean_slot() {
    common::model(|| {
        let (tx, mut rx) = channel::<Numbers>();
        let sender = thread::spawn(move || {
            tx.send(1);
            reuse()
        });
        match poll_once(&mut rx) {
            Poll::Ready(got) => assert_eq!(got, Ok(1)),
            Poll::Pending => {}
        }
        drop(rx);
        let mine = reuse();
        let theirs = sender.join().expect("sender");
        assert_eq!(mine + theirs, 1, "parked once, by the last end");
    });
}

#[test]
fn both_ends_dropped_at_once_park_the_slot_once() {
    common::model(|| {
        let (tx, rx) = channel::<Numbers>();
        let sender = thread::spawn(move || {
            drop(tx);
            reuse()
        });
        drop(rx);
        let mine = reuse();
        let theirs = sender.join().expect("sender");
        assert_eq!(mine + theirs, 1, "parked once, by the last end");
    });
}
