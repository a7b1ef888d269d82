//! One forwarded command as the session holds it: a cheap handle on the fast path (queued on a
//! node, waiting for its reply) that turns into a boxed future only when the reply asks for more
//! work (MOVED, ASK, retry).
//!
//! Why not just a boxed future: most commands are answered by the first node they are sent to, and
//! boxing a future per command costs an allocation and an indirect call on the hottest path. So a
//! call starts as plain data (the node, the reply handle, the command) and only becomes a boxed
//! future when the first reply asks for more. What holds: a call resolves exactly once, to the
//! bytes the client gets; a call whose deadline passed is resolved by [`Call::expire`] with a
//! timeout error naming the node, and its reply, if it still comes, is dropped (an inboxed call
//! tells the inbox to forget its number).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::time::Instant;

use super::command::{ForwardedCommand, Outcome};
use super::redirect::{classify, Verdict};
use super::Forwarder;
use crate::router::reply::redcar_error;
use crate::upstream::{Inbox, Node, Queued};

/// The future of one command's reply. Resolves to the bytes to send to the client.
pub(crate) struct Call<'r> {
    /// Where the call is in its life; it only moves forward (first attempt, then slow, then done).
    state: CallState<'r>,
}

/// The stages of a call.
enum CallState<'r> {
    /// Known already (local answers, refusals); `None` once taken.
    Ready(Option<Bytes>),
    /// Queued on `node`; most commands finish here with no allocation beyond the reply channel.
    /// `primary`: `node` was its shard's primary when picked (see [`Call::replica_miss`]).
    Sent {
        forwarder: &'r Forwarder,
        /// Where the payload was queued (named in timeouts and the slow log).
        node: Arc<Node>,
        primary: bool,
        /// The reply channel of the queued payload.
        reply: Queued,
        /// The command, kept for a retry or a redirect (payload, slot, deadline).
        command: ForwardedCommand,
    },
    /// Queued on `node`, its reply going to the session's [`Inbox`] as number `seq`: the
    /// session's own commands, polled with that inbox ([`Call::poll_in`]).
    Inboxed {
        forwarder: &'r Forwarder,
        node: Arc<Node>,
        primary: bool,
        seq: u64,
        command: ForwardedCommand,
    },
    /// Redirects, retries, waiting for a slot owner.
    Slow(Pin<Box<dyn Future<Output = Bytes> + Send + 'r>>),
}

