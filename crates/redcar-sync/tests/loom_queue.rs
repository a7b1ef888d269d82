//! Every interleaving of the queue from client sessions to one node connection (loom): pushes
//! while the connection waits (it is woken), from two sessions at once (each one's order kept),
//! the senders gone (the connection ends once drained), the connection gone while a session
//! pushes (the item is given back or dropped, never kept), and `has_items` never saying no
//! when something was queued before it. `RUSTFLAGS="--cfg loom" cargo test -p redcar-sync
//! --release` (scripts/test-all.sh).
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use redcar_sync::queue::{channel, Receiver};

mod common;

/// Everything the connection receives until every sender is gone, waiting (parked, as a task
/// would be) whenever the queue is empty.
fn drain(rx: &mut Receiver<u32>) -> Vec<u32> {
    loom::future::block_on(async {
        let mut got = Vec::new();
        while let Some(item) = rx.recv().await {
            got.push(item);
        }
        got
    })
}

#[test]
fn pushes_wake_the_waiting_connection_and_the_senders_going_ends_it() {
    common::model(|| {
        // The node handle stays alive while the connection waits: only the push can wake it.
        let (tx, mut rx) = channel();
        let tx = Arc::new(tx);
        let session = {
            let tx = tx.clone();
            thread::spawn(move || {
                tx.send(1).expect("open");
                tx.send(2).expect("open");
            })
        };
        let first_two = loom::future::block_on(async {
            let one = rx.recv().await;
            let two = rx.recv().await;
            (one, two)
        });
        assert_eq!(first_two, (Some(1), Some(2)));
        session.join().expect("session");
        drop(tx);
        assert_eq!(drain(&mut rx), [], "ended once the senders are gone");
    });
}

#[test]
fn two_sessions_pushing_at_once_keep_their_own_order() {
    common::model(|| {
        let (tx, mut rx) = channel();
        let tx = Arc::new(tx);
        let other = tx.clone();
        let session = thread::spawn(move || {
            other.send(10).expect("open");
            other.send(11).expect("open");
        });
        tx.send(20).expect("open");
        drop(tx);
        let got = drain(&mut rx);
        session.join().expect("session");
        assert_eq!(got.len(), 3);
        let theirs: Vec<_> = got.iter().filter(|i| **i < 20).collect();
        assert_eq!(theirs, [&10, &11]);
    });
}

#[test]
fn an_item_pushed_as_the_connection_ends_is_given_back_or_dropped() {
    common::model(|| {
        let (tx, rx) = channel();
        let item = Arc::new(());
        let sent = item.clone();
        let session = thread::spawn(move || match tx.send(sent) {
            Ok(()) => true,
            Err(back) => {
                drop(back);
                false
            }
        });
        drop(rx);
        session.join().expect("session");
        assert_eq!(Arc::strong_count(&item), 1, "no copy is kept anywhere");
    });
}

#[test]
fn has_items_sees_what_was_queued_before_it() {
    common::model(|| {
        let (tx, mut rx) = channel();
        let session = thread::spawn(move || {
            tx.send(1).expect("open");
            tx
        });
        let early = rx.has_items();
        if early {
            assert_eq!(rx.try_recv(), Some(1), "said so, so it is there");
        }
        let tx = session.join().expect("session");
        if !early {
            assert!(rx.has_items(), "queued before the join");
            assert_eq!(rx.try_recv(), Some(1));
        }
        assert!(!rx.has_items(), "all taken");
        assert_eq!(rx.try_recv(), None);
        drop(tx);
    });
}
