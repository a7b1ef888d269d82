//! A loop's part in an upgrade in place (`downstream::handover`, docs/operations.md): when the
//! drain starts while an upgrade hands clients over, each client stops reading once no
//! transaction or WATCH needs its next commands, and at its safe point (nothing owed or buffered
//! to write) leaves for the new process with its record, its socket and any half-read request,
//! as a session does (session/leaving.rs).

use std::os::fd::OwnedFd;

use super::super::handover::{HandedOver, Leaving};
use super::super::movable::Detached;
use super::client::LoopClient;
use super::tokens;
use super::Loop;

impl LoopClient<'_> {
    /// While handing over, no more requests are read once no transaction or WATCH needs the
    /// client's next commands: what it sends waits in the socket for the new process.
    #[inline]
    pub(super) fn stops_reading_for_upgrade(&self) -> bool {
        self.flags.due.leaving && !self.state.tx.is_open() && self.state.tx.watched_slot().is_none()
    }

    /// Whether it may leave for the new process now.
    fn may_hand_over(&self) -> bool {
        self.flags.due.leaving
            && !self.flags.closing
            && self.link.out.is_empty()
            && self.replies.is_empty()
            && self.parked.is_none()
            && !self.state.tx.is_open()
            && self.state.tx.watched_slot().is_none()
            && !self.state.quit
    }
}

impl Loop<'_> {
    /// The drain started during an upgrade: every client leaves at its safe point.
    pub(super) fn hand_over_all(&mut self) {
        for (_, client) in self.clients.iter_mut() {
            client.flags.due.leaving = true;
            client.want_run(&mut self.work);
        }
    }

    /// After client `token`'s turn or writes, while draining: it leaves for the new process if
    /// it may.
    pub(super) fn leave_if_upgrading(&mut self, token: u64) {
        let Some(client) = super::client_in(&mut self.clients, token) else {
            return;
        };
        if !client.may_hand_over() {
            return;
        }
        let mut client = self.clients.remove(tokens::key(token));
        client.link.socket.deregister(self.poll.registry());
        let handover = &self.work.d.exits.handover;
        let now = self.work.now;
        let (listener, socket): (&str, OwnedFd) = match client.link.socket.detach() {
            Detached::Tcp(s) => ("tcp", s.into()),
            Detached::Unix(s) => ("unix", s.into()),
        };
        let times = (
            now.saturating_duration_since(client.times.connected_at),
            now.saturating_duration_since(client.times.last_activity),
        );
        let peer = &client.link.peer;
        let record = HandedOver::from_parts(
            &client.state,
            client.settings.facade.as_deref(),
            &client.link.input,
            peer,
            listener,
            times,
        );
        if let Leaving::Closed(reason) = handover.send(&record, socket) {
            tracing::warn!(
                client = client.state.id,
                reason,
                "upgrade: could not hand the client over; closed"
            );
        }
        if self.clients.is_empty() {
            self.done = None;
        }
    }
}
