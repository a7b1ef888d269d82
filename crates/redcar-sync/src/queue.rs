//! The queue from client sessions to one node connection: unbounded, first in first out, and
//! allocation-free once warm.
//!
//! `tokio::sync::mpsc::unbounded_channel` stores messages in linked blocks of 32 and frees or
//! recycles a block only when the receiver has caught up; with sessions and the connection on
//! different worker threads it allocated a fresh block for roughly every other batch. Here the
//! senders push into one `VecDeque` under a mutex and the connection swaps the whole deque for
//! its (empty) spare one, so both keep their capacity and a batch costs the connection a single
//! lock. The connection is woken only when a push finds the queue empty and the connection
//! waiting: further pushes before it runs cost no wake-up.
//!
//! What holds: items come out in the order they were pushed, across swaps; a push after the
//! receiver is gone is refused and the item handed back, so the caller can fail its command as
//! never sent; items still queued when the receiver goes are dropped outside the lock, which fails
//! their reply channels at once. The queue is unbounded on purpose: the bound on what a node
//! connection holds is the in-flight limit on the connection and the clients' buffer budgets
//! upstream of it, not back-pressure here. Checked under loom
//! (crates/redcar-sync/tests/loom_queue.rs).

use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Context, Poll, Waker};

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::{Arc, Mutex, MutexGuard};

/// What both ends share: the deque under its lock, and two atomics read without it.
struct Shared<T> {
    /// The queued items and the ends' state; held only to push, to swap, or to mark an end gone.
    inner: Mutex<Inner<T>>,
    /// Something was pushed since the receiver last took: a loop appending commands of its own
    /// in place looks here first, so they cannot overtake commands queued before them.
    has_items: AtomicBool,
    /// Where a worker's event loop drives the receiving end (see [`Sender::home`]).
    home: AtomicU64,
}

/// `home` when no loop drives the connection.
const NO_HOME: u64 = u64::MAX;

struct Inner<T> {
    /// Items pushed and not yet swapped out, oldest first.
    items: VecDeque<T>,
    /// The sending side (the node handle) is gone: once drained, the connection ends.
    sender_gone: bool,
    /// The connection task ended: pushes are refused so callers learn nothing was sent.
    receiver_gone: bool,
    /// The connection, parked until something is queued.
    waker: Option<Waker>,
}

impl<T> Shared<T> {
    /// Nothing panics while holding the lock, so a poisoned one is still consistent.
    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sessions' end (held by the node handle).
pub struct Sender<T> {
    /// Shared with the receiver.
    shared: Arc<Shared<T>>,
}

/// The connection task's end.
pub struct Receiver<T> {
    /// Shared with the senders.
    shared: Arc<Shared<T>>,
    /// Items taken from the shared deque in one swap, handed out one by one.
    taken: VecDeque<T>,
}

/// A new, empty queue.
///
/// The receiver is driven by a tokio task or, once `set_home` is called, by an event loop.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner {
            items: VecDeque::new(),
            sender_gone: false,
            receiver_gone: false,
            waker: None,
        }),
        has_items: AtomicBool::new(false),
        home: AtomicU64::new(NO_HOME),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver {
            shared,
            taken: VecDeque::new(),
        },
    )
}

