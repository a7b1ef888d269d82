//! Subscribe mode's loop: the client's commands one at a time, the frames the nodes push, and
//! the writes back, until the client leaves subscribe mode (or, in an upgrade in place, the
//! process: handover.rs).
//!
//! Why a loop of its own: in subscribe mode the client receives frames it did not ask for
//! (messages) between the replies to its commands, and one command can owe confirmations from
//! several nodes (a SUBSCRIBE of channels held on different connections). The loop keeps one rule
//! so that two commands' confirmations never interleave: the next command is read only once
//! every confirmation of the previous one has gone out. Output is bounded by
//! `client.max_reply_bytes`: past it the loop stops taking the nodes' pushes until the client
//! reads, and the bounded push queue then holds the subscription connections back, rather than
//! redcar buffering without limit for a slow subscriber.

use std::ops::ControlFlow;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::super::client_state::ClientState;
use super::super::drain::DrainSignal;
use super::super::Downstream;
use super::conn::{Pushed, PUSH_QUEUE};
use super::handover::{Leave, Phase, Rejoin};
use super::{Control, Left, PubsubMetrics, SubscribeMode};
use crate::protocol::{parse_request, Limits, Request};

/// Keep reading the client only this far ahead while a command's confirmations are owed.
const READ_AHEAD: usize = 64 * 1024;

/// How subscribe mode starts.
///
/// Entered from a session when a subscription command arrives, or from an adopted client's record.
pub(crate) enum Start {
    /// With a subscription command.
    Command(Request),
    /// With the subscriptions of a client the previous process handed over.
    Rejoin(Rejoin),
}

/// Runs subscribe mode from `start` until the client leaves it. `pick` spreads clients'
/// cluster-wide subscriptions over the primaries; `leave` sends the client to the process
/// taking over, in an upgrade.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve<R, W>(
    downstream: &Downstream,
    start: Start,
    reader: &mut R,
    writer: &mut W,
    input: &mut BytesMut,
    out: &mut BytesMut,
    limits: &Limits,
    max_reply_bytes: usize,
    drain: &mut DrainSignal<'_>,
    pick: usize,
    state: &ClientState,
    leave: Leave<'_>,
) -> Left
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (pushed, from_nodes) = mpsc::channel(PUSH_QUEUE);
    let metrics = downstream.metrics.group::<PubsubMetrics>();
    let mut mode = SubscribeMode::new(&downstream.router, pick, pushed, state, metrics);
    let (control, phase) = match start {
        Start::Command(first) => (
            mode.command(first, out, &downstream.metrics).await,
            Phase::Serving,
        ),
        Start::Rejoin(rejoin) => {
            mode.rejoin(rejoin.subscriptions);
            let released = rejoin.released;
            (
                Control::Go,
                Phase::Held {
                    released,
                    told: false,
                },
            )
        }
    };
    let mut subscribed = Subscribed {
        mode,
        phase,
        leave,
        from_nodes,
        tick: tokio::time::interval(Duration::from_millis(100)),
        reader,
        writer,
        input,
        out,
        limits,
        downstream,
        max_reply_bytes,
        drain,
    };
    subscribed.run(control).await
}

/// Subscribe mode's loop and what it works with: the subscriptions, the frames the node
/// connections push, and the session's connection and buffers. One method per thing that can
/// happen next, so the loop itself reads as the order in which they are looked at.
struct Subscribed<'a, 'd, R, W> {
    /// The subscriptions and what each node connection owes.
    mode: SubscribeMode<'a>,
    /// Where an upgrade in place stands (handover.rs).
    phase: Phase,
    /// How the client leaves for the next process in an upgrade in place.
    leave: Leave<'a>,
    /// Frames the subscription connections pushed (messages and confirmations), bounded
    /// (`PUSH_QUEUE`).
    from_nodes: mpsc::Receiver<Pushed>,
    /// Paces retrying shard channels whose slot moved or whose connection was lost
    /// (`SubscribeMode::orphans`), and channels and patterns whose connection was lost.
    tick: tokio::time::Interval,
    /// The client's socket, read side.
    reader: &'a mut R,
    /// The client's socket, write side.
    writer: &'a mut W,
    /// The client's unparsed input.
    input: &'a mut BytesMut,
    /// Frames for the client not yet written.
    out: &'a mut BytesMut,
    /// Parse limits for the client's requests.
    limits: &'a Limits,
    /// What every session shares (metrics, the drain, the hand-over).
    downstream: &'a Downstream,
    /// `client.max_reply_bytes`: past it, nodes' pushes wait until the client reads.
    max_reply_bytes: usize,
    /// Tells the loop that the proxy is draining.
    drain: &'a mut DrainSignal<'d>,
}

