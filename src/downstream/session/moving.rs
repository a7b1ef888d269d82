//! A busy session moving to another per-core worker at a safe point (`placement: auto`, see
//! `downstream::moves`): its socket leaves this worker's reactor, and its lasting state crosses to
//! the other worker, which builds the client again and serves it from there.
//!
//! A safe point is the end of a turn with nothing owed, nothing buffered, no transaction, WATCH,
//! client tracking or near-cache lane, and the client not about to be closed: every command the
//! client sent has been answered, so its next one may take another worker's node connections
//! without overtaking anything. One thing outlives the move: WAIT counts the writes of the node
//! connection that carried them, so the client's WAIT bookkeeping records the worker it wrote
//! from and its next WAITs ask that worker's connections too (router/stateful/wait/).

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::super::client_state::ClientState;
use super::super::clients::Downstream;
use super::super::facade::Endpoint;
use super::super::movable::{Detached, Movable};
use super::super::moves::Pipelining;
use super::super::pubsub::Rejoin;
use super::super::ClientRules;
use super::{latency_watch, Client};
use crate::downstream::slow::SlowChanges;

/// A client on its way to another worker.
pub(crate) struct Moving {
    /// The worker it goes to.
    pub(super) to: usize,
    pub(super) stream: Detached,
    pub(super) moved: MovedClient,
}

/// What the next worker (or, after an upgrade, the next process: leaving.rs) builds a moved
/// client from.
pub(crate) struct MovedClient {
    pub(super) facade: Option<Box<Endpoint>>,
    pub(super) state: ClientState,
    pub(super) generation: u64,
    pub(super) config: Arc<ClientRules>,
    pub(super) last_activity: Instant,
    pub(super) connected_at: Instant,
    pub(super) aged: bool,
    /// A pipelining session's membership, already counted on `to`.
    pub(super) pipelining: Option<Pipelining>,
    /// Bytes read but not yet parsed: empty between workers (a move waits for an empty
    /// buffer), the start of the next request after an upgrade.
    pub(super) input: bytes::Bytes,
    /// After an upgrade, a subscribed client's subscriptions (none between workers: a
    /// subscribed session does not move).
    pub(super) rejoin: Option<Box<Rejoin>>,
}

impl MovedClient {
    /// A client handed over by a worker's event loop (`downstream::event_loop`), which kept
    /// these for it; its settings are taken anew by the session.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::downstream) fn from_loop(
        facade: Option<Box<Endpoint>>,
        state: ClientState,
        generation: u64,
        config: Arc<ClientRules>,
        last_activity: Instant,
        connected_at: Instant,
        aged: bool,
        input: bytes::Bytes,
    ) -> MovedClient {
        MovedClient {
            facade,
            state,
            generation,
            config,
            last_activity,
            connected_at,
            aged,
            pipelining: None,
            input,
            rejoin: None,
        }
    }
}

// === impl Client ===

impl<S> Client<'_, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    /// Whether nothing ties the client to this worker now (see the module docs).
    pub(super) fn may_move(&self) -> bool {
        self.may_close_now()
            && self.state.tracking.is_none()
            && self.state.near_lanes.is_none()
            && !self.state.quit
            && !self.aged
            && !self.close_when_safe
    }
}

impl<'d, S> Client<'d, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + Movable,
{
    /// The client, leaving worker `from` for worker `to`: `None` when its socket could not leave
    /// this worker's reactor (the client is then disconnected).
    pub(super) fn into_moving(
        self,
        from: usize,
        to: usize,
        pipelining: Option<Pipelining>,
    ) -> Option<Moving> {
        let Client {
            facade,
            generation,
            config,
            stream,
            mut state,
            last_activity,
            connected_at,
            aged,
            ..
        } = self;
        // WAIT must go on asking `from`'s connections, which carried the client's writes so
        // far. `Moves` exists only with workers WAIT can record, so this holds; a session it
        // could not record is closed rather than moved with a WAIT that might overcount.
        if !state.written.note_moved_from(from) {
            tracing::warn!(
                client = state.id,
                worker = from,
                "cannot record the client's worker for WAIT; closing it"
            );
            return None;
        }
        let Some(stream) = stream.into_inner().detach() else {
            tracing::warn!(
                client = state.id,
                "could not move the client's socket to another worker; closing it"
            );
            return None;
        };
        Some(Moving {
            to,
            stream,
            moved: MovedClient {
                facade,
                state,
                generation,
                config,
                last_activity,
                connected_at,
                aged,
                pipelining,
                input: bytes::Bytes::new(),
                rejoin: None,
            },
        })
    }

    /// A moved client on its new worker (`stream` registered here), and its pipelining
    /// membership for the first busy spell.
    pub(super) fn resume(
        stream: S,
        downstream: &'d Downstream,
        peer: &'d Arc<str>,
        moved: MovedClient,
    ) -> (Self, Option<Pipelining>) {
        let id = moved.state.id;
        let mut client = Client {
            downstream,
            peer,
            facade: moved.facade,
            generation: moved.generation,
            stream: super::ClientStream::new(stream),
            state: moved.state,
            input: super::Buffer::default(),
            out: super::Buffer::default(),
            inbox: None,
            last_activity: moved.last_activity,
            connected_at: moved.connected_at,
            idle_timer: super::LazyTimer::default(),
            age_timer: super::LazyTimer::default(),
            aged: moved.aged,
            slow: SlowChanges::new(latency_watch(downstream, &moved.config)),
            close_when_safe: false,
            handing_over: false,
            share: downstream.crowd.budget.share(id),
            drain: downstream.exits.drain.signal(id),
            config: moved.config,
        };
        if !moved.input.is_empty() {
            client.input.append(&moved.input);
        }
        (client, moved.pipelining)
    }
}
