//! A one-shot channel for one reply whose slots are reused, so awaiting a reply allocates
//! nothing in the steady state.
//!
//! Client sessions' own commands use their inbox instead ([`inbox`](crate::inbox): cheaper per
//! command); these slots serve everything that awaits a reply as a future (fan-outs, splits,
//! retries).
//!
//! `tokio::sync::oneshot` allocates its shared cell for every channel: one `malloc`/`free` pair
//! per forwarded command. Here the cell is an `Arc<Slot>`; whichever end finishes last resets it
//! and parks it in a per-thread pool, and the next [`channel`] on that thread takes it back. A
//! session may run on one worker thread and a node connection on another, so a thread can end up
//! freeing more slots than it takes: pools hand surplus slots in batches to one shared pool, and
//! an empty pool refills from it.
//!
//! Rust has no generic statics, so each reply type gets its pools from a [`Pool`] that
//! [`reply_pool!`](crate::reply_pool) declares.
//!
//! What holds: each slot is parked exactly once per use, by the second end to finish, and only
//! after the first one last touched it; a parked slot is empty (no value, not closed, no waker).

use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::sync::atomic::{AtomicU8, Ordering};
use crate::sync::{Arc, Mutex, MutexGuard};

/// Slots one thread keeps; above this, a batch goes to the shared pool.
pub const LOCAL_MAX: usize = 256;
/// Slots moved between a thread's pool and the shared one at a time (one lock per batch).
pub const BATCH: usize = 64;
/// Slots the shared pool keeps; beyond this they are freed (after a burst, memory comes back).
pub const SHARED_MAX: usize = 8192;

/// Parked slots of one reply type `T`.
pub type Slots<T> = Vec<Arc<Slot<T>>>;

/// Where the slots of one reply type are parked: a per-thread pool and a process-wide one.
/// Declared with [`reply_pool!`](crate::reply_pool), which writes the two statics.
pub trait Pool: 'static {
    /// What one channel carries.
    type Value: Send + 'static;
    /// Runs `f` on this thread's pool.
    fn local<R>(f: impl FnOnce(&RefCell<Slots<Self::Value>>) -> R) -> R;
    /// The pool every thread spills surplus slots to and refills from.
    fn shared() -> &'static Mutex<Slots<Self::Value>>;
}

