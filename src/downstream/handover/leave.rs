//! The old process's side of an upgrade: while it hands its clients over, each session at its
//! next safe point gives its record and socket to the [`Handover`] sink, or is closed and counted
//! by reason when it cannot move (a TLS session; every client when the two processes share no
//! record version).
//!
//! Sessions learn of the handover through the drain signal they already wait on (one flag read
//! per turn, `drain.rs`): [`Handover::start`] sets the sink, then starts the drain, and a session
//! woken by it asks [`Handover::is_active`] (one relaxed load, and only then) whether to move
//! instead of closing.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Mutex;

use super::super::metrics::UpgradeClients;
use super::HandedOver;

/// A record in wire form and its client's socket, for the process taking over.
pub(crate) struct Outgoing {
    pub(crate) record: Vec<u8>,
    pub(crate) socket: OwnedFd,
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

    /// Sends a client's record and socket to the new process.
    pub(crate) fn send(&self, record: &HandedOver, socket: OwnedFd) -> Leaving {
        let version = self.version.load(Ordering::Relaxed);
        if version == 0 {
            return self.closed("version");
        }
        let outgoing = Outgoing {
            record: record.encode(version),
            socket,
        };
        let sent = self
            .lock_sink()
            .as_ref()
            .is_some_and(|sink| sink.send(outgoing).is_ok());
        if !sent {
            return self.closed("gone");
        }
        self.moved.fetch_add(1, Ordering::Relaxed);
        self.counters.count("moved", "upgrade");
        Leaving::Moved
    }

    /// Counts a client closed at its safe point because it cannot move.
    pub(crate) fn closed(&self, reason: &'static str) -> Leaving {
        self.closed.fetch_add(1, Ordering::Relaxed);
        self.counters.count("closed", reason);
        tracing::debug!(reason, "upgrade: client closed at a safe point");
        Leaving::Closed(reason)
    }

    /// No more records: the writer finishes with what it has and tells the new process.
    pub(crate) fn finish(&self) {
        self.lock_sink().take();
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
