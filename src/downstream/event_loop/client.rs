//! One client connection on a worker's event loop: its socket and buffers, what Redis would keep
//! for it (`ClientState`), the replies it is owed, and when it closes.

use std::sync::Arc;

use tokio::time::Instant;

use super::super::budget::BudgetShare;
use super::super::client_state::ClientState;
use super::super::clients::Connected;
use super::super::facade::Endpoint;
use super::super::moves::Pipelining;
use super::super::session::buffers::Buffer;
use super::super::ClientRules;
use super::replies::Replies;
use super::socket::ClientSocket;
use super::work::Work;
use crate::protocol::{Limits, Request};

/// What happened to a client in a turn, for the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fate {
    /// It goes on (or closes once what it is owed is written: see [`LoopClient::closed`]).
    Stays,
    /// It leaves the loop for a session of the general kind (subscribe mode, client tracking).
    HandOff,
}

/// One client on the loop.
pub(super) struct LoopClient<'d> {
    /// The loop's name for it (slab key and generation).
    pub(super) token: u64,
    pub(super) link: Link,
    pub(super) books: Books<'d>,
    pub(super) settings: Settings,
    /// What Redis would keep for it (user, protocol, name, db, transaction).
    pub(super) state: ClientState,
    pub(super) replies: Replies<'d>,
    /// A command that runs alone, waiting for those before it; or the one that hands the
    /// client off, waiting for the same.
    pub(super) parked: Option<Request>,
    pub(super) flags: Flags,
    pub(super) times: Times,
}

/// A client's connection: its socket, who it is, and the bytes read and to write.
pub(super) struct Link {
    pub(super) socket: ClientSocket,
    pub(super) peer: Arc<str>,
    pub(super) input: Buffer,
    pub(super) out: Buffer,
}

/// Where the proxy counts a client: `/clients` and the client counts, its part of
/// `client.max_buffered_bytes_total`, and the placement's count of pipelining clients.
pub(super) struct Books<'d> {
    /// Its registration; dropped with the client.
    pub(super) connected: Connected,
    pub(super) share: BudgetShare<'d>,
    /// Counted as a pipelining client of this worker (`placement: auto`, see `moves.rs`).
    pub(super) pipelining: Option<Pipelining>,
}

/// The settings a client runs with: a reload swaps the reloadable ones at its next read.
pub(super) struct Settings {
    pub(super) generation: u64,
    pub(super) config: Arc<ClientRules>,
    pub(super) limits: Limits,
    /// Set on a cluster-facade listener (not reloadable).
    pub(super) facade: Option<Box<Endpoint>>,
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
    /// Stopped reading at a limit with bytes or requests left (run again when room frees).
    pub(super) stalled: bool,
    /// Paused by `client.max_buffered_bytes_total`.
    pub(super) budget_paused: bool,
    /// Reads in a row that started several commands (pipelining, for `placement: auto`).
    pub(super) deep_reads: u8,
    pub(super) listed: Listed,
    pub(super) due: AtSafePoint,
}

/// The loop's lists the client is on for this turn (each at most once).
#[derive(Default)]
pub(super) struct Listed {
    /// For a write, and for another turn, at the end of this loop turn.
    pub(super) write: bool,
    pub(super) run: bool,
    /// For the op-deadline sweep.
    pub(super) watched: bool,
}

/// What happens to the client at its next safe point.
#[derive(Default)]
pub(super) struct AtSafePoint {
    /// `client.max_age` passed: it is closed.
    pub(super) aged: bool,
    /// The latency watch wants idle clients closed: it is closed.
    pub(super) slow: bool,
    /// An upgrade hands the loop's clients over: it leaves (`upgrade.rs`).
    pub(super) leaving: bool,
}

/// A client's clock readings.
pub(super) struct Times {
    pub(super) connected_at: Instant,
    pub(super) last_activity: Instant,
    /// When the request being received began, while it is incomplete (`client.request_timeout`).
    pub(super) partial_since: Option<Instant>,
}

impl<'d> LoopClient<'d> {
    /// Nothing owed or buffered, no transaction or WATCH open: closing now loses nothing.
    pub(super) fn may_close_now(&self) -> bool {
        self.link.input.is_empty()
            && self.link.out.is_empty()
            && self.replies.is_empty()
            && self.parked.is_none()
            && !self.state.tx.is_open()
            && self.state.tx.watched_slot().is_none()
    }

