//! Accepting on a loop: every loop accepts on the same listening sockets (the kernel wakes each),
//! on its turn as the workers' placement decides (`spread.rs`), and admits each client.
//!
//! What holds: a client is counted against `client.max_connections` before anything else is done
//! for it, and the count is given back on every path that does not admit it, so a refused or failed
//! accept never leaks a place. A refused client gets one error line written without waiting (best
//! effort: the socket is non-blocking and closed right after) so it sees why. Errors of `accept`
//! itself (out of descriptors, say) are logged and retried on the next event or chore, never fatal
//! for the loop.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::client_state::ClientState;
use super::client::{Books, Link, LoopClient, Settings, Times};
use super::listener::LoopListener;
use super::socket::ClientSocket;
use super::tokens::{self, TokenKind};
use super::Loop;

impl<'d> Loop<'d> {
    /// Listener `index` has clients waiting: admits them while it is this worker's turn.
    pub(super) fn accept(&mut self, index: usize) {
        loop {
            if self.draining || !self.may_accept() {
                return;
            }
            let Some(listener) = self.listeners.get(index) else {
                return;
            };
            match listener.accept() {
                Ok((socket, peer)) => self.admit(index, socket, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => {
                    // Out of descriptors and similar: the next event or chore tries again.
                    tracing::warn!(%error, "accept failed");
                    return;
                }
            }
        }
    }

    /// The loop's copies of the listening sockets arrived: it accepts on them from now on
    /// (unless it is draining already).
    pub(super) fn listen(&mut self, listeners: Vec<LoopListener>) {
        if self.draining {
            return;
        }
        for mut listener in listeners {
            let token = tokens::token(TokenKind::Listener, 0, self.listeners.len());
            if let Err(error) = listener.register(self.poll.registry(), token) {
                tracing::error!(%error, worker = self.work.index, "event loop cannot accept on a listener");
                continue;
            }
            self.listeners.push(listener);
        }
        self.retry_accept();
    }

    /// Whether this worker takes new clients now (see `spread.rs`).
    fn may_accept(&self) -> bool {
        self.work
            .d
            .spread()
            .is_none_or(|spread| spread.may_accept(self.work.index))
    }

    /// Now and then: a client another loop left waiting (its turn had passed) is taken here.
    pub(super) fn retry_accept(&mut self) {
        for index in 0..self.listeners.len() {
            self.accept(index);
        }
    }

    /// Stops accepting (the drain): the listening sockets leave this loop.
    pub(super) fn stop_listening(&mut self) {
        for listener in &mut self.listeners {
            listener.deregister(self.poll.registry());
        }
        self.listeners.clear();
    }

    /// A new client from listener `index`.
    ///
    /// The checks, in order: `client.max_connections` (process-wide), the loop still holding its
    /// drain token (a draining loop admits nobody), registration with the poll, and
    /// `auth.max_unauthenticated_per_address` for the peer. The token carries a per-loop admission
    /// counter next to the slab key, so an event for a client that left cannot be mistaken for the
    /// next client in the same slot.
    fn admit(&mut self, index: usize, mut socket: ClientSocket, peer: Arc<str>) {
        let d = self.work.d;
        let Some(listener) = self.listeners.get(index) else {
            return;
        };
        let max = d.config.load().max_connections;
        if d.crowd.connected.fetch_add(1, Ordering::SeqCst) >= max {
            d.crowd.connected.fetch_sub(1, Ordering::SeqCst);
            d.client_metrics.refused.inc();
            tracing::warn!(%peer, max, "client refused: client.max_connections reached");
            let reply = b"-ERR redcar: max number of clients reached (client.max_connections)\r\n";
            let _ = io::Write::write(&mut socket, reply);
            return;
        }
        let Some(done) = self.done.as_ref() else {
            d.crowd.connected.fetch_sub(1, Ordering::SeqCst);
            return;
        };
        let connected = (self.home).connect(peer.clone(), listener.label(), &listener.gauges, done);
        let facade = listener.facade.as_ref().and_then(|facade| {
            let endpoint = facade.endpoint(socket.local_addr()).map(Box::new);
            if endpoint.is_none() {
                tracing::warn!(%peer, "cluster facade: the client's local address is unknown; serving it without the facade");
            }
            endpoint
        });
        self.admitted = self.admitted.wrapping_add(1);
        let entry = self.clients.vacant_entry();
        let token = tokens::token(TokenKind::LoopClient, self.admitted, entry.key());
        if let Err(error) = socket.register(self.poll.registry(), token) {
            tracing::warn!(%error, %peer, "cannot register a client with the event loop; closing it");
            return;
        }
        let (settings, users) = Settings::now(&self.work, facade);
        let mut state = ClientState::new(connected.id, users);
        state.cluster_mode = settings.facade.is_some();
        // `auth.max_unauthenticated_per_address`: refused before anything is read.
        if let Err(refusal) = state.connect(&peer) {
            let _ = io::Write::write(&mut socket, &refusal);
            socket.deregister(self.poll.registry());
            return;
        }
        let now = self.work.now;
        let books = Books {
            share: d.crowd.budget.share(connected.id),
            connected,
            pipelining: None,
        };
        let times = Times {
            connected_at: now,
            last_activity: now,
            partial_since: None,
        };
        let link = Link::new(socket, peer);
        let client = LoopClient::new(token, link, books, settings, state, times);
        client.arm_timers(&mut self.work);
        entry.insert(client);
    }
}