impl<T> Sender<T> {
    /// Queues `item` now; gives it back if the connection task has ended.
    ///
    /// Wakes the receiver only if it is parked (its waker is taken, so the next pushes before it
    /// runs wake nobody); the wake happens after the lock is released.
    pub fn send(&self, item: T) -> Result<(), T> {
        let waker = {
            let mut inner = self.shared.lock();
            if inner.receiver_gone {
                return Err(item);
            }
            inner.items.push_back(item);
            self.shared.has_items.store(true, Ordering::Release);
            inner.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl<T> Sender<T> {
    /// The event loop driving the receiving end and the connection's key there: `(loop, key)`,
    /// once the loop took it over.
    #[inline]
    pub fn home(&self) -> Option<(usize, usize)> {
        let home = self.shared.home.load(Ordering::Acquire);
        (home != NO_HOME).then_some(((home >> 32) as usize, (home & 0xffff_ffff) as usize))
    }
}

impl<T> Drop for Sender<T> {
    /// Marks the sending side gone and wakes the receiver, which ends once it has taken what is
    /// queued.
    fn drop(&mut self) {
        let waker = {
            let mut inner = self.shared.lock();
            inner.sender_gone = true;
            inner.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// The next item without waiting, if one is queued.
    ///
    /// Swaps the whole shared deque out when its own is empty, so a burst costs one lock.
    pub fn try_recv(&mut self) -> Option<T> {
        if self.taken.is_empty() {
            let mut inner = self.shared.lock();
            self.shared.has_items.store(false, Ordering::Relaxed);
            std::mem::swap(&mut inner.items, &mut self.taken);
        }
        self.taken.pop_front()
    }

    /// Whether something may be queued that this end has not taken yet (one atomic load).
    #[inline]
    pub fn has_items(&self) -> bool {
        !self.taken.is_empty() || self.shared.has_items.load(Ordering::Acquire)
    }

    /// Says where a worker's event loop drives this end (see [`Sender::home`]).
    ///
    /// `event_loop` and `key` must each fit in 32 bits (they are packed into one atomic). Called by
    /// the loop that takes the connection over, before it serves it.
    pub fn set_home(&self, event_loop: usize, key: usize) {
        let home = ((event_loop as u64) << 32) | (key as u64 & 0xffff_ffff);
        self.shared.home.store(home, Ordering::Release);
    }

    /// The next item; `None` once the sender is gone and everything was taken. Cancel-safe:
    /// dropping the future loses nothing.
    pub async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`recv`](Self::recv) as a poll: registers `cx`'s waker when nothing is queued.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(item) = self.taken.pop_front() {
            return Poll::Ready(Some(item));
        }
        let mut inner = self.shared.lock();
        self.shared.has_items.store(false, Ordering::Relaxed);
        std::mem::swap(&mut inner.items, &mut self.taken);
        if let Some(item) = self.taken.pop_front() {
            return Poll::Ready(Some(item));
        }
        if inner.sender_gone {
            return Poll::Ready(None);
        }
        match &inner.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => inner.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    /// Refuses further pushes and drops what is queued (outside the lock), so callers waiting
    /// on those items learn at once that nothing will be sent.
    fn drop(&mut self) {
        let queued = {
            let mut inner = self.shared.lock();
            inner.receiver_gone = true;
            self.shared.home.store(NO_HOME, Ordering::Release);
            std::mem::take(&mut inner.items)
        };
        drop(queued);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn items_come_out_in_order_across_swaps() {
        let (tx, mut rx) = channel();
        for i in 0..5 {
            tx.send(i).expect("open");
        }
        assert_eq!(rx.try_recv(), Some(0));
        tx.send(5).expect("open");
        let mut got = Vec::new();
        while let Some(i) = rx.try_recv() {
            got.push(i);
        }
        assert_eq!(got, [1, 2, 3, 4, 5]);
        assert_eq!(rx.try_recv(), None);
    }

    #[tokio::test]
    async fn a_waiting_receiver_wakes_on_send_and_ends_when_the_sender_goes() {
        let (tx, mut rx) = channel();
        let receiver = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(i) = rx.recv().await {
                got.push(i);
            }
            got
        });
        tokio::task::yield_now().await;
        tx.send(1).expect("open");
        tokio::task::yield_now().await;
        tx.send(2).expect("open");
        tx.send(3).expect("open");
        drop(tx);
        assert_eq!(receiver.await.expect("receiver task"), [1, 2, 3]);
    }

    #[test]
    fn items_still_queued_are_dropped_with_the_receiver() {
        let (tx, rx) = channel();
        let item = Arc::new(());
        tx.send(item.clone()).expect("open");
        drop(rx);
        assert_eq!(
            Arc::strong_count(&item),
            1,
            "the queued copy went with the receiver"
        );
    }

    #[test]
    fn sends_after_the_receiver_is_gone_are_given_back() {
        let (tx, rx) = channel();
        drop(rx);
        assert_eq!(tx.send(7), Err(7));
    }

    #[tokio::test]
    async fn items_sent_from_other_threads_all_arrive() {
        let (tx, mut rx) = channel();
        let tx = Arc::new(tx);
        let senders: Vec<_> = (0..4)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for i in 0..1000 {
                        tx.send(t * 1000 + i).expect("open");
                    }
                })
            })
            .collect();
        for sender in senders {
            sender.join().expect("sender thread");
        }
        drop(tx);
        let mut got = Vec::new();
        while let Some(i) = rx.recv().await {
            got.push(i);
        }
        assert_eq!(got.len(), 4000);
        // Each thread's items stay in that thread's order.
        for t in 0..4 {
            let mine: Vec<_> = got.iter().filter(|i| **i / 1000 == t).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
