//! One client connection: parse its commands, start each as soon as it arrives, and write the
//! replies back in the order the commands came, whatever order the nodes answer in.
//!
//! A session has two states (docs/decisions/0007-the-cost-of-an-idle-client.md):
//! - **idle** ([`Client::wait_for_request`]): nothing owed, nothing buffered. The task holds
//!   only the client's lasting state (this module's [`Client`], a few hundred bytes) and waits
//!   for the socket to become readable without a buffer.
//! - **busy** ([`busy::serve_busy`]): from the first bytes of a request until the client has
//!   been quiet for a while ([`busy::IDLE_TICK`] with nothing owed). Its state (the owed calls,
//!   the per-turn timers, the reply batches) is a boxed future made when the client wakes up
//!   and freed when it goes idle again, so a crowd of idle clients costs little while a busy
//!   one allocates nothing per command.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Buf;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use super::budget::BudgetShare;
use super::client_state::ClientState;
use super::clients::Downstream;
use super::drain::DrainSignal;
use super::facade::Endpoint;
use super::slow::{LatencyWatch, SlowChanges};
use super::ClientRules;
use crate::upstream::Inbox;

mod adopted;
pub(super) mod buffers;
mod busy;
pub(super) mod dispatch;
pub(super) mod failed_login;
mod leaving;
mod life;
mod moving;
mod near;
mod owed;
pub(super) mod record;
mod spell_events;
mod spell_moves;
mod spell_start;
mod stream;
mod subscribe;
mod timer;

pub(crate) use adopted::adopt_session;
pub(crate) use life::{adopt, hand_over, serve};
pub(crate) use moving::MovedClient;

use buffers::Buffer;
use stream::ClientStream;
use timer::LazyTimer;

/// What ended an idle wait.
enum Wake {
    /// The client sent something: it is in `input`.
    Request,
    /// The client left, idled out, or is to be closed (drain, `max_age`, slow latency).
    Close,
}

/// What ended a busy spell.
enum Busy {
    /// Nothing owed or buffered for a while: back to the idle wait.
    Idle,
    /// The session is over (closed, or the client is gone).
    Done,
    /// At a safe point while an upgrade hands clients over, the client leaves for the new
    /// process (see leaving.rs).
    HandOver,
    /// At a safe point, the session leaves worker `from` for worker `to` (see moving.rs), with
    /// its pipelining membership if it has one.
    Move {
        from: usize,
        to: usize,
        pipelining: Option<super::moves::Pipelining>,
    },
}

/// What a session keeps for the whole life of its client, busy or idle.
///
/// Every idle client holds this inside its task's box, so its size is the RSS per idle client
/// (bench/crowd.sh). The box must also stay in a smaller allocator size class than a busy spell's
/// (864 bytes): mimalloc's classes here are 640 and 896 bytes, and when both kinds share pages a
/// burst of clients going idle leaves those pages half used (measured at 10,000 idle clients:
/// 2.5–2.7 KB per client with a 648-byte box, 1.6–2.0 KB with 632). The task's box is 632 bytes
/// today; the test in `tests.rs` bounds this struct.
struct Client<'d, S> {
    downstream: &'d Downstream,
    /// One pointer, not a `&str`: see [`Client`] on why every word counts here.
    peer: &'d Arc<str>,
    /// Set on a cluster-facade listener (boxed: most sessions have none).
    facade: Option<Box<Endpoint>>,
    /// The reloadable settings this session uses, renewed when a reload bumps the generation.
    generation: u64,
    config: Arc<ClientRules>,
    /// The client's socket (read and written through `reader()` and `writer()` views).
    stream: ClientStream<S>,
    state: ClientState,
    /// The client's bytes both ways: pooled buffers while they hold something, nothing while
    /// the client is idle (see buffers.rs).
    input: Buffer,
    out: Buffer,
    /// Where the nodes put the replies to this client's forwarded commands (see
    /// upstream::inbox); made with the first one, dropped when the client goes idle (boxed:
    /// part of every session's lasting state otherwise).
    inbox: Option<Box<Inbox>>,
    last_activity: Instant,
    connected_at: Instant,
    /// `client.idle_timeout` and `client.max_age` (made only when set).
    idle_timer: LazyTimer,
    age_timer: LazyTimer,
    /// `client.max_age` reached: the client is closed at the next safe point.
    aged: bool,
    /// `client.close_idle_when_slow`: the latency watch's state changes while it is on (see
    /// [`Client::latency`]), and whether this client is to be closed at its next safe point.
    slow: SlowChanges,
    close_when_safe: bool,
    /// An upgrade hands clients over and this one waits for its safe point (leaving.rs): the
    /// drain no longer closes it, and it stops reading once no transaction is open.
    handing_over: bool,
    /// This session's part of `client.max_buffered_bytes_total`.
    share: BudgetShare<'d>,
    /// Shutdown: close once nothing is owed (a flag read per turn, see drain.rs).
    drain: DrainSignal<'d>,
}

// === impl Client ===

