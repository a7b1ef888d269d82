//! A subscribed client crosses in two steps, so that the new process is subscribed before the
//! old one lets go and no message falls between them (docs/operations.md, "Subscribed
//! clients"):
//!
//! ```text
//! old: Client(record with subscriptions, a copy of the socket)  → new: subscribes again,
//!      keeps forwarding messages                                        writes nothing yet
//! old: ← Subscribed(id)                                           new: every confirmation in
//! old: forwards a little longer, writes what it holds,
//!      Released(id) →                                             new: writes from here on
//! ```
//!
//! Both processes hold the socket meanwhile, but only one writes to it at a time and neither
//! reads it until the new one is released. [`Waiters`] is the one-shot wake-up per client that
//! each side waits on; [`Arrivals`] is the new process's side (the old one's is in `leave.rs`).

use std::collections::HashMap;
use std::sync::mpsc::Sender;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;

/// One-shot wake-ups by client id. A waiter whose sender is dropped (the upgrade connection
/// ended, or the other process gave up) is woken too, with an error: it goes on as if woken,
/// since nobody else will write to the client.
#[derive(Default)]
pub(crate) struct Waiters(Mutex<HashMap<u64, oneshot::Sender<()>>>);

impl Waiters {
    /// Client `id` waits: the receiver fires on [`Waiters::wake`].
    pub(crate) fn wait(&self, id: u64) -> oneshot::Receiver<()> {
        let (wake, woken) = oneshot::channel();
        self.lock().insert(id, wake);
        woken
    }

    /// Wakes client `id`; false when nobody waited for it.
    pub(crate) fn wake(&self, id: u64) -> bool {
        self.lock()
            .remove(&id)
            .is_some_and(|wake| wake.send(()).is_ok())
    }

    /// Wakes every waiter (with an error): the other side is gone.
    pub(crate) fn abandon(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, oneshot::Sender<()>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The new process's side: held subscribers waiting for the old process to let go, and where
/// their "subscribed" goes (the upgrade connection's writer, `app::upgrade`).
#[derive(Default)]
pub(crate) struct Arrivals {
    released: Waiters,
    subscribed: Mutex<Option<Sender<u64>>>,
}

impl Arrivals {
    /// Clients arrive from an old process; each "subscribed" is sent on `tell`.
    pub(crate) fn start(&self, tell: Sender<u64>) {
        *self.lock_tell() = Some(tell);
    }

    /// A subscribed client arrived: it writes nothing until the receiver fires.
    pub(crate) fn hold(&self, id: u64) -> oneshot::Receiver<()> {
        self.released.wait(id)
    }

    /// Client `id` is subscribed again here: the old process may let go.
    pub(crate) fn subscribed(&self, id: u64) {
        let told = self
            .lock_tell()
            .as_ref()
            .is_some_and(|t| t.send(id).is_ok());
        if !told {
            // The old process is gone: nobody else writes to the client any more.
            self.released.wake(id);
        }
    }

    /// The old process let go of client `id`.
    pub(crate) fn released(&self, id: u64) {
        if !self.released.wake(id) {
            tracing::debug!(client = id, "upgrade: released a client no longer held");
        }
    }

    /// The old process is done (or gone): every held client goes on.
    pub(crate) fn finish(&self) {
        self.lock_tell().take();
        self.released.abandon();
    }

    fn lock_tell(&self) -> MutexGuard<'_, Option<Sender<u64>>> {
        self.subscribed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_held_client_goes_on_when_released_or_when_the_old_process_is_gone() {
        let arrivals = Arrivals::default();
        let (tell, told) = std::sync::mpsc::channel();
        arrivals.start(tell);
        let first = arrivals.hold(1);
        let mut second = arrivals.hold(2);
        arrivals.subscribed(1);
        assert_eq!(told.try_recv(), Ok(1), "the old process is told");
        arrivals.released(1);
        assert_eq!(first.await, Ok(()));
        assert!(second.try_recv().is_err(), "still held");
        arrivals.finish();
        assert!(second.await.is_err(), "woken: nobody else writes to it");
    }

    #[tokio::test]
    async fn a_subscribed_client_is_released_at_once_when_the_old_process_cannot_be_told() {
        let arrivals = Arrivals::default();
        let held = arrivals.hold(7);
        arrivals.subscribed(7); // never started: no old process to tell
        assert_eq!(held.await, Ok(()));
    }
}
