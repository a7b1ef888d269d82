//! The loop's share of every node's connections (see `upstream::loop_conn`): attached when a node
//! is made, written once per loop turn, read when their sockets are readable.
//!
//! What holds: a connection is written at most once per loop turn (commands from every client of
//! the turn go out in one write), and it is listed in `dirty` at most once per turn
//! (`needs_listing`), so the end-of-turn flush touches only connections with something to write.
//! Every event names its connection by a token carrying a generation next to the slab key; an event
//! for a connection that closed and whose slot was reused finds the generation wrong and is
//! ignored.

use std::sync::Arc;

use slab::Slab;
use tokio::time::Instant;

use super::tokens::{self, TokenKind};
use crate::reactor::Remote;
use crate::upstream::{ConnAttach, ConnEvent, LoopConn, LoopSink, LoopWaiter, UpstreamError};

/// The loop's node connections.
#[derive(Default)]
pub(super) struct Conns {
    /// The connections, by slab key; a token's key part indexes it.
    slab: Slab<LoopConn>,
    /// Bumped for each connection attached (tokens' generations).
    attached: u32,
    /// Connections with something to write at the end of this turn.
    dirty: Vec<usize>,
}

impl Conns {
    /// Whether some connection has something to write this turn.
    #[inline]
    pub(super) fn any_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Takes over a node connection made for this loop.
    pub(super) fn attach(&mut self, attach: ConnAttach, remote: &Arc<Remote>) {
        self.attached = self.attached.wrapping_add(1);
        let entry = self.slab.vacant_entry();
        let key = entry.key();
        let token = tokens::token(TokenKind::Conn, self.attached, key);
        let mut conn = LoopConn::new(attach, remote, token, key);
        // Commands may have been queued before the loop took the connection over.
        conn.pull(Instant::now());
        entry.insert(conn);
        self.list(key);
    }

    /// Appends a loop client's command to connection `key` (see [`LoopConn::send`]).
    ///
    /// `Ok(false)` also when the connection is gone from the slab. Otherwise as `LoopConn::send`:
    /// `Ok(false)` means not appended in place (the caller sends through the queue), `Err` means
    /// not sent at all (the connection is in its reconnect back-off).
    #[inline]
    pub(super) fn send(
        &mut self,
        key: usize,
        payload: &[u8],
        to: LoopWaiter,
        now: Instant,
    ) -> Result<bool, UpstreamError> {
        let Some(conn) = self.slab.get_mut(key) else {
            return Ok(false);
        };
        let sent = conn.send(payload, to, now);
        if conn.needs_listing() {
            self.dirty.push(key);
        }
        sent
    }

    /// Lists `key` for this turn's flush if it has something to write and is not listed yet.
    fn list(&mut self, key: usize) {
        if let Some(conn) = self.slab.get_mut(key) {
            if conn.needs_listing() {
                self.dirty.push(key);
            }
        }
    }

    /// The connection `token` names, if it is still there.
    fn get(&mut self, token: u64) -> Option<&mut LoopConn> {
        self.slab
            .get_mut(tokens::key(token))
            .filter(|c| c.token() == token)
    }

    /// Connection `token`'s queue got something.
    pub(super) fn on_woken(&mut self, token: u64, now: Instant) {
        if let Some(conn) = self.get(token) {
            conn.on_woken(now);
            self.list(tokens::key(token));
        }
    }

    /// A connect finished.
    ///
    /// Registers the new socket with the loop's poll and writes what queued up while connecting;
    /// a failed connect fails what was waiting (nothing was sent), through `sink` for the loop's
    /// own clients, and the next connect waits for the back-off.
    pub(super) fn on_connected(
        &mut self,
        event: ConnEvent,
        registry: &mio::Registry,
        sink: &mut impl LoopSink,
    ) {
        let token = event.token;
        if let Some(conn) = self.get(token) {
            conn.on_connected(event, registry, sink);
            self.list(tokens::key(token));
        }
    }

    /// Connection `token`'s socket is ready.
    ///
    /// Reads before writing: replies free in-flight room, and a read that fails (the node closed)
    /// must fail what was in flight before anything new is written on a dead socket. Any failure
    /// fails every command on the connection through `sink`, and the connection reconnects on its
    /// next use.
    pub(super) fn on_event(
        &mut self,
        token: u64,
        event: &mio::event::Event,
        now: Instant,
        registry: &mio::Registry,
        sink: &mut impl LoopSink,
    ) {
        let Some(conn) = self.get(token) else {
            return;
        };
        let mut result = Ok(());
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            result = conn.on_readable(now, sink);
        }
        if result.is_ok() && event.is_writable() {
            result = conn.on_writable();
        }
        if let Err(reason) = result {
            conn.fail(&reason, registry, sink);
        }
        // Replies may have freed room for queued commands.
        if conn.has_queued() {
            conn.pull(now);
            self.list(tokens::key(token));
        }
    }

    /// End of the loop's turn: every connection with something queued writes it.
    ///
    /// A failure while writing fails what is in flight on that connection; the others still write.
    pub(super) fn flush(
        &mut self,
        remote: &Arc<Remote>,
        registry: &mio::Registry,
        sink: &mut impl LoopSink,
    ) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for key in dirty.drain(..) {
            let Some(conn) = self.slab.get_mut(key) else {
                continue;
            };
            if let Err(reason) = conn.flush(remote) {
                conn.fail(&reason, registry, sink);
            }
        }
        // Keep the list's capacity.
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
    }

    /// Now and then: idle connections close, abandoned ones go.
    ///
    /// Runs every `CHORES`: connections idle past `upstream.idle_timeout` close (the next command
    /// reconnects), and those whose node is gone with nothing left in flight leave the slab.
    pub(super) fn tick(&mut self, now: Instant, registry: &mio::Registry) {
        self.slab.retain(|_, conn| !conn.tick(now, registry));
    }
}