    /// At a safe point: closes it when `max_age` or the latency watch asked for that. Asked after
    /// every turn that wrote to the client, and almost never due: the flags are tested in the
    /// caller, the rest is a call.
    #[inline]
    pub(super) fn close_if_asked(&mut self, work: &Work<'d>) {
        if self.flags.due.aged || self.flags.due.slow {
            self.close_as_asked(work);
        }
    }

    #[cold]
    fn close_as_asked(&mut self, work: &Work<'d>) {
        if self.flags.closing || !self.may_close_now() {
            return;
        }
        let metrics = &work.d.client_metrics;
        if self.flags.due.aged {
            metrics.closed_max_age.inc();
            tracing::debug!(client = self.state.id, "closing client at client.max_age");
            self.flags.closing = true;
        } else if self.flags.due.slow {
            metrics.clients_closed_slow().inc();
            tracing::debug!(
                client = self.state.id,
                "closing idle client: latency above baseline"
            );
            self.flags.closing = true;
        }
    }

    /// Whether the client has finished closing: closing, nothing owed, everything written.
    pub(super) fn closed(&self) -> bool {
        self.flags.gone
            || (self.flags.closing && self.replies.is_empty() && self.link.out.is_empty())
    }

    /// Lists the client for a write at the end of the loop's turn (once).
    #[inline]
    pub(super) fn want_write(&mut self, work: &mut Work<'d>) {
        if !self.flags.listed.write {
            self.flags.listed.write = true;
            work.lists.write.push(self.token);
        }
    }

    /// Lists the client for another turn in this loop turn (once).
    #[inline]
    pub(super) fn want_run(&mut self, work: &mut Work<'d>) {
        if !self.flags.listed.run {
            self.flags.listed.run = true;
            work.lists.run.push(self.token);
        }
    }

    /// Lists the client for the op-deadline sweep (once, until the sweep finds it owing
    /// nothing sent in place).
    #[inline]
    pub(super) fn watch_deadlines(&mut self, work: &mut Work<'d>) {
        if !self.flags.listed.watched {
            self.flags.listed.watched = true;
            work.lists.watched.push(self.token);
        }
    }

    /// Gives back buffers that hold nothing: a waiting client keeps none.
    pub(super) fn release_buffers(&mut self) {
        self.link.input.release_if_empty();
        self.link.out.release_if_empty();
    }

    /// After a reload: new limits and timeouts from now on, and the user is checked again.
    pub(super) fn reload_if_changed(&mut self, work: &Work<'d>) {
        if work.d.generation() == self.settings.generation {
            return;
        }
        let (generation, config, users) = work.d.snapshot();
        self.settings.generation = generation;
        self.settings.limits = config.codec.clone();
        self.settings.config = config;
        self.flags.due.aged = false;
        if !self.settings.config.close_idle_when_slow {
            self.flags.due.slow = false;
        }
        self.state.reauthorize(users);
    }

    /// A client joining the loop: it owes nothing and has read nothing.
    pub(super) fn new(
        token: u64,
        link: Link,
        books: Books<'d>,
        settings: Settings,
        state: ClientState,
        times: Times,
    ) -> Self {
        LoopClient {
            token,
            link,
            books,
            settings,
            state,
            replies: Replies::default(),
            parked: None,
            flags: Flags::default(),
            times,
        }
    }
}

impl Settings {
    /// The settings a new client starts with, and the users to check it against.
    pub(super) fn now(
        work: &Work<'_>,
        facade: Option<Box<Endpoint>>,
    ) -> (Settings, Arc<crate::auth::Users>) {
        let (generation, config, users) = work.d.snapshot();
        let settings = Settings {
            generation,
            limits: config.codec.clone(),
            config,
            facade,
        };
        (settings, users)
    }
}

impl Link {
    /// A connection with nothing read or to write yet.
    pub(super) fn new(socket: ClientSocket, peer: Arc<str>) -> Self {
        Link {
            socket,
            peer,
            input: Buffer::default(),
            out: Buffer::default(),
        }
    }
}
