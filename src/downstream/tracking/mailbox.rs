//! A session's mailbox: the invalidations waiting for it, and the waker of its task.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};

use futures_util::task::AtomicWaker;

use super::{lock, TrackingEvent};

/// Invalidations waiting for one session beyond which they are replaced by one flush.
pub(super) const MAILBOX_MAX: usize = 1024;

/// Invalidations waiting for a session, and the waker of its task.
#[derive(Default)]
pub(in crate::downstream) struct Mailbox {
    /// Something is in `events`: lets the session check without the lock.
    ready: AtomicBool,
    /// Invalidations not yet written, oldest first; bounded, overflowing into one flush.
    events: Mutex<Vec<TrackingEvent>>,
    /// The session's task, woken when something arrives.
    waker: AtomicWaker,
}

// === impl Mailbox ===

impl Mailbox {
    /// Queues `event`; false when the mailbox overflowed and was replaced by one flush.
    pub(super) fn post(&self, event: TrackingEvent) -> bool {
        let mut events = lock(&self.events);
        let overflow = events.len() >= MAILBOX_MAX;
        if overflow {
            // A client that does not keep up is told to flush everything instead: one event
            // that says as much as all of them, and the mailbox stays small.
            events.clear();
            events.push(TrackingEvent::Flush);
        }
        events.push(event);
        drop(events);
        self.ready.store(true, Ordering::Release);
        self.waker.wake();
        !overflow
    }

    /// Ready once something was posted (registers the task to be woken otherwise).
    pub(super) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.ready.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        self.waker.register(cx.waker());
        if self.ready.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    pub(super) fn take(&self) -> Vec<TrackingEvent> {
        self.ready.store(false, Ordering::Release);
        std::mem::take(&mut *lock(&self.events))
    }
}
