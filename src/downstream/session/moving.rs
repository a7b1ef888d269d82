//! A busy session moving to another per-core worker at a safe point (`placement: auto`, see
//! `downstream::moves`): its socket leaves this worker's reactor, and its lasting state crosses to
//! the other worker, which builds the client again and serves it from there.
//!
//! A safe point is the end of a turn with nothing owed, nothing buffered, no transaction, WATCH,
//! client tracking or near-cache lane, and the client not about to be closed: every command the
//! client sent has been answered, so its next one may take another worker's node connections
//! without overtaking anything. One thing outlives the move: WAIT counts the writes of the node
//! connection that carried them, so the client's WAIT bookkeeping records the worker it wrote
//! from and its next WAITs ask that worker's connections too (router/stateful/wait.rs).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::super::clients::{Connected, Downstream};
use super::super::facade::Endpoint;
use super::super::local::ClientState;
use super::super::moves::{Moves, Pipelining, PIPELINE_DEPTH, PIPELINE_READS};
use super::super::ClientConfig;
use super::busy::Spell;
use super::{latency_watch, Client};
use crate::downstream::slow::SlowChanges;

/// A client socket that can leave its worker's reactor and join another's: plain TCP and Unix
/// sockets. A TLS session keeps its worker (its stream holds the TLS state over the socket).
pub(crate) trait Movable: Sized {
    /// Whether sessions on this kind of socket may move.
    const MOVABLE: bool = false;

    /// The socket, out of this worker's reactor; `None` when it cannot leave.
    fn detach(self) -> Option<Detached> {
        None
    }
}

/// A socket between two workers.
pub(crate) enum Detached {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Movable for tokio::net::TcpStream {
    const MOVABLE: bool = true;

    fn detach(self) -> Option<Detached> {
        self.into_std().ok().map(Detached::Tcp)
    }
}

impl Movable for tokio::net::UnixStream {
    const MOVABLE: bool = true;

    fn detach(self) -> Option<Detached> {
        self.into_std().ok().map(Detached::Unix)
    }
}

impl<IO> Movable for tokio_rustls::server::TlsStream<IO> {}

/// A client on its way to another worker.
pub(crate) struct Moving {
    /// The worker it goes to.
    to: usize,
    stream: Detached,
    lasting: Lasting,
}

/// What the next worker builds a moved client from.
pub(super) struct Lasting {
    facade: Option<Box<Endpoint>>,
    state: ClientState,
    generation: u64,
    config: Arc<ClientConfig>,
    last_activity: Instant,
    connected_at: Instant,
    aged: bool,
    /// A pipelining session's membership, already counted on `to`.
    pipelining: Option<Pipelining>,
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
            lasting: Lasting {
                facade,
                state,
                generation,
                config,
                last_activity,
                connected_at,
                aged,
                pipelining,
            },
        })
    }

    /// A moved client on its new worker (`stream` registered here), and its pipelining
    /// membership for the first busy spell.
    pub(super) fn resume(
        stream: S,
        downstream: &'d Downstream,
        peer: &'d Arc<str>,
        moving: Lasting,
    ) -> (Self, Option<Pipelining>) {
        let id = moving.state.id;
        let client = Client {
            downstream,
            peer,
            facade: moving.facade,
            generation: moving.generation,
            stream: super::ClientStream::new(stream),
            state: moving.state,
            input: super::Buffer::default(),
            out: super::Buffer::default(),
            inbox: None,
            last_activity: moving.last_activity,
            connected_at: moving.connected_at,
            idle_timer: super::LazyTimer::default(),
            age_timer: super::LazyTimer::default(),
            aged: moving.aged,
            slow: SlowChanges::new(latency_watch(downstream, &moving.config)),
            close_when_safe: false,
            share: downstream.budget.share(id),
            drain: downstream.drain.signal(id),
            config: moving.config,
        };
        (client, moving.pipelining)
    }
}

// === impl Spell ===

impl<S> Spell<'_, '_, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    /// After a turn: the worker this session should move to now, if it is at a safe point and
    /// its worker wants to shed sessions (one relaxed load otherwise).
    pub(super) fn move_now(&mut self) -> Option<(usize, usize)> {
        let (moves, worker) = self.moves?;
        if !moves.wanted(worker)
            || !self.calls.is_empty()
            || self.parked.is_some()
            || self.closing
            || !self.c.may_move()
        {
            return None;
        }
        if let Some(member) = self.pipelining.as_mut() {
            if let Some(to) = moves.shed_pipelining(member) {
                return Some((worker, to));
            }
        }
        let to = moves.take_ticket(worker)?;
        if let Some(member) = self.pipelining.as_mut() {
            moves.transfer(member, to); // its count goes with it
        }
        Some((worker, to))
    }

    /// Counts a turn that started `started` commands from one read: a run of
    /// [`PIPELINE_READS`] reads of [`PIPELINE_DEPTH`] commands or more makes the session a
    /// pipelining one; a read of fewer ends that.
    pub(super) fn note_depth(&mut self, started: usize) {
        let Some((moves, worker)) = self.moves else {
            return;
        };
        if started == 0 {
            return;
        }
        if started < PIPELINE_DEPTH {
            self.deep_reads = 0;
            self.pipelining = None;
            return;
        }
        self.deep_reads = self.deep_reads.saturating_add(1);
        if self.deep_reads >= PIPELINE_READS && self.pipelining.is_none() {
            self.pipelining = Some(moves.join_pipelining(worker));
        }
    }
}

/// Where this worker's sessions may move: with `placement: auto`, on a per-core worker, for
/// sockets that can move.
pub(super) fn moves_here<S: Movable>(downstream: &Downstream) -> Option<(&Arc<Moves>, usize)> {
    if !S::MOVABLE {
        return None;
    }
    let moves = downstream.spread()?.moves()?;
    Some((moves, crate::workers::current()?))
}

/// Sends a moved session to its new worker, which serves it from there; the client's
/// registration and worker count follow it.
pub(crate) fn hand_over(moving: Moving, mut client: Connected, peer: Arc<str>) {
    let handle = client
        .downstream
        .spread()
        .and_then(|spread| spread.moves())
        .and_then(|moves| moves.handle(moving.to))
        .cloned();
    let Some(handle) = handle else {
        return; // no such worker: dropping the socket closes the client
    };
    client.moved_to(moving.to);
    handle.spawn(resumed(moving, client, peer));
}

/// The moved session's task on its new worker (boxed: a session may move again, from there).
fn resumed(
    moving: Moving,
    client: Connected,
    peer: Arc<str>,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let downstream = &*client.downstream;
        let Moving {
            stream, lasting, ..
        } = moving;
        let next = match attach(stream) {
            Ok(Attached::Tcp(stream)) => {
                super::life::resume(stream, downstream, &peer, lasting).await
            }
            Ok(Attached::Unix(stream)) => {
                super::life::resume(stream, downstream, &peer, lasting).await
            }
            Err(error) => {
                tracing::warn!(%error, client = client.id, "could not register a moved client's socket; closing it");
                None
            }
        };
        if let Some(next) = next {
            hand_over(next, client, peer);
        }
    })
}

/// A moved socket registered with this worker's reactor.
enum Attached {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

fn attach(stream: Detached) -> std::io::Result<Attached> {
    Ok(match stream {
        Detached::Tcp(s) => Attached::Tcp(tokio::net::TcpStream::from_std(s)?),
        Detached::Unix(s) => Attached::Unix(tokio::net::UnixStream::from_std(s)?),
    })
}
