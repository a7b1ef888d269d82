//! Whether a node serves nothing right now — a replica while no read policy reads replicas, such
//! as a primary demoted by a failover — so its pooled connections close once idle for
//! [`STANDBY_IDLE`] instead of `upstream.idle_timeout`.
//!
//! Set from each adopted slot map (`Node::serve_as`). A node on standby still takes commands (a
//! topology query, a redirect, node administration): a connection opens for them as usual and
//! closes again shortly after.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use tokio::time::{Instant, Sleep};

/// How long a connection of a node on standby stays open without a command.
pub(crate) const STANDBY_IDLE: Duration = Duration::from_secs(1);

/// An idle timer that is not meant to fire (`upstream.idle_timeout: 0s`, not on standby).
const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// One node's standby flag, shared by its connections.
#[derive(Debug, Default)]
pub(super) struct Standby {
    /// Set while the node serves nothing (a replica no read policy reads, a demoted primary).
    on: AtomicBool,
    /// One per open connection ([`IdleTimer`]): woken when the flag changes so an idle
    /// connection re-arms its timer. Each connection has its own, so waiting on it touches no
    /// shared lock.
    pokes: Mutex<Vec<Weak<AtomicWaker>>>,
}

impl Standby {
    /// Puts the node on standby (`true`) or back in service.
    pub(crate) fn set(&self, on: bool) {
        if self.on.swap(on, Ordering::Relaxed) == on {
            return;
        }
        let mut pokes = self.pokes.lock().unwrap_or_else(|e| e.into_inner());
        pokes.retain(|poke| match poke.upgrade() {
            Some(poke) => {
                // A connection not waiting right now reads the flag when it next waits.
                poke.wake();
                true
            }
            None => false,
        });
    }

    /// Read by each connection when it waits idle; a relaxed load, since a stale answer only delays
    /// a close by one wait.
    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// How long a connection may stay idle: `idle_timeout` (none when 0: never closed), or on
    /// standby at most [`STANDBY_IDLE`], whatever `idle_timeout` says.
    pub(crate) fn idle_limit(&self, idle_timeout: Duration) -> Option<Duration> {
        match (self.is_on(), idle_timeout.is_zero()) {
            (true, true) => Some(STANDBY_IDLE),
            (true, false) => Some(idle_timeout.min(STANDBY_IDLE)),
            (false, true) => None,
            (false, false) => Some(idle_timeout),
        }
    }

    /// A poke for a new connection, registered until the connection drops it.
    fn register(&self) -> Arc<AtomicWaker> {
        let poke = Arc::new(AtomicWaker::new());
        let mut pokes = self.pokes.lock().unwrap_or_else(|e| e.into_inner());
        pokes.retain(|p| p.strong_count() > 0);
        pokes.push(Arc::downgrade(&poke));
        poke
    }
}

/// One connection's idle timer. Re-armed only when it fires or the standby flag changes, not on
/// every batch (no timer work per command).
///
/// A connection waits on it each time it has nothing in flight: at `-P 1`, after nearly every
/// read. So a wait registers the task's waker with the standby flag (one atomic operation) and
/// polls the `Sleep` only when it was re-armed or has fired: waiting on a `Notify` and polling
/// the `Sleep` every time was a visible share of a one-at-a-time command's cost (bench/README.md).
pub(super) struct IdleTimer {
    sleep: Pin<Box<Sleep>>,
    deadline: Instant,
    /// The `Sleep` was polled since it was last armed and holds this task's waker.
    waiting: bool,
    timeout: Duration,
    standby: Arc<Standby>,
    poke: Arc<AtomicWaker>,
}

impl IdleTimer {
    /// `timeout` is `upstream.idle_timeout`.
    pub(crate) fn new(standby: &Arc<Standby>, timeout: Duration) -> IdleTimer {
        let deadline = Instant::now() + standby.idle_limit(timeout).unwrap_or(NEVER);
        IdleTimer {
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            deadline,
            waiting: false,
            timeout,
            standby: standby.clone(),
            poke: standby.register(),
        }
    }

    /// Resolves once the connection, last used at `last_used`, has been idle past its limit.
    /// Cancel-safe: the connection polls a new one in each turn it has nothing in flight.
    pub(crate) async fn expired(&mut self, last_used: Instant) {
        poll_fn(|cx| self.poll_expired(last_used, cx)).await
    }

    fn poll_expired(&mut self, last_used: Instant, cx: &mut Context<'_>) -> Poll<()> {
        // Registered before the flag is read: a change after the read wakes this task.
        self.poke.register(cx.waker());
        loop {
            let limit = self.standby.idle_limit(self.timeout).unwrap_or(NEVER);
            let due = last_used + limit;
            if due < self.deadline {
                // The limit shrank (the node went on standby).
                self.rearm(due);
            }
            if self.waiting && !self.sleep.is_elapsed() {
                return Poll::Pending;
            }
            self.waiting = true;
            match self.sleep.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) if last_used.elapsed() >= limit => return Poll::Ready(()),
                Poll::Ready(()) => self.rearm(due),
            }
        }
    }

    fn rearm(&mut self, deadline: Instant) {
        self.deadline = deadline;
        self.waiting = false;
        self.sleep.as_mut().reset(deadline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standby_shortens_the_idle_limit_and_closes_even_never_closing_connections() {
        let standby = Standby::default();
        let five_min = Duration::from_secs(300);
        assert_eq!(standby.idle_limit(five_min), Some(five_min));
        assert_eq!(standby.idle_limit(Duration::ZERO), None);
        standby.set(true);
        assert_eq!(standby.idle_limit(five_min), Some(STANDBY_IDLE));
        assert_eq!(standby.idle_limit(Duration::ZERO), Some(STANDBY_IDLE));
        let short = Duration::from_millis(200);
        assert_eq!(standby.idle_limit(short), Some(short));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_closes_a_second_after_its_node_goes_on_standby() {
        let standby = Arc::new(Standby::default());
        let mut timer = IdleTimer::new(&standby, Duration::from_secs(300));
        let last_used = Instant::now();
        let waited = tokio::time::timeout(Duration::from_secs(10), timer.expired(last_used)).await;
        assert!(waited.is_err(), "in service: 300 s");
        // Going on standby while the connection is not waiting leaves a permit.
        standby.set(true);
        let started = Instant::now();
        timer.expired(last_used).await;
        assert!(
            started.elapsed() < Duration::from_millis(10),
            "long idle already"
        );
        // A fresh connection on standby lasts one second idle; back in service, 300 s again.
        let mut timer = IdleTimer::new(&standby, Duration::from_secs(300));
        let used = Instant::now();
        timer.expired(used).await;
        assert_eq!(used.elapsed(), STANDBY_IDLE);
        standby.set(false);
        let mut timer = IdleTimer::new(&standby, Duration::from_secs(300));
        let used = Instant::now();
        timer.expired(used).await;
        assert_eq!(used.elapsed(), Duration::from_secs(300));
    }
}