/// Declares `$name`, the [`Pool`] of the reply slots that carry
/// `$value`: `redcar_sync::reply_pool!(pub(crate) Replies, Result<Bytes, MyError>);` and then
/// `reply_slot::channel::<Replies>()`.
#[cfg(not(loom))]
#[macro_export]
macro_rules! reply_pool {
    ($(#[$meta:meta])* $vis:vis $name:ident, $value:ty) => {
        $(#[$meta])*
        $vis struct $name;

        impl $crate::reply_slot::Pool for $name {
            type Value = $value;

            #[inline]
            fn local<R>(
                f: impl FnOnce(&::std::cell::RefCell<$crate::reply_slot::Slots<$value>>) -> R,
            ) -> R {
                ::std::thread_local! {
                    static POOL: ::std::cell::RefCell<$crate::reply_slot::Slots<$value>> =
                        const { ::std::cell::RefCell::new(::std::vec::Vec::new()) };
                }
                POOL.with(f)
            }

            #[inline]
            fn shared() -> &'static $crate::sync::Mutex<$crate::reply_slot::Slots<$value>> {
                static SHARED: $crate::sync::Mutex<$crate::reply_slot::Slots<$value>> =
                    $crate::sync::Mutex::new(::std::vec::Vec::new());
                &SHARED
            }
        }
    };
}

/// Declares `$name`, the [`Pool`] of the reply slots that carry
/// `$value` (loom's statics, which live for one explored execution).
#[cfg(loom)]
#[macro_export]
macro_rules! reply_pool {
    ($(#[$meta:meta])* $vis:vis $name:ident, $value:ty) => {
        $(#[$meta])*
        $vis struct $name;

        impl $crate::reply_slot::Pool for $name {
            type Value = $value;

            fn local<R>(
                f: impl FnOnce(&::std::cell::RefCell<$crate::reply_slot::Slots<$value>>) -> R,
            ) -> R {
                $crate::sync::thread_local! {
                    static POOL: ::std::cell::RefCell<$crate::reply_slot::Slots<$value>> =
                        ::std::cell::RefCell::new(::std::vec::Vec::new());
                }
                POOL.with(f)
            }

            fn shared() -> &'static $crate::sync::Mutex<$crate::reply_slot::Slots<$value>> {
                $crate::sync::lazy_static! {
                    static ref SHARED: $crate::sync::Mutex<$crate::reply_slot::Slots<$value>> =
                        $crate::sync::Mutex::new(::std::vec::Vec::new());
                }
                &SHARED
            }
        }
    };
}

/// The shared pool's lock; a poisoned lock is used anyway, since nothing panics while holding it
/// and a list of reset slots cannot be left torn.
fn lock_pool<T>(shared: &Mutex<Slots<T>>) -> MutexGuard<'_, Slots<T>> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// Moves up to a batch of slots from `shared` into `pool` (one lock).
fn refill<T>(pool: &mut Slots<T>, shared: &Mutex<Slots<T>>) {
    let mut shared = lock_pool(shared);
    let from = shared.len().saturating_sub(BATCH);
    pool.extend(shared.drain(from..));
}

/// Moves a batch of slots from an over-full `pool` to `shared`, or frees them when `shared` is
/// full (after a burst, memory comes back).
fn spill<T>(pool: &mut Slots<T>, shared: &Mutex<Slots<T>>) {
    let from = pool.len().saturating_sub(BATCH);
    let mut shared = lock_pool(shared);
    if shared.len() < SHARED_MAX {
        shared.extend(pool.drain(from..));
    } else {
        pool.truncate(from);
    }
}

/// A reset slot from this thread's pool, refilled from the shared pool when empty.
fn take<P: Pool>() -> Arc<Slot<P::Value>> {
    let pooled = P::local(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.is_empty() {
            refill(&mut pool, P::shared());
        }
        pool.pop()
    });
    pooled.unwrap_or_else(|| Arc::new(Slot::new()))
}

/// Called by each end once it is done with the slot: the second to finish resets it and parks
/// it for reuse. Counting finished ends (rather than `Arc` holders) matters because the other end
/// may still hold its `Arc` for a moment after it finished; it never touches the slot again.
fn release<P: Pool>(slot: Arc<Slot<P::Value>>) {
    if slot.finished.fetch_add(1, Ordering::AcqRel) == 0 {
        return;
    }
    *slot.lock() = State::default();
    slot.finished.store(0, Ordering::Release);
    P::local(|pool| {
        let mut pool = pool.borrow_mut();
        pool.push(slot);
        if pool.len() > LOCAL_MAX {
            spill(&mut pool, P::shared());
        }
    });
}

/// The cell one channel's two ends share; reused by later channels once both are done.
pub struct Slot<T> {
    /// The value, the closed mark and the receiver's waker, under one lock taken once by each end.
    state: Mutex<State<T>>,
    /// Ends (sender, receiver) done with this use of the slot.
    finished: AtomicU8,
}

/// One use of a slot: empty when parked, filled by the sender, emptied by the receiver.
struct State<T> {
    /// The reply, between `send` and the receiver's poll.
    value: Option<T>,
    /// The sender went away without sending.
    closed: bool,
    /// The receiver, parked until the value or the close arrives.
    waker: Option<Waker>,
}

impl<T> Default for State<T> {
    fn default() -> Self {
        State {
            value: None,
            closed: false,
            waker: None,
        }
    }
}

impl<T> Slot<T> {
    /// A fresh slot, for when the pools are empty (at start-up or after a burst).
    fn new() -> Self {
        Slot {
            state: Mutex::new(State::default()),
            finished: AtomicU8::new(0),
        }
    }

    /// Never poisoned in practice (nothing panics while holding it); if it were, the state is
    /// still consistent, so carry on.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The replying end: delivers one reply.
pub struct ReplySender<P: Pool> {
    /// `None` once sent; the drop then does nothing, otherwise it closes the channel.
    slot: Option<Arc<Slot<P::Value>>>,
    /// Ties the end to its pool type without holding a `P` (and keeps the end `Send` whatever `P`
    /// is).
    pool: PhantomData<fn() -> P>,
}

/// The waiting end: resolves to the reply, or to `Err(Closed)` if the sender was dropped
/// without one (its connection task ended).
pub struct ReplyReceiver<P: Pool> {
    /// `None` only inside `drop`, once the slot went back to the pool.
    slot: Option<Arc<Slot<P::Value>>>,
    /// As in the sender.
    pool: PhantomData<fn() -> P>,
}

/// The sender was dropped without sending.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// A new channel, on a recycled slot when this thread has one.
pub fn channel<P: Pool>() -> (ReplySender<P>, ReplyReceiver<P>) {
    let slot = take::<P>();
    (
        ReplySender {
            slot: Some(slot.clone()),
            pool: PhantomData,
        },
        ReplyReceiver {
            slot: Some(slot),
            pool: PhantomData,
        },
    )
}

/// Slots parked in this thread's pool of `P` (for tests and leak checks).
pub fn parked<P: Pool>() -> usize {
    P::local(|pool| pool.borrow().len())
}

impl<P: Pool> ReplySender<P> {
    /// Hands over the reply and wakes the receiver. If the receiver is gone the reply is simply
    /// dropped (the caller gave up at its deadline).
    pub fn send(mut self, value: P::Value) {
        if let Some(slot) = self.slot.take() {
            let waker = {
                let mut state = slot.lock();
                state.value = Some(value);
                state.waker.take()
            };
            release::<P>(slot);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

impl<P: Pool> Drop for ReplySender<P> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            let waker = {
                let mut state = slot.lock();
                state.closed = true;
                state.waker.take()
            };
            release::<P>(slot);
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

impl<P: Pool> Future for ReplyReceiver<P> {
    type Output = Result<P::Value, Closed>;

    /// Registers `cx`'s waker (replacing a stale one) when neither the value nor the close is
    /// there; a value that arrives is taken out, so it is delivered once.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(slot) = &self.slot else {
            return Poll::Ready(Err(Closed));
        };
        let mut state = slot.lock();
        if let Some(value) = state.value.take() {
            return Poll::Ready(Ok(value));
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

impl<P: Pool> Drop for ReplyReceiver<P> {
    /// Gives the slot back; if the sender has not finished yet, the sender parks it later.
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            release::<P>(slot);
        }
    }
}

#[cfg(all(test, not(loom)))]
#[path = "reply_slot_tests.rs"]
mod tests;
