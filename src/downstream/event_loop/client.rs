//! One client connection on a worker's event loop: its socket and buffers, what Redis would keep
//! for it (`ClientState`), the replies it is owed, and when it closes.

use std::io::{self, Write};
use std::sync::Arc;

use bytes::Buf;
use tokio::time::Instant;

use super::super::budget::Share;
use super::super::clients::Connected;
use super::super::facade::Endpoint;
use super::super::local::ClientState;
use super::super::moves::Pipelining;
use super::super::session::buffers::Buffer;
use super::super::ClientConfig;
use super::replies::Replies;
use super::socket::ClientSocket;
use super::work::Work;
use crate::protocol::{Limits, Request};
use crate::reactor::LoopWaker;
use crate::upstream::Inbox;

/// What happened to a client in a turn, for the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    /// It goes on (or closes once what it is owed is written: see [`Client::closed`]).
    Stays,
    /// It leaves the loop for a session of the general kind (subscribe mode, client tracking).
    HandOff,
}

/// One client on the loop.
pub(super) struct Client<'d> {
    /// The loop's name for it (slab key and generation).
    pub(super) token: u64,
    pub(super) socket: ClientSocket,
    pub(super) peer: Arc<str>,
    /// Its registration (`/clients`, the counts); dropped with the client.
    pub(super) connected: Connected,
    /// Set on a cluster-facade listener.
    pub(super) facade: Option<Box<Endpoint>>,
    pub(super) state: ClientState,
    /// The reloadable settings it uses, renewed when a reload bumps the generation.
    pub(super) settings: Settings,
    pub(super) input: Buffer,
    pub(super) out: Buffer,
    pub(super) replies: Replies<'d>,
    /// Where the general path's forwarded commands reply (made on first use).
    pub(super) inbox: Option<Box<Inbox>>,
    /// Wakes the loop for this client's calls (made on first use).
    pub(super) waker: Option<LoopWaker>,
    /// A command that runs alone, waiting for those before it; or the one that hands the
    /// client off, waiting for the same.
    pub(super) parked: Option<Request>,
    /// Counted as a pipelining client of this worker (`placement: auto`, see `moves.rs`).
    pub(super) pipelining: Option<Pipelining>,
    pub(super) flags: Flags,
    pub(super) times: Times,
    /// Its part of `client.max_buffered_bytes_total`.
    pub(super) share: Share<'d>,
}

/// The settings a client runs with (a reload swaps them at its next read).
pub(super) struct Settings {
    pub(super) generation: u64,
    pub(super) config: Arc<ClientConfig>,
    pub(super) limits: Limits,
}

/// A client's switches.
#[derive(Default)]
pub(super) struct Flags {
    /// The socket may have unread bytes (its last read was not short).
    pub(super) readable: bool,
    /// The socket takes writes (none was cut short since the last writable event).
    pub(super) blocked: bool,
    /// No more commands are read; the client is closed once everything owed is written.
    pub(super) closing: bool,
    /// The client closed its side, or a read or write failed.
    pub(super) gone: bool,
    /// `client.max_age` passed, or the latency watch wants idle clients closed: it is closed
    /// at its next safe point.
    pub(super) aged: bool,
    pub(super) slow: bool,
    /// Listed for a write, or for another turn, at the end of this loop turn.
    pub(super) to_write: bool,
    pub(super) to_run: bool,
    /// Listed for the op-deadline sweep.
    pub(super) watched: bool,
    /// Stopped reading at a limit with bytes or requests left (run again when room frees).
    pub(super) stalled: bool,
    /// Paused by `client.max_buffered_bytes_total`.
    pub(super) budget_paused: bool,
    /// An upgrade hands the loop's clients over: it leaves at its safe point (`upgrade.rs`).
    pub(super) leaving: bool,
    /// Reads in a row that started several commands (pipelining, for `placement: auto`).
    pub(super) deep_reads: u8,
}

/// A client's clock readings.
pub(super) struct Times {
    pub(super) connected_at: Instant,
    pub(super) last_activity: Instant,
    /// When the request being received began, while it is incomplete (`client.request_timeout`).
    pub(super) partial_since: Option<Instant>,
}

