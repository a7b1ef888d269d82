//! A one-shot channel for one command's reply whose slots are reused, so forwarding a command
//! allocates nothing in the steady state.
//!
//! Client sessions' own commands use their inbox instead (`inbox.rs`: cheaper per command);
//! these slots serve everything that awaits a reply as a future (fan-outs, splits, retries).
//!
//! `tokio::sync::oneshot` allocates its shared cell for every channel: one `malloc`/`free` pair
//! per forwarded command, the last allocation on the single-slot path. Here the cell is an
//! `Arc<Slot>`; whichever end finishes last resets it and parks it in a per-thread pool, and
//! the next `channel()` on that thread takes it back. A session may run on one worker thread and
//! a node connection on another, so a thread can end up freeing more slots than it takes: pools
//! hand surplus slots in batches to one shared pool, and an empty pool refills from it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use super::UpstreamError;

/// What a node connection hands back for one command.
pub(crate) type Outcome = Result<Bytes, UpstreamError>;

/// Slots one thread keeps; above this, a batch goes to the shared pool.
const LOCAL_MAX: usize = 256;
/// Slots moved between a thread's pool and the shared one at a time (one lock per batch).
const BATCH: usize = 64;
/// Slots the shared pool keeps; beyond this they are freed (after a burst, memory comes back).
const SHARED_MAX: usize = 8192;

thread_local! {
    static POOL: RefCell<Slots> = const { RefCell::new(Vec::new()) };
}

type Slots = Vec<Arc<Slot>>;

static SHARED: Mutex<Slots> = Mutex::new(Vec::new());

fn lock_pool(shared: &Mutex<Slots>) -> MutexGuard<'_, Slots> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// Moves up to a batch of slots from `shared` into `pool` (one lock).
fn refill(pool: &mut Slots, shared: &Mutex<Slots>) {
    let mut shared = lock_pool(shared);
    let from = shared.len().saturating_sub(BATCH);
    pool.extend(shared.drain(from..));
}

/// Moves a batch of slots from an over-full `pool` to `shared`, or frees them when `shared` is
/// full (after a burst, memory comes back).
fn spill(pool: &mut Slots, shared: &Mutex<Slots>) {
    let from = pool.len().saturating_sub(BATCH);
    let mut shared = lock_pool(shared);
    if shared.len() < SHARED_MAX {
        shared.extend(pool.drain(from..));
    } else {
        pool.truncate(from);
    }
}

/// A reset slot from this thread's pool, refilled from the shared pool when empty.
fn take() -> Arc<Slot> {
    let pooled = POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.is_empty() {
            refill(&mut pool, &SHARED);
        }
        pool.pop()
    });
    pooled.unwrap_or_default()
}

/// Called by each end once it is done with the slot: the second to finish resets it and parks
/// it for reuse. Counting finished ends (rather than `Arc` holders) matters because the other end
/// may still hold its `Arc` for a moment after it finished; it never touches the slot again.
fn release(slot: Arc<Slot>) {
    if slot.finished.fetch_add(1, Ordering::AcqRel) == 0 {
        return;
    }
    *slot.lock() = State::default();
    slot.finished.store(0, Ordering::Release);
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        pool.push(slot);
        if pool.len() > LOCAL_MAX {
            spill(&mut pool, &SHARED);
        }
    });
}

#[derive(Default)]
struct Slot {
    state: Mutex<State>,
    /// Ends (sender, receiver) done with this use of the slot.
    finished: AtomicU8,
}

#[derive(Default)]
struct State {
    value: Option<Outcome>,
    /// The sender went away without sending.
    closed: bool,
    waker: Option<Waker>,
}