impl<R, W> Subscribed<'_, '_, R, W>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    /// Until the client leaves subscribe mode; `control` is what its first command asked for.
    async fn run(&mut self, mut control: Control) -> Left {
        loop {
            match control {
                Control::Go => {}
                Control::Quit => return Left::Close,
                Control::Reset => return Left::Reset,
            }
            if self.mode.redirect.is_some() {
                self.mode.follow_redirect(self.out).await;
            }
            if self.mode.global_due() {
                self.mode.resubscribe_global().await;
            }
            if let Some(left) = self.upgrade_step() {
                return left;
            }
            // The next command only once the previous one is fully answered: the replies of
            // several nodes then cannot interleave with another command's.
            if self.mode.awaiting == 0 && self.phase.serves_commands() {
                if self.mode.is_empty() {
                    return Left::Normal;
                }
                match self.next_request() {
                    Ok(Some(request)) => {
                        control = self
                            .mode
                            .command(request, self.out, &self.downstream.metrics)
                            .await;
                        continue;
                    }
                    Ok(None) => {}
                    Err(left) => return left,
                }
            }
            control = match self.next_event().await {
                ControlFlow::Continue(control) => control,
                ControlFlow::Break(left) => return left,
            };
        }
    }

    /// An upgrade's next step, when one is due (handover.rs); `Some` when subscribe mode ends.
    fn upgrade_step(&mut self) -> Option<Left> {
        match &mut self.phase {
            // No subscription left: back to the session, which leaves as any client does.
            Phase::Leaving if self.mode.at_safe_point() && self.mode.is_empty() => {
                return Some(Left::Normal);
            }
            Phase::Leaving if self.mode.at_safe_point() => {
                match (self.leave)(self.mode.subscriptions(), &self.input[..]) {
                    Some(subscribed) => self.phase = Phase::Handed(subscribed),
                    None => return Some(Left::Close),
                }
            }
            Phase::LettingGo if self.out.is_empty() => {
                self.downstream.exits.handover.released(self.mode.state.id);
                return Some(Left::Moved);
            }
            Phase::Held { told, .. } if !*told && self.mode.settled() => {
                self.downstream
                    .exits
                    .arrivals
                    .subscribed(self.mode.state.id);
                *told = true;
            }
            _ => {}
        }
        None
    }

    /// The drain started: during an upgrade whose new process takes subscribers, leave at the
    /// next safe point; otherwise close (counted when an upgrade could not take the client).
    fn drained(&mut self) -> ControlFlow<Left, Control> {
        let handover = &self.downstream.exits.handover;
        if handover.is_active() && handover.moves_subscribers() {
            self.phase = Phase::Leaving;
            return ControlFlow::Continue(Control::Go);
        }
        if handover.is_active() {
            handover.closed("subscribed");
        }
        ControlFlow::Break(Left::Close)
    }

    /// The client's next command, if all of it has arrived; a protocol error is answered and
    /// closes the connection, as outside subscribe mode.
    fn next_request(&mut self) -> Result<Option<Request>, Left> {
        parse_request(self.input, self.limits).map_err(|e| {
            let reason = e.to_string().replace(['\r', '\n'], " ");
            self.out
                .extend_from_slice(format!("-ERR Protocol error: {reason}\r\n").as_bytes());
            Left::Close
        })
    }

    /// Waits for whichever comes first (in this order when several are ready: writing to the
    /// client, a node's push, the client's input, orphans to adopt, invalidations, shutdown)
    /// and handles it; `Break` when that ends subscribe mode.
    async fn next_event(&mut self) -> ControlFlow<Left, Control> {
        let state = self.mode.state;
        tokio::select! {
            biased;
            wrote = self.writer.write(self.out), if !self.out.is_empty() && self.phase.writes() => {
                self.wrote(wrote)
            }
            pushed = self.from_nodes.recv(),
                if self.out.len() < self.max_reply_bytes && self.phase.takes_pushes() => {
                match pushed {
                    Some(pushed) => ControlFlow::Continue(self.mode.pushed(pushed, self.out)),
                    None => ControlFlow::Continue(Control::Go),
                }
            }
            read = self.reader.read_buf(self.input),
                if self.input.len() < READ_AHEAD && self.phase.serves_commands() => {
                self.read(read)
            }
            woke = self.phase.wait(), if self.phase.waits() => {
                self.phase.after(woke);
                ControlFlow::Continue(Control::Go)
            }
            _ = self.tick.tick(), if !self.mode.orphans.is_empty() || self.mode.global_lost() => {
                self.mode.adopt_orphans().await;
                ControlFlow::Continue(Control::Go)
            }
            () = super::super::tracking::ready(state), if state.tracking.is_some() => {
                // Invalidations redirected here (or this client's own, in RESP3).
                if let Some(tracking) = state.tracking.as_deref() {
                    self.out.extend_from_slice(&tracking.take_frames(state.protocol, true));
                }
                ControlFlow::Continue(Control::Go)
            }
            () = self.mode.users.retired() => {
                let (_, _, users) = self.downstream.snapshot();
                ControlFlow::Continue(self.mode.reloaded(users))
            }
            () = self.drain.started(), if self.phase.serves_commands() => self.drained(),
        }
    }

    /// Part of the replies went out; nothing written means the client went away.
    fn wrote(&mut self, wrote: std::io::Result<usize>) -> ControlFlow<Left, Control> {
        match wrote {
            Ok(n) if n > 0 => {
                self.downstream.client_metrics.bytes_sent.inc_by(n as u64);
                self.mode.state.count_sent(n);
                self.out.advance(n);
                ControlFlow::Continue(Control::Go)
            }
            _ => ControlFlow::Break(Left::Gone),
        }
    }

    /// More of the client's input arrived; none (or an error) means it went away.
    fn read(&mut self, read: std::io::Result<usize>) -> ControlFlow<Left, Control> {
        match read {
            Ok(0) | Err(_) => ControlFlow::Break(Left::Gone),
            Ok(n) => {
                self.downstream
                    .client_metrics
                    .bytes_received
                    .inc_by(n as u64);
                ControlFlow::Continue(Control::Go)
            }
        }
    }
}
