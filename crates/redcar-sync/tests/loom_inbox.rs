//! Every interleaving of a session's inbox with the node connections that deliver to it
//! (loom): a reply delivered while the session waits for it, one it does not wait for
//! arriving first, a delivery dropped by a connection that ended, a reply forgotten while it
//! comes, and the session gone while a reply comes. `RUSTFLAGS="--cfg loom" cargo test -p
//! redcar-sync --release` (scripts/test-all.sh).
#![cfg(loom)]

use std::future::poll_fn;

use loom::sync::Arc;
use loom::thread;
use redcar_sync::inbox::{Delivery, Inbox};
use redcar_sync::Closed;

mod common;

/// Waits (parked, as a task would be) for reply `seq`.
fn wait(inbox: &mut Inbox<u32>, seq: u64) -> Result<u32, Closed> {
    loom::future::block_on(poll_fn(|cx| inbox.poll_reply(seq, cx)))
}

#[test]
fn a_reply_delivered_while_the_session_waits_wakes_it() {
    common::model(|| {
        let mut inbox = Inbox::default();
        let delivery = inbox.reserve();
        let conn = thread::spawn(move || delivery.send(5));
        assert_eq!(wait(&mut inbox, 0), Ok(5));
        conn.join().expect("connection");
        assert!(inbox.is_empty());
    });
}

#[test]
fn a_reply_not_waited_for_does_not_take_the_wake_of_the_one_that_is() {
    common::model(|| {
        let mut inbox = Inbox::default();
        let first = inbox.reserve();
        let second = inbox.reserve();
        let one = thread::spawn(move || first.send(1));
        let two = thread::spawn(move || second.send(2));
        assert_eq!(wait(&mut inbox, 0), Ok(1));
        assert_eq!(wait(&mut inbox, 1), Ok(2));
        one.join().expect("first connection");
        two.join().expect("second connection");
        assert!(inbox.is_empty());
    });
}

#[test]
fn a_batch_handed_over_at_once_wakes_the_session_once_it_waits() {
    common::model(|| {
        let mut inbox = Inbox::default();
        let deliveries: Vec<Delivery<u32>> = (0..3).map(|_| inbox.reserve()).collect();
        let conn = thread::spawn(move || {
            let taken: Vec<_> = deliveries.into_iter().filter_map(Delivery::take).collect();
            let shared = taken[0].0.clone();
            shared.deliver(taken.into_iter().map(|(_, seq)| (seq, Ok(seq as u32))));
        });
        // Whatever the session already sees without waiting is the reply itself.
        if let Some(got) = inbox.try_reply(0) {
            assert_eq!(got, Ok(0));
        } else {
            assert_eq!(wait(&mut inbox, 0), Ok(0));
        }
        assert_eq!(wait(&mut inbox, 2), Ok(2));
        assert_eq!(wait(&mut inbox, 1), Ok(1));
        conn.join().expect("connection");
    });
}

#[test]
fn a_delivery_dropped_by_an_ended_connection_wakes_the_session_with_closed() {
    common::model(|| {
        let mut inbox = Inbox::default();
        let delivery = inbox.reserve();
        let conn = thread::spawn(move || drop(delivery));
        assert_eq!(wait(&mut inbox, 0), Err(Closed));
        conn.join().expect("connection");
    });
}

#[test]
fn a_reply_forgotten_while_it_comes_is_dropped_and_the_next_still_arrives() {
    common::model(|| {
        let mut inbox = Inbox::default();
        let late = inbox.reserve();
        let next = inbox.reserve();
        let conn = thread::spawn(move || {
            late.send(1);
            next.send(2);
        });
        inbox.forget(0);
        assert_eq!(wait(&mut inbox, 1), Ok(2));
        conn.join().expect("connection");
        assert_eq!(
            inbox.try_reply(0),
            None,
            "a forgotten reply is never handed out"
        );
        assert!(inbox.is_empty());
    });
}

#[test]
fn a_session_gone_while_a_reply_comes_frees_the_reply() {
    common::model(|| {
        let mut inbox = Inbox::<Arc<u32>>::default();
        let delivery = inbox.reserve();
        let reply = Arc::new(9);
        let sent = reply.clone();
        let conn = thread::spawn(move || delivery.send(sent));
        drop(inbox);
        conn.join().expect("connection");
        assert_eq!(
            Arc::strong_count(&reply),
            1,
            "the reply went with the inbox"
        );
    });
}