impl Slot {
    /// Never poisoned in practice (nothing panics while holding it); if it were, the state is
    /// still consistent, so carry on.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The connection's end: delivers one reply.
pub(crate) struct ReplySender {
    slot: Option<Arc<Slot>>,
}

/// The caller's end: resolves to the reply, or to `Err(Closed)` if the sender was dropped
/// without one (its connection task ended).
pub(crate) struct ReplyReceiver {
    /// `None` only inside `drop`, once the slot went back to the pool.
    slot: Option<Arc<Slot>>,
}

/// The sender was dropped without sending.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Closed;

/// A new channel, on a recycled slot when this thread has one.
pub(crate) fn channel() -> (ReplySender, ReplyReceiver) {
    let slot = take();
    (
        ReplySender {
            slot: Some(slot.clone()),
        },
        ReplyReceiver { slot: Some(slot) },
    )
}

impl ReplySender {
    /// Hands over the reply and wakes the receiver. If the receiver is gone the reply is simply
    /// dropped (the caller gave up at its deadline).
    pub(crate) fn send(mut self, outcome: Outcome) {
        if let Some(slot) = self.slot.take() {
            let waker = {
                let mut state = slot.lock();
                state.value = Some(outcome);
                state.waker.take()
            };
            release(slot);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

impl Drop for ReplySender {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            let waker = {
                let mut state = slot.lock();
                state.closed = true;
                state.waker.take()
            };
            release(slot);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

impl Future for ReplyReceiver {
    type Output = Result<Outcome, Closed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(slot) = &self.slot else {
            return Poll::Ready(Err(Closed));
        };
        let mut state = slot.lock();
        if let Some(outcome) = state.value.take() {
            return Poll::Ready(Ok(outcome));
        }
        if state.closed {
            return Poll::Ready(Err(Closed));
        }
        match &state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Drop for ReplyReceiver {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            release(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(text: &str) -> Outcome {
        Ok(Bytes::copy_from_slice(text.as_bytes()))
    }

    fn pooled() -> usize {
        POOL.with(|pool| pool.borrow().len())
    }

    #[tokio::test]
    async fn a_sent_reply_arrives() {
        let (tx, rx) = channel();
        tx.send(frame("+OK\r\n"));
        assert_eq!(rx.await, Ok(frame("+OK\r\n")));
    }

    #[tokio::test]
    async fn a_dropped_sender_closes_the_channel() {
        let (tx, rx) = channel();
        drop(tx);
        assert_eq!(rx.await, Err(Closed));
    }

    #[tokio::test]
    async fn a_waiting_receiver_is_woken_from_another_thread() {
        let (tx, rx) = channel();
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
        let (tx, rx) = channel();
        let before = pooled();
        tx.send(frame("+OK\r\n"));
        drop(rx);
        assert_eq!(pooled(), before + 1, "the finished slot is parked");
        let (tx, rx) = channel();
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
        let (tx, rx) = channel();
        let before = pooled();
        drop(rx);
        assert_eq!(pooled(), before, "the sender still holds it");
        tx.send(frame("+late\r\n"));
        assert_eq!(
            pooled(),
            before + 1,
            "the sender was last, so it parks the slot"
        );
        let (tx, rx) = channel();
        drop(tx);
        assert_eq!(pooled(), before, "the receiver still holds it");
        drop(rx);
        assert_eq!(pooled(), before + 1);
    }

    #[test]
    fn a_full_pool_spills_to_the_shared_one_and_refills_from_it() {
        // This thread frees many more slots than it takes (as a node connection's thread does):
        // its pool stays at most LOCAL_MAX, the surplus moves over in batches.
        let ends: Vec<_> = (0..LOCAL_MAX + BATCH).map(|_| channel()).collect();
        for (tx, rx) in ends {
            drop(rx);
            tx.send(frame("+OK\r\n"));
        }
        assert!(pooled() <= LOCAL_MAX, "the surplus went to the shared pool");
        // The batch moves themselves, on a shared pool of this test's own: the process-wide one
        // is also used by the tests running alongside.
        let shared = Mutex::new(Slots::new());
        let mut full: Slots = (0..=LOCAL_MAX).map(|_| Arc::default()).collect();
        spill(&mut full, &shared);
        assert_eq!(full.len(), LOCAL_MAX + 1 - BATCH);
        assert_eq!(lock_pool(&shared).len(), BATCH);
        // Another thread with an empty pool takes a batch instead of allocating.
        let mut empty = Slots::new();
        refill(&mut empty, &shared);
        assert_eq!(empty.len(), BATCH, "a batch came over");
        assert!(lock_pool(&shared).is_empty());
        // A full shared pool frees the surplus instead of growing.
        let brim = Mutex::new((0..SHARED_MAX).map(|_| Arc::default()).collect::<Slots>());
        let mut over: Slots = (0..=LOCAL_MAX).map(|_| Arc::default()).collect();
        spill(&mut over, &brim);
        assert_eq!(over.len(), LOCAL_MAX + 1 - BATCH, "the batch was freed");
        assert_eq!(lock_pool(&brim).len(), SHARED_MAX);
    }
}
