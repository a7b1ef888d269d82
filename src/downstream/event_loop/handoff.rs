//! Clients leaving a loop: closed, or handed to a session of the general kind (subscribe mode and
//! client tracking, which push to the client between replies) at a safe point, with what they
//! sent that the loop did not run.
//!
//! Why a hand-off at all: a loop serves clients whose every reply answers a command, in order.
//! Subscribe mode and client tracking push frames to the client between replies, which a session
//! task is built for, so such a client moves to one on the same worker's runtime. What holds: the
//! hand-off happens only at a safe point (nothing owed to the client), the socket is taken off the
//! loop's poll before the session owns it, and the bytes the loop had read but not run (the parked
//! command first, then the rest of the input) go with it, so no command is lost or run twice.

use bytes::BytesMut;

use super::super::session;
use super::tokens;
use super::Loop;

impl<'d> Loop<'d> {
    /// Client `token` is done: its socket closes (after its side is shut, unless it went first).
    ///
    /// Checks the token, not only the slab key: a stale token (the slot reused by a newer client)
    /// does nothing. When the loop is draining and this was its last client, its hold on the drain
    /// is released.
    pub(super) fn drop_client(&mut self, token: u64) {
        let key = tokens::key(token);
        if self.clients.get(key).is_none_or(|c| c.token != token) {
            return;
        }
        let mut client = self.clients.remove(key);
        client.link.socket.deregister(self.poll.registry());
        if !client.flags.gone {
            client.link.socket.shutdown();
        }
        drop(client);
        if self.draining && self.clients.is_empty() {
            // Every client of this loop is gone: the drain need not wait for it.
            self.done = None;
        }
    }

    /// Client `token` leaves the loop for a session on this worker's runtime, which runs its
    /// parked command first.
    pub(super) fn hand_off(&mut self, token: u64) {
        let key = tokens::key(token);
        if self.clients.get(key).is_none_or(|c| c.token != token) {
            return;
        }
        let mut client = self.clients.remove(key);
        client.link.socket.deregister(self.poll.registry());
        let mut input = BytesMut::new();
        if let Some(parked) = client.parked.take() {
            input.extend_from_slice(parked.raw());
        }
        input.extend_from_slice(&client.link.input);
        tracing::debug!(
            client = client.state.id,
            "client handed to a session task (subscribe mode or client tracking)"
        );
        let moved = session::MovedClient::from_loop(
            client.settings.facade,
            client.state,
            client.settings.generation,
            client.settings.config,
            client.times.last_activity,
            client.times.connected_at,
            client.flags.due.aged,
            input.freeze(),
        );
        let socket = client.link.socket.detach();
        session::adopt(socket, moved, client.books.connected, client.link.peer);
    }
}
