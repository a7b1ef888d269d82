//! One forwarded command as the session holds it: a cheap handle on the fast path (queued on a
//! node, waiting for its reply) that turns into a boxed future only when the reply asks for more
//! work (MOVED, ASK, retry).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::time::Instant;

use super::forward::Command;
use super::redirect::{classify, Verdict};
use super::Router;
use crate::upstream::{Node, Queued};

/// The future of one command's reply. Resolves to the bytes to send to the client.
pub struct Call<'r> {
    state: State<'r>,
}

enum State<'r> {
    /// Known already (local answers, refusals); `None` once taken.
    Ready(Option<Bytes>),
    /// Queued on `node`; most commands finish here with no allocation beyond the reply channel.
    Sent {
        router: &'r Router,
        node: Arc<Node>,
        reply: Queued,
        command: Command,
    },
    /// Redirects, retries, waiting for a slot owner.
    Slow(Pin<Box<dyn Future<Output = Bytes> + Send + 'r>>),
}

impl<'r> Call<'r> {
    /// A call whose reply is already known.
    pub fn ready(reply: Bytes) -> Call<'r> {
        Call {
            state: State::Ready(Some(reply)),
        }
    }

    pub(super) fn sent(
        router: &'r Router,
        node: Arc<Node>,
        reply: Queued,
        command: Command,
    ) -> Call<'r> {
        Call {
            state: State::Sent {
                router,
                node,
                reply,
                command,
            },
        }
    }

    pub(super) fn slow(future: impl Future<Output = Bytes> + Send + 'r) -> Call<'r> {
        Call {
            state: State::Slow(Box::pin(future)),
        }
    }

    /// True when the reply is already known (no node involved).
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready(_))
    }

    /// When a call still waiting on its first node must give up. The session keeps one timer for
    /// its oldest call instead of one per command; slow calls keep their own deadlines.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.state {
            State::Sent { command, .. } => Some(command.deadline),
            _ => None,
        }
    }

    /// The node a call waiting on its first attempt was sent to (for the slow log).
    pub fn node(&self) -> Option<&str> {
        match &self.state {
            State::Sent { node, .. } => Some(node.addr()),
            _ => None,
        }
    }

    /// Awaits the reply inside a multi-step future, where the session's timer does not reach: a
    /// call still waiting on its first node gives up at its own deadline; redirected or retried
    /// calls are bounded by the same deadline inside [`Router::finish`].
    pub(super) async fn settle(mut self) -> Bytes {
        let Some(deadline) = self.deadline() else {
            return self.await;
        };
        match tokio::time::timeout_at(deadline, &mut self).await {
            Ok(reply) => reply,
            Err(_elapsed) => self
                .expire()
                .unwrap_or_else(|| super::reply::redcar_error("timed out waiting for a node")),
        }
    }

    /// Gives up on a call whose deadline passed: its reply, if it ever comes, is dropped.
    pub fn expire(&mut self) -> Option<Bytes> {
        match &self.state {
            State::Sent {
                router,
                node,
                command,
                ..
            } if command.deadline <= Instant::now() => Some(router.node_timed_out(node)),
            _ => None,
        }
    }
}

impl Future for Call<'_> {
    type Output = Bytes;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Bytes> {
        loop {
            match &mut self.state {
                State::Ready(reply) => return Poll::Ready(reply.take().unwrap_or_default()),
                State::Slow(future) => return future.as_mut().poll(cx),
                State::Sent { reply, node, .. } => {
                    let outcome = match reply.poll_from(cx, node) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(bytes)) if classify(&bytes) == Verdict::Done => {
                            return Poll::Ready(bytes)
                        }
                        Poll::Ready(outcome) => outcome,
                    };
                    let State::Sent {
                        router,
                        command,
                        node,
                        ..
                    } = std::mem::replace(&mut self.state, State::Ready(None))
                    else {
                        unreachable!("state was Sent");
                    };
                    let first = Some((node, outcome));
                    self.state = State::Slow(Box::pin(router.finish(command, first, Vec::new())));
                }
            }
        }
    }
}
