//! Clients moving between the workers' loops (`placement: auto`): a pipelining client, or one of
//! an overflowing worker's share, leaves at a safe point (nothing owed, buffered or open) with
//! what Redis keeps for it, and the other loop serves it from its next read on. The decisions
//! are the sessions' (`moves.rs`); only the carrying is the loop's.

use std::sync::Arc;

use tokio::time::Instant;

use super::super::client_state::ClientState;
use super::super::clients::Connected;
use super::super::facade::Endpoint;
use super::super::movable::Detached;
use super::super::moves::{Moves, Pipelining, PIPELINE_DEPTH, PIPELINE_READS};
use super::client::{Books, Link, LoopClient, Settings, Times};
use super::socket::ClientSocket;
use super::tokens::{self, TokenKind};
use super::work::Work;
use super::Loop;
use crate::reactor::Mail;

/// A client on its way to another loop (mail).
pub(super) struct Moved {
    /// The client's socket, off the old loop's poll.
    socket: Detached,
    /// The facade endpoint the client was given, kept so it sees the same cluster.
    facade: Option<Box<Endpoint>>,
    state: ClientState,
    connected: Connected,
    /// The client's address.
    peer: Arc<str>,
    /// Its count on the pipelining workers' tally, moved with it.
    pipelining: Option<Pipelining>,
    /// When it connected and when it was last active, so its clocks keep counting.
    times: (Instant, Instant),
    /// Reads in a row that started several commands, carried so the new loop judges its
    /// pipelining the same way.
    deep_reads: u8,
}

impl<'d> LoopClient<'d> {
    /// Counts a turn that started `started` commands from one read: a run of
    /// [`PIPELINE_READS`] reads of [`PIPELINE_DEPTH`] commands or more makes the client a
    /// pipelining one (counted per worker); a read of fewer ends that.
    pub(super) fn note_depth(&mut self, started: usize, work: &Work<'d>) {
        let Some(moves) = work.d.spread().and_then(|spread| spread.moves()) else {
            return;
        };
        if started == 0 {
            return;
        }
        if started < PIPELINE_DEPTH {
            self.flags.deep_reads = 0;
            self.books.pipelining = None;
            return;
        }
        self.flags.deep_reads = self.flags.deep_reads.saturating_add(1);
        if self.flags.deep_reads >= PIPELINE_READS && self.books.pipelining.is_none() {
            self.books.pipelining = Some(moves.join_pipelining(work.index));
        }
    }

    /// At a safe point, while its worker sheds clients: the worker this client should move to
    /// now, if any.
    fn move_now(&mut self, moves: &Moves, index: usize) -> Option<usize> {
        if !self.may_close_now()
            || self.flags.closing
            || self.flags.due.aged
            || self.state.quit
            || self.state.tracking.is_some()
        {
            return None;
        }
        if let Some(member) = self.books.pipelining.as_mut() {
            if let Some(to) = moves.shed_pipelining(member) {
                return Some(to);
            }
        }
        let to = moves.take_ticket(index)?;
        if let Some(member) = self.books.pipelining.as_mut() {
            moves.transfer(member, to); // its count goes with it
        }
        Some(to)
    }
}

impl<'d> Loop<'d> {
    /// After client `token`'s writes: moves it to another loop if the placement asks for it.
    #[inline]
    pub(super) fn move_if_wanted(&mut self, token: u64) {
        // One relaxed load while this worker does not shed clients: the usual case.
        let index = self.work.index;
        let d = self.work.d;
        let Some(moves) = d.spread().and_then(|spread| spread.moves()) else {
            return;
        };
        if !moves.wanted(index) {
            return;
        }
        let Some(client) = super::client_in(&mut self.clients, token) else {
            return;
        };
        let Some(to) = client.move_now(moves, index) else {
            return;
        };
        let Some(remote) = self
            .peers
            .get(to)
            .filter(|_| to != self.work.index)
            .cloned()
        else {
            return;
        };
        let mut client = self.clients.remove(tokens::key(token));
        client.link.socket.deregister(self.poll.registry());
        client.books.connected.moved_to(to);
        tracing::debug!(
            client = client.state.id,
            from = self.work.index,
            to,
            "client moves to another worker's loop"
        );
        let moved = Moved {
            socket: client.link.socket.detach(),
            facade: client.settings.facade,
            state: client.state,
            connected: client.books.connected,
            peer: client.link.peer,
            pipelining: client.books.pipelining,
            times: (client.times.connected_at, client.times.last_activity),
            deep_reads: client.flags.deep_reads,
        };
        remote.post(Box::new(moved));
    }

    /// Mail for the loop that is not its own: a client moved here, or else logged and dropped.
    pub(super) fn adopt(&mut self, mail: Mail) {
        match mail.downcast::<Moved>() {
            Ok(moved) => self.take_in(*moved),
            Err(_) => tracing::error!(
                worker = self.work.index,
                "event loop got mail it does not know"
            ),
        }
    }

    /// Serves a client another loop moved here.
    fn take_in(&mut self, moved: Moved) {
        let Moved {
            socket,
            facade,
            mut state,
            connected,
            peer,
            pipelining,
            times: (connected_at, last_activity),
            deep_reads,
        } = moved;
        let mut socket = ClientSocket::attach(socket);
        self.admitted = self.admitted.wrapping_add(1);
        let entry = self.clients.vacant_entry();
        let token = tokens::token(TokenKind::LoopClient, self.admitted, entry.key());
        if let Err(error) = socket.register(self.poll.registry(), token) {
            tracing::warn!(%error, %peer, "cannot register a moved client with the event loop; closing it");
            return;
        }
        let (settings, users) = Settings::now(&self.work, facade);
        state.reauthorize(users);
        let books = Books {
            share: self.work.d.crowd.budget.share(connected.id),
            connected,
            pipelining,
        };
        let times = Times {
            connected_at,
            last_activity,
            partial_since: None,
        };
        let link = Link::new(socket, peer);
        let mut client = LoopClient::new(token, link, books, settings, state, times);
        client.flags.deep_reads = deep_reads;
        // Its socket may hold what it sent since it left the other loop.
        client.flags.readable = true;
        // It came while this loop hands its clients over to a new process: it goes too.
        client.flags.due.leaving = self.draining && self.work.d.exits.handover.is_active();
        client.arm_timers(&mut self.work);
        entry.insert(client);
        self.run_client(token);
    }
}
