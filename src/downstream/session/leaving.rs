//! A session's part in an upgrade in place (`downstream::handover`) in the old process: waiting
//! for the client's safe point and leaving with its record (the new process starts from it in
//! adopted.rs).
//!
//! The safe point for an upgrade is the worker move's (moving.rs) minus two conditions: the
//! input may hold the start of a request (it travels in the record), and a tracking client
//! moves too (the new process turns tracking on again and flushes the client's cache). A
//! session learns of the upgrade from the drain, and then stops reading as soon as no
//! transaction or WATCH is open, so a pipelining client reaches its safe point within one
//! round of replies; the bytes it sends meanwhile wait in the socket for the new process.

use std::os::fd::OwnedFd;

use tokio::io::{AsyncRead, AsyncWrite};

use super::super::handover::{HandedOver, Leaving};
use super::super::movable::{Detached, Movable};
use super::busy::Spell;
use super::Client;

/// What the idle wait does when the drain woke it.
pub(super) enum AtUpgrade {
    /// No upgrade: close as the drain says.
    No,
    /// The client leaves for the new process now.
    Leave,
    /// Not at a safe point (a transaction or WATCH is open): serve on until it is.
    NotYet,
}

// === impl Client ===

impl<S> Client<'_, S> {
    /// Nothing owed and nothing open that ties the client to this process's node connections.
    fn may_hand_over(&self) -> bool {
        self.out.is_empty()
            && !self.state.tx.is_open()
            && self.state.tx.watched_slot().is_none()
            && !self.state.quit
    }

    /// While handing over, no more requests are read once no transaction or WATCH needs the
    /// client's next commands: what it sends waits in the socket for the new process.
    pub(super) fn stops_reading_for_upgrade(&self) -> bool {
        self.handing_over && !self.state.tx.is_open() && self.state.tx.watched_slot().is_none()
    }
}

impl<S> Client<'_, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + Movable,
{
    /// Woken by the drain while idle: whether an upgrade takes the client.
    pub(super) fn at_upgrade(&mut self) -> AtUpgrade {
        if !self.downstream.exits.handover.is_active() {
            return AtUpgrade::No;
        }
        if !S::MOVABLE {
            self.downstream.exits.handover.closed("tls");
            return AtUpgrade::No;
        }
        if self.may_hand_over() {
            return AtUpgrade::Leave;
        }
        self.handing_over = true;
        AtUpgrade::NotYet
    }

    /// Gives the client to the new process: its record and socket go to the handover sink.
    pub(super) fn leave_for_upgrade(self) {
        let Client {
            downstream,
            peer,
            facade,
            stream,
            state,
            input,
            connected_at,
            last_activity,
            ..
        } = self;
        let handover = &downstream.exits.handover;
        let (listener, socket): (&str, OwnedFd) = match stream.into_inner().detach() {
            Some(Detached::Tcp(s)) => ("tcp", s.into()),
            Some(Detached::Unix(s)) => ("unix", s.into()),
            // TLS: rustls cannot carry its session state to another process
            // (docs/operations.md, "What does not move"); the client reconnects to the new one.
            None => {
                handover.closed("tls");
                return;
            }
        };
        let times = (connected_at.elapsed(), last_activity.elapsed());
        let record =
            HandedOver::from_parts(&state, facade.as_deref(), &input, peer, listener, times);
        if let Leaving::Closed(reason) = handover.send(&record, socket) {
            tracing::warn!(
                client = state.id,
                reason,
                "upgrade: could not hand the client over; closed"
            );
        }
    }
}

// === impl Spell ===

impl<S> Spell<'_, '_, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    /// The drain started: close once nothing is owed, or, while an upgrade hands clients over,
    /// wait for the safe point to leave at (a TLS session is closed there, counted: see
    /// [`Client::leave_for_upgrade`]).
    pub(super) fn on_drain(&mut self) {
        if self.c.downstream.exits.handover.is_active() {
            self.c.handing_over = true;
        } else {
            self.reading.closing = true;
        }
    }

    /// At the end of a turn: whether the client leaves for the new process now (a bool read
    /// per turn when no upgrade runs).
    pub(super) fn hands_over_now(&self) -> bool {
        self.c.handing_over
            && self.replies.calls.is_empty()
            && self.parked.is_none()
            && !self.reading.closing
            && self.c.may_hand_over()
    }
}
