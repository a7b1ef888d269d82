//! The old process's side of an upgrade: while it hands its clients over, each session at its
//! next safe point gives its record and socket to the [`Handover`] sink, or is closed and counted
//! by reason when it cannot move (a TLS session; every client when the two processes share no
//! record version).
//!
//! A subscribed client leaves in two steps (`release.rs`): its record and a copy of its socket
//! go first, and the session keeps forwarding messages until the new process says it is
//! subscribed ([`Handover::subscribed`]), then lets go ([`Handover::released`]).
//!
//! Sessions learn of the handover through the drain signal they already wait on (one flag read
//! per turn, `drain.rs`): [`Handover::start`] sets the sink, then starts the drain, and a session
//! woken by it asks [`Handover::is_active`] (one relaxed load, and only then) whether to move
//! instead of closing.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Mutex;

use tokio::sync::oneshot;

use super::super::metrics::UpgradeClients;
use super::codec::SUBSCRIBERS;
use super::release::Waiters;
use super::HandedOver;

/// What goes to the process taking over, in order.
pub(crate) enum Outgoing {
    /// A record in wire form and its client's socket.
    Client { record: Vec<u8>, socket: OwnedFd },
    /// This process no longer writes to subscribed client `id` (see `release.rs`).
    Released(u64),
}

/// What became of a client at its safe point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    /// Its record and socket are on their way to the new process.
    Moved,
    /// Closed, for this reason (`tls`, `version`, `gone`).
    Closed(&'static str),
}

/// The old process's handover of its clients (one per `Downstream`).
#[derive(Default)]
pub(crate) struct Handover {
    /// Set once an upgrade hands clients over (before the drain starts).
    active: AtomicBool,
    /// The record version both processes read; 0 when they share none.
    version: AtomicU16,
    /// Where records go (the upgrade connection's writer); `None` once it is gone.
    sink: Mutex<Option<Sender<Outgoing>>>,
    /// Subscribed clients handed over, waiting for the new process to be subscribed.
    subscribers: Waiters,
    moved: AtomicU64,
    closed: AtomicU64,
    /// `redcar_upgrade_clients{outcome, reason}`.
    counters: UpgradeClients,
}

impl Handover {
    /// A handover that counts into `counters` (`redcar_upgrade_clients`).
    pub(crate) fn new(counters: UpgradeClients) -> Handover {
        Handover {
            counters,
            ..Handover::default()
        }
    }

    /// Starts handing clients over: records of `version` go to `sink` (version 0: the new
    /// process reads none of ours, so clients are closed at their safe points instead).
    /// The caller starts the drain next, which wakes every session.
    pub(crate) fn start(&self, version: u16, sink: Option<Sender<Outgoing>>) {
        self.version.store(version, Ordering::Relaxed);
        *self.lock_sink() = sink;
        self.active.store(true, Ordering::SeqCst);
    }

    /// Whether an upgrade is handing clients over (asked only where a session would close for
    /// the drain).
    #[inline]
    pub(crate) fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Whether the new process takes subscribed clients with their subscriptions (a record
    /// version that has them); otherwise they are closed at the handover (`subscribed`).
    pub(crate) fn moves_subscribers(&self) -> bool {
        self.version.load(Ordering::Relaxed) >= SUBSCRIBERS
    }

    /// Sends a client's record and socket to the new process.
    pub(crate) fn send(&self, record: &HandedOver, socket: OwnedFd) -> Leaving {
        let version = self.version.load(Ordering::Relaxed);
        if version == 0 {
            return self.closed("version");
        }
        let record = record.encode(version);
        if !self.post(Outgoing::Client { record, socket }) {
            return self.closed("gone");
        }
        self.moved.fetch_add(1, Ordering::Relaxed);
        self.counters.count("moved", "upgrade");
        Leaving::Moved
    }

    /// Sends a subscribed client's record and a copy of its socket: the receiver fires once the
    /// new process is subscribed (or gone), and until then this process goes on forwarding
    /// messages to it. `None` when it could not be sent (the client is closed, counted).
    pub(crate) fn send_subscriber(
        &self,
        record: &HandedOver,
        socket: OwnedFd,
    ) -> Option<oneshot::Receiver<()>> {
        let subscribed = self.subscribers.wait(record.id);
        match self.send(record, socket) {
            Leaving::Moved => Some(subscribed),
            Leaving::Closed(_) => {
                self.subscribers.wake(record.id);
                None
            }
        }
    }

    /// The new process says client `id` is subscribed there.
    pub(crate) fn subscribed(&self, id: u64) {
        if !self.subscribers.wake(id) {
            tracing::debug!(client = id, "upgrade: subscribed, but no longer waited for");
        }
    }

    /// This process wrote its last to subscribed client `id`: the new process may write.
    pub(crate) fn released(&self, id: u64) {
        if !self.post(Outgoing::Released(id)) {
            tracing::debug!(
                client = id,
                "upgrade: the new process is gone; not released"
            );
        }
    }

    fn post(&self, outgoing: Outgoing) -> bool {
        self.lock_sink()
            .as_ref()
            .is_some_and(|sink| sink.send(outgoing).is_ok())
    }

    /// Counts a client closed at its safe point because it cannot move.
    pub(crate) fn closed(&self, reason: &'static str) -> Leaving {
        self.closed.fetch_add(1, Ordering::Relaxed);
        self.counters.count("closed", reason);
        tracing::debug!(reason, "upgrade: client closed at a safe point");
        Leaving::Closed(reason)
    }

    /// No more records: the writer finishes with what it has and tells the new process.
    /// Subscribers still waiting for the new process go on without it.
    pub(crate) fn finish(&self) {
        self.lock_sink().take();
        self.subscribers.abandon();
    }

    /// Clients moved and closed so far.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.moved.load(Ordering::Relaxed),
            self.closed.load(Ordering::Relaxed),
        )
    }

    fn lock_sink(&self) -> std::sync::MutexGuard<'_, Option<Sender<Outgoing>>> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner())
    }
}
