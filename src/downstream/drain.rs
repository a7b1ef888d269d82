//! Tells every client session that the proxy is draining, for one plain load per session turn.
//!
//! Sessions used to wait on a clone of the shutdown `watch` channel in every turn of their loop.
//! Each such wait builds a `Notified` on the channel's one `Notify`, which takes that `Notify`'s
//! mutex to register and again to unregister: four lock operations per turn on one cache line
//! shared by every session on every worker (2–3% of redcar's CPU per command at `-P 1`,
//! bench/README.md). Here a session registers its task's waker once (again only if the waker
//! changes) and then only reads a flag; starting the drain sets the flag and wakes every
//! registered session.

use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// Shared by every session: whether the proxy drains, and who to wake when it starts.
#[derive(Default)]
pub(crate) struct Drain {
    /// Set once, at shutdown or an upgrade; never cleared.
    draining: AtomicBool,
    /// Wakers of the sessions that waited, by client id; touched when a session first waits
    /// (or its waker changes), when it ends, and once when the drain starts.
    waiting: Mutex<HashMap<u64, Waker>>,
}

impl Drain {
    /// Starts the drain: every session, waiting now or later, sees it.
    pub(crate) fn start(&self) {
        self.draining.store(true, Ordering::SeqCst);
        let waiting = std::mem::take(&mut *self.lock());
        for waker in waiting.into_values() {
            waker.wake();
        }
    }

    /// True once [`start`](Self::start) ran.
    fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// The signal for client `id` (one per session: ids are unique).
    pub(crate) fn signal(&self, id: u64) -> DrainSignal<'_> {
        DrainSignal {
            drain: self,
            id,
            registered: None,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Waker>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One session's view of the drain; dropping it unregisters the session.
pub(crate) struct DrainSignal<'d> {
    /// The process's drain.
    drain: &'d Drain,
    /// The session's registration, to unregister on drop.
    id: u64,
    /// The waker the drain holds for us, kept to notice when the task's waker changes.
    registered: Option<Waker>,
}

impl DrainSignal<'_> {
    /// Resolves once the drain has started.
    pub(crate) async fn started(&mut self) {
        poll_fn(|cx| self.poll_started(cx)).await
    }

    /// Ready once the drain has started; otherwise makes sure the drain will wake this task.
    pub(crate) fn poll_started(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.drain.is_draining() {
            return Poll::Ready(());
        }
        let current = self
            .registered
            .as_ref()
            .is_some_and(|waker| waker.will_wake(cx.waker()));
        if !current {
            let waker = cx.waker().clone();
            self.drain.lock().insert(self.id, waker.clone());
            self.registered = Some(waker);
            // The drain may have started (and woken who it knew) since the check above: the
            // lock orders this load after its store.
            if self.drain.is_draining() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}

impl Drop for DrainSignal<'_> {
    fn drop(&mut self) {
        if self.registered.is_some() {
            self.drain.lock().remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;
    use std::time::Duration;

    /// A waker that stays equal to its clones (`Waker::noop()`'s clones need not).
    struct Quiet;

    impl Wake for Quiet {
        fn wake(self: Arc<Self>) {}
    }

    fn quiet() -> Waker {
        Waker::from(Arc::new(Quiet))
    }

    #[tokio::test]
    async fn a_waiting_session_is_woken_when_the_drain_starts() {
        let drain = Arc::new(Drain::default());
        let waiter = tokio::spawn({
            let drain = drain.clone();
            async move { drain.signal(1).started().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "resolved before the drain started");
        assert_eq!(drain.lock().len(), 1, "the waiting session registered once");
        drain.start();
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("woken by the drain")
            .expect("task");
        assert!(drain.lock().is_empty(), "nothing left registered");
    }

    #[tokio::test]
    async fn a_session_that_waits_after_the_start_sees_it_at_once() {
        let drain = Drain::default();
        drain.start();
        let mut signal = drain.signal(7);
        tokio::time::timeout(Duration::from_millis(100), signal.started())
            .await
            .expect("ready at once");
        drop(signal);
        assert!(drain.lock().is_empty(), "a ready signal never registers");
    }

    #[test]
    fn polling_again_with_the_same_waker_does_not_register_again() {
        let drain = Drain::default();
        let mut signal = drain.signal(3);
        let waker = quiet();
        let mut cx = Context::from_waker(&waker);
        assert!(signal.poll_started(&mut cx).is_pending());
        // A dropped registration would be re-made by the next poll: remove it and check it is
        // not, which shows the second poll did not touch the map.
        drain.lock().clear();
        assert!(signal.poll_started(&mut cx).is_pending());
        assert!(drain.lock().is_empty(), "second poll took the lock");
        drain.start();
        assert!(signal.poll_started(&mut cx).is_ready());
    }

    #[test]
    fn an_ended_session_unregisters() {
        let drain = Drain::default();
        let waker = quiet();
        let mut cx = Context::from_waker(&waker);
        let mut one = drain.signal(1);
        let mut two = drain.signal(2);
        assert!(one.poll_started(&mut cx).is_pending());
        assert!(two.poll_started(&mut cx).is_pending());
        drop(one);
        let left: Vec<u64> = drain.lock().keys().copied().collect();
        assert_eq!(left, [2]);
    }
}