impl<'r> Call<'r> {
    /// A call whose reply is already known.
    pub(crate) fn ready(reply: Bytes) -> Call<'r> {
        Call {
            state: CallState::Ready(Some(reply)),
        }
    }

    /// `primary`: `node` is the shard's primary in the map it was picked from (`false` when
    /// not known: a nil reply is then checked against the map).
    pub(super) fn sent(
        forwarder: &'r Forwarder,
        node: Arc<Node>,
        primary: bool,
        reply: Queued,
        command: ForwardedCommand,
    ) -> Call<'r> {
        Call {
            state: CallState::Sent {
                forwarder,
                node,
                primary,
                reply,
                command,
            },
        }
    }

    /// For the session's own commands: the reply comes through its inbox, one lock per read for all
    /// of the session's replies instead of a channel per command.
    pub(super) fn inboxed(
        forwarder: &'r Forwarder,
        node: Arc<Node>,
        primary: bool,
        seq: u64,
        command: ForwardedCommand,
    ) -> Call<'r> {
        Call {
            state: CallState::Inboxed {
                forwarder,
                node,
                primary,
                seq,
                command,
            },
        }
    }

    /// Any work that needs more than one step (fan-outs, transactions, scripts, a first attempt
    /// that asked for more). Boxed once; cheap next to what such calls do anyway.
    pub(crate) fn slow(future: impl Future<Output = Bytes> + Send + 'r) -> Call<'r> {
        Call {
            state: CallState::Slow(Box::pin(future)),
        }
    }

    /// True when the reply is already known (no node involved).
    pub(crate) fn is_ready(&self) -> bool {
        matches!(self.state, CallState::Ready(_))
    }

    /// When a call still waiting on its first node must give up. The session keeps one timer for
    /// its oldest call instead of one per command; slow calls keep their own deadlines.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match &self.state {
            CallState::Sent { command, .. } | CallState::Inboxed { command, .. } => {
                Some(command.deadline)
            }
            _ => None,
        }
    }

    /// The node a call waiting on its first attempt was sent to (for the slow log).
    pub(crate) fn node(&self) -> Option<&str> {
        match &self.state {
            CallState::Sent { node, .. } | CallState::Inboxed { node, .. } => Some(node.addr()),
            _ => None,
        }
    }

    /// Awaits the reply inside a multi-step future, where the session's timer does not reach: a
    /// call still waiting on its first node gives up at its own deadline; redirected or retried
    /// calls are bounded by the same deadline inside [`Forwarder::finish`].
    pub(in crate::router) async fn settle(mut self) -> Bytes {
        let Some(deadline) = self.deadline() else {
            return self.await;
        };
        match tokio::time::timeout_at(deadline, &mut self).await {
            Ok(reply) => reply,
            Err(_elapsed) => self
                .expire(None)
                .unwrap_or_else(|| redcar_error("timed out waiting for a node")),
        }
    }

    /// [`settle`](Self::settle) for a call made without an inbox, and the node that gave the
    /// reply when it was the first attempt's final answer (no redirect, retry or time-out):
    /// only such a reply can be matched to what that node tracks (the near cache).
    pub(crate) async fn settle_first(mut self) -> (Bytes, Option<Arc<Node>>) {
        let Some(deadline) = self.deadline() else {
            return (self.await, None);
        };
        let reply = match tokio::time::timeout_at(deadline, &mut self).await {
            Ok(reply) => reply,
            Err(_elapsed) => {
                let reply = self
                    .expire(None)
                    .unwrap_or_else(|| redcar_error("timed out waiting for a node"));
                return (reply, None);
            }
        };
        match self.state {
            CallState::Sent { node, .. } => (reply, Some(node)),
            _ => (reply, None),
        }
    }

    /// Gives up on a call whose deadline passed: its reply, if it ever comes, is dropped.
    /// `inbox`: the session's, for calls queued into it.
    pub(crate) fn expire(&mut self, inbox: Option<&mut Inbox>) -> Option<Bytes> {
        match &self.state {
            CallState::Sent {
                forwarder,
                node,
                command,
                ..
            } if command.deadline <= Instant::now() => Some(forwarder.node_timed_out(node)),
            CallState::Inboxed {
                forwarder,
                node,
                seq,
                command,
                ..
            } if command.deadline <= Instant::now() => {
                if let Some(inbox) = inbox {
                    inbox.forget(*seq);
                }
                Some(forwarder.node_timed_out(node))
            }
            _ => None,
        }
    }

    /// Polls the call; `inbox` is the session's, which calls queued into it need (any other
    /// caller passes `None`, as `Future::poll` does).
    pub(crate) fn poll_in(
        &mut self,
        cx: &mut Context<'_>,
        inbox: Option<&mut Inbox>,
    ) -> Poll<Bytes> {
        self.poll_inner(cx, inbox, true)
    }

    /// The reply if it is here now (nothing is woken later).
    ///
    /// Never registers a waker: for a session checking, after a read, which replies are already in.
    pub(crate) fn try_now(&mut self, inbox: Option<&mut Inbox>) -> Option<Bytes> {
        match self.poll_inner(&mut Context::from_waker(Waker::noop()), inbox, false) {
            Poll::Ready(reply) => Some(reply),
            Poll::Pending => None,
        }
    }

    /// `wait`: leave the task's waker with the inbox (a poll); otherwise only look (`try_now`).
    fn poll_inner(
        &mut self,
        cx: &mut Context<'_>,
        mut inbox: Option<&mut Inbox>,
        wait: bool,
    ) -> Poll<Bytes> {
        loop {
            let outcome = match &mut self.state {
                CallState::Ready(reply) => return Poll::Ready(reply.take().unwrap_or_default()),
                CallState::Slow(future) => return future.as_mut().poll(cx),
                CallState::Sent { reply, node, .. } => match reply.poll_from(cx, node) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(outcome) => outcome,
                },
                CallState::Inboxed { node, seq, .. } => {
                    let Some(inbox) = inbox.as_deref_mut() else {
                        // Only a session creates these, and it always passes its inbox.
                        debug_assert!(false, "an inboxed call polled without its inbox");
                        return Poll::Ready(redcar_error(
                            "internal error: reply polled without its inbox",
                        ));
                    };
                    let delivered = if wait {
                        inbox.poll_reply(*seq, cx)
                    } else {
                        inbox.try_reply(*seq).map_or(Poll::Pending, Poll::Ready)
                    };
                    match delivered {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(delivered) => {
                            delivered.unwrap_or_else(|_closed| Err(node.closed_without_reply()))
                        }
                    }
                }
            };
            // Done: the state stays as it is, so the session can still name the node (slow
            // log); the call is not polled again.
            if let Ok(bytes) = &outcome {
                if classify(bytes) == Verdict::Done && !self.replica_miss(bytes) {
                    return Poll::Ready(outcome.unwrap_or_default());
                }
            }
            self.after_first_attempt(outcome);
        }
    }

    /// A replica's "no such key" that the slot's primary should confirm
    /// (`router.replica_miss_check`): [`Forwarder::finish`] asks it. A reply from the node
    /// picked as the primary is final without a look at it or the map (with the default read
    /// policy every read goes to the primary): a failover between sending and the reply does not
    /// turn that primary's answer into a replica's.
    fn replica_miss(&self, reply: &[u8]) -> bool {
        match &self.state {
            CallState::Sent {
                forwarder,
                node,
                primary: false,
                command,
                ..
            }
            | CallState::Inboxed {
                forwarder,
                node,
                primary: false,
                command,
                ..
            } => forwarder.replica_miss(command, node, reply).is_some(),
            _ => false,
        }
    }

    /// The first attempt's reply asks for more (MOVED, ASK, an error worth a retry): the rest
    /// runs as a boxed future.
    fn after_first_attempt(&mut self, outcome: Outcome) {
        match std::mem::replace(&mut self.state, CallState::Ready(None)) {
            CallState::Sent {
                forwarder,
                command,
                node,
                ..
            }
            | CallState::Inboxed {
                forwarder,
                command,
                node,
                ..
            } => {
                let first = Some((node, outcome));
                self.state =
                    CallState::Slow(Box::pin(forwarder.finish(command, first, Vec::new())));
            }
            other => self.state = other,
        }
    }
}

impl Future for Call<'_> {
    type Output = Bytes;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Bytes> {
        self.poll_in(cx, None)
    }
}