impl<'d, S> Client<'d, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    fn new(
        stream: S,
        downstream: &'d Downstream,
        id: u64,
        peer: &'d Arc<str>,
        facade: Option<Box<Endpoint>>,
    ) -> Self {
        let (generation, config, users) = downstream.snapshot();
        let mut state = ClientState::new(id, users);
        state.cluster_mode = facade.is_some();
        let latency = latency_watch(downstream, &config);
        let now = Instant::now();
        Client {
            downstream,
            peer,
            facade,
            generation,
            config,
            stream: ClientStream::new(stream),
            state,
            input: Buffer::default(),
            out: Buffer::default(),
            inbox: None,
            last_activity: now,
            connected_at: now,
            idle_timer: LazyTimer::default(),
            age_timer: LazyTimer::default(),
            aged: false,
            slow: SlowChanges::new(latency),
            close_when_safe: false,
            handing_over: false,
            share: downstream.crowd.budget.share(id),
            drain: downstream.exits.drain.signal(id),
        }
    }

    /// After a reload: new limits and timeouts from now on, and the user is checked again.
    /// Returns whether there was one.
    fn reload_if_changed(&mut self) -> bool {
        if self.downstream.generation() == self.generation {
            return false;
        }
        let users;
        (self.generation, self.config, users) = self.downstream.snapshot();
        let latency = self.latency();
        if latency.is_none() {
            self.slow = SlowChanges::new(None);
            self.close_when_safe = false;
        } else if !self.slow.is_on() {
            self.slow = SlowChanges::new(latency);
        }
        self.aged = false;
        self.age_timer.free();
        self.state.reauthorize(users);
        true
    }

    /// The latency watch when `client.close_idle_when_slow` is on (derived, not stored: the
    /// lasting state of every idle client is kept small).
    fn latency(&self) -> Option<&'d LatencyWatch> {
        latency_watch(self.downstream, &self.config)
    }

    /// Arms `client.idle_timeout` and `client.max_age` if they are set (once each).
    fn arm_timers(&mut self) {
        let idle = self.config.clocks.idle;
        if !idle.is_zero() && !self.idle_timer.is_made() {
            self.idle_timer.reset(self.last_activity + idle);
        }
        if !self.config.clocks.max_age.is_zero() && !self.aged && !self.age_timer.is_made() {
            self.age_timer
                .reset(self.connected_at + self.config.clocks.max_age);
        }
    }

    /// Nothing owed or buffered: may the client be closed without losing or breaking anything
    /// (no transaction or WATCH open)?
    fn may_close_now(&self) -> bool {
        self.input.is_empty()
            && self.out.is_empty()
            && !self.state.tx.is_open()
            && self.state.tx.watched_slot().is_none()
    }

    /// A safe point reached while `max_age` or the latency watch wants the client closed.
    fn closes_at_safe_point(&self) -> bool {
        if self.aged {
            self.downstream.client_metrics.closed_max_age.inc();
            tracing::debug!(client = self.state.id, "closing client at client.max_age");
            return true;
        }
        if self.close_when_safe {
            self.downstream.client_metrics.clients_closed_slow().inc();
            tracing::debug!(
                client = self.state.id,
                "closing idle client: latency above baseline"
            );
            return true;
        }
        false
    }

    /// Waits, holding no buffer, until the client sends something, or until it is to be closed.
    /// A poll of its own rather than a `select!`: the idle wait is part of every idle client's
    /// state, and this keeps it to one pointer.
    async fn wait_for_request(&mut self) -> Wake {
        poll_fn(|cx| self.poll_idle(cx)).await
    }

    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<Wake> {
        loop {
            self.reload_if_changed();
            if self.may_close_now() && self.closes_at_safe_point() {
                return Poll::Ready(Wake::Close);
            }
            self.arm_timers();
            match self.input.poll_read_from(&mut self.stream.reader(), cx) {
                Poll::Ready(Ok(0) | Err(_)) => return Poll::Ready(Wake::Close),
                Poll::Ready(Ok(n)) => {
                    self.downstream
                        .client_metrics
                        .bytes_received
                        .inc_by(n as u64);
                    self.state.note_read(n);
                    self.last_activity = Instant::now();
                    return Poll::Ready(Wake::Request);
                }
                Poll::Pending => {}
            }
            let idle = self.config.clocks.idle;
            if !idle.is_zero() && self.idle_timer.poll_fired(cx).is_ready() {
                // Re-armed from the last activity only when it fires, not on every read.
                if self.last_activity.elapsed() >= idle {
                    tracing::debug!(client = self.state.id, "closing idle client");
                    return Poll::Ready(Wake::Close);
                }
                self.idle_timer.reset(self.last_activity + idle);
                continue;
            }
            if !self.config.clocks.max_age.is_zero()
                && !self.aged
                && self.age_timer.poll_fired(cx).is_ready()
            {
                self.aged = true;
                continue;
            }
            if !self.handing_over && self.drain.poll_started(cx).is_ready() {
                return Poll::Ready(Wake::Close);
            }
            if super::tracking::poll_ready(&self.state, cx).is_ready() {
                // Invalidations to write: the busy loop writes them.
                return Poll::Ready(Wake::Request);
            }
            if let Poll::Ready(slow) = self.slow.poll_changed(cx) {
                self.close_when_safe = slow;
                continue;
            }
            return Poll::Pending;
        }
    }

    /// Writes what the socket takes of `out` right now, without waiting: whether it took
    /// something; `Err` when the client is gone.
    fn write_now(&mut self) -> Result<bool, ()> {
        match self.stream.writer().try_write(&self.out[..]) {
            Some(Ok(n)) if n > 0 => {
                self.downstream.client_metrics.bytes_sent.inc_by(n as u64);
                self.state.note_written(n);
                self.out.advance(n);
                Ok(true)
            }
            Some(_) => Err(()),
            None => Ok(false),
        }
    }

    /// Ends the session with nothing owed: the client sees the connection close.
    async fn close(&mut self) {
        let _ = self.stream.writer().shutdown().await;
    }
}

/// The latency watch, when `client.close_idle_when_slow` is on.
fn latency_watch<'d>(downstream: &'d Downstream, config: &ClientRules) -> Option<&'d LatencyWatch> {
    config
        .close_idle_when_slow
        .then_some(&*downstream.crowd.latency)
}

#[cfg(test)]
mod tests;