impl<'d> Client<'d> {
    /// Nothing owed or buffered, no transaction or WATCH open: closing now loses nothing.
    pub(super) fn may_close_now(&self) -> bool {
        self.input.is_empty()
            && self.out.is_empty()
            && self.replies.is_empty()
            && self.parked.is_none()
            && !self.state.tx.is_open()
            && self.state.tx.watched_slot().is_none()
    }

    /// At a safe point: closes it when `max_age` or the latency watch asked for that.
    pub(super) fn close_if_asked(&mut self, work: &Work<'d>) {
        let asked = self.flags.aged || self.flags.slow;
        if !asked || self.flags.closing || !self.may_close_now() {
            return;
        }
        let metrics = &work.d.client_metrics;
        if self.flags.aged {
            metrics.closed_max_age.inc();
            tracing::debug!(client = self.state.id, "closing client at client.max_age");
            self.flags.closing = true;
        } else if self.flags.slow {
            metrics.clients_closed_slow().inc();
            tracing::debug!(
                client = self.state.id,
                "closing idle client: latency above baseline"
            );
            self.flags.closing = true;
        }
    }

    /// Writes what may be written now. `Err` when the client is gone.
    pub(super) fn write_out(&mut self, work: &mut Work<'d>) -> Result<(), ()> {
        let max_held = super::work::HOLD_MAX.min(self.settings.config.max_reply_bytes);
        let out_len = self.out.len();
        if out_len == 0
            || self.flags.blocked
            || !self
                .replies
                .batches
                .may_write(self.replies.len(), out_len, max_held)
        {
            return Ok(());
        }
        // Whoever reads these replies finds their commands counted.
        work.tally.flush();
        while !self.out.is_empty() {
            match self.socket.write(&self.out[..]) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    work.d.client_metrics.bytes_sent.inc_by(n as u64);
                    self.state.note_written(n);
                    self.out.advance(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.flags.blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        self.replies
            .batches
            .wrote(self.replies.len(), self.out.len());
        Ok(())
    }

    /// Whether the client has finished closing: closing, nothing owed, everything written.
    pub(super) fn closed(&self) -> bool {
        self.flags.gone || (self.flags.closing && self.replies.is_empty() && self.out.is_empty())
    }

    /// Lists the client for a write at the end of the loop's turn (once).
    #[inline]
    pub(super) fn want_write(&mut self, work: &mut Work<'d>) {
        if !self.flags.to_write {
            self.flags.to_write = true;
            work.to_write.push(self.token);
        }
    }

    /// Lists the client for another turn in this loop turn (once).
    #[inline]
    pub(super) fn want_run(&mut self, work: &mut Work<'d>) {
        if !self.flags.to_run {
            self.flags.to_run = true;
            work.to_run.push(self.token);
        }
    }

    /// Lists the client for the op-deadline sweep (once, until the sweep finds it owing
    /// nothing sent in place).
    #[inline]
    pub(super) fn watch_deadlines(&mut self, work: &mut Work<'d>) {
        if !self.flags.watched {
            self.flags.watched = true;
            work.watched.push(self.token);
        }
    }

    /// Gives back buffers that hold nothing: a waiting client keeps none.
    pub(super) fn release_buffers(&mut self) {
        self.input.release_if_empty();
        self.out.release_if_empty();
    }

    /// After a reload: new limits and timeouts from now on, and the user is checked again.
    pub(super) fn reload_if_changed(&mut self, work: &Work<'d>) {
        if work.d.generation() == self.settings.generation {
            return;
        }
        let (generation, config, users) = work.d.snapshot();
        self.settings = Settings {
            generation,
            limits: config.limits(),
            config,
        };
        self.flags.aged = false;
        if !self.settings.config.close_idle_when_slow {
            self.flags.slow = false;
        }
        self.state.reauthorize(users);
    }

    /// The settings a new client starts with.
    pub(super) fn settings_now(work: &Work<'d>) -> (Settings, Arc<crate::auth::Users>) {
        let (generation, config, users) = work.d.snapshot();
        let settings = Settings {
            generation,
            limits: config.limits(),
            config,
        };
        (settings, users)
    }
}
