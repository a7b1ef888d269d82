//! Sending a planned command to a node and getting the client its final reply: follows MOVED and
//! ASK, waits for a slot owner, and retries what is safe to retry, all within `op_timeout`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::call::Call;
use super::redirect::{classify, Verdict};
use super::reply::{error_with_prefix, redcar_error};
use super::Router;
use crate::upstream::{Node, Reply, UpstreamError};

/// What one attempt on a node produced.
pub(super) type Outcome = Result<Bytes, UpstreamError>;

/// Where the next attempt goes.
pub(super) enum Target {
    /// The slot's owner in the current map (`None`: any primary).
    Owner(Option<u16>),
    /// A node named by a redirect; `asking` for ASK.
    Redirected { node: Arc<Node>, asking: bool },
}

/// One command on its way: what to send, where, and by when.
pub(super) struct Command {
    pub payload: Bytes,
    pub slot: Option<u16>,
    pub write: bool,
    pub lane: usize,
    pub deadline: Instant,
}

impl Router {
    /// Forwards `payload` (one encoded command) to the owner of `slot` (`None`: any primary).
    ///
    /// The first attempt is queued on the node connection *now*, before this returns, so a
    /// client's commands reach each node in the order the client sent them. The returned [`Call`]
    /// yields the reply frame for the client; it never yields MOVED or ASK. `lane` keeps one
    /// client's commands on one connection per node (see [`Node::send`]).
    pub fn forward(&self, payload: Bytes, slot: Option<u16>, write: bool, lane: usize) -> Call<'_> {
        let deadline = Instant::now() + self.config.op_timeout;
        let first = self.send_to_owner(&payload, slot, lane);
        let command = Command {
            payload,
            slot,
            write,
            lane,
            deadline,
        };
        match first {
            Some((node, reply)) => Call::sent(self, node, reply, command),
            None => Call::slow(self.finish(command, None)),
        }
    }

    /// The fast path: queue on the current owner if the map has one.
    fn send_to_owner(
        &self,
        payload: &Bytes,
        slot: Option<u16>,
        lane: usize,
    ) -> Option<(Arc<Node>, Reply)> {
        let topology = self.cluster.topology()?;
        let shard = match slot {
            Some(slot) => topology.shard(slot)?,
            None => topology.shards().first()?,
        };
        let reply = shard.primary.send(payload.clone(), false, lane);
        Some((shard.primary.clone(), reply))
    }

    /// Everything after the fast path: `first` is the outcome of the attempt already made (if
    /// any); then redirects and retries until a final reply or the deadline.
    pub(super) async fn finish(&self, command: Command, mut first: Option<Outcome>) -> Bytes {
        let mut target = Target::Owner(command.slot);
        let mut redirects = 0;
        let mut attempt: u32 = 0;
        loop {
            let outcome = match first.take() {
                Some(outcome) => outcome,
                None => {
                    let (node, asking) = match self.resolve(&target, command.deadline).await {
                        Ok(found) => found,
                        Err(reply) => return reply,
                    };
                    let reply = node.send(command.payload.clone(), asking, command.lane);
                    match tokio::time::timeout_at(command.deadline, reply).await {
                        Ok(outcome) => outcome,
                        Err(_elapsed) => return self.timed_out(&node),
                    }
                }
            };
            let error = match outcome {
                Ok(reply) => match classify(&reply) {
                    Verdict::Done => return reply,
                    Verdict::Moved(addr) | Verdict::Ask(addr)
                        if redirects >= self.config.max_redirects =>
                    {
                        return redcar_error(format_args!(
                            "gave up after {redirects} redirects (last to {addr})"
                        ));
                    }
                    Verdict::Moved(addr) => {
                        redirects += 1;
                        self.metrics.redirect("moved", addr);
                        self.cluster.request_refresh();
                        target = Target::Redirected {
                            node: self.upstreams.node(addr),
                            asking: false,
                        };
                        continue;
                    }
                    Verdict::Ask(addr) => {
                        redirects += 1;
                        self.metrics.redirect("ask", addr);
                        target = Target::Redirected {
                            node: self.upstreams.node(addr),
                            asking: true,
                        };
                        continue;
                    }
                    // The node did not run the command: wait a little and try again.
                    Verdict::Transient => RetryCause::Reply(reply),
                },
                Err(e) if e.never_sent() || !command.write => {
                    self.cluster.request_refresh();
                    RetryCause::Upstream(e)
                }
                Err(e) => return lost_write(&e),
            };
            attempt += 1;
            self.metrics.retry();
            if !pause_before_retry(self.config.retry_backoff, attempt, command.deadline).await {
                return error.into_reply();
            }
            // A retry goes back to the slot's current owner, which may have changed.
            target = Target::Owner(command.slot);
        }
    }

    /// Finds the node for `target`, waiting (within the deadline) for a map that has an owner.
    pub(super) async fn resolve(
        &self,
        target: &Target,
        deadline: Instant,
    ) -> Result<(Arc<Node>, bool), Bytes> {
        let slot = match target {
            Target::Redirected { node, asking } => return Ok((node.clone(), *asking)),
            Target::Owner(slot) => *slot,
        };
        loop {
            let seen = self.cluster.version();
            if let Some(topology) = self.cluster.topology() {
                let shard = match slot {
                    Some(slot) => topology.shard(slot),
                    None => topology.shards().first(),
                };
                if let Some(shard) = shard {
                    return Ok((shard.primary.clone(), false));
                }
            }
            self.cluster.request_refresh();
            let waited = tokio::time::timeout_at(deadline, self.cluster.changed_since(seen)).await;
            if waited.is_err() {
                return Err(match slot {
                    Some(slot) => error_with_prefix(
                        "CLUSTERDOWN ",
                        format_args!("Hash slot not served (redcar: no node owns slot {slot})"),
                    ),
                    None => redcar_error(
                        "no cluster topology known yet (are the seed nodes reachable?)",
                    ),
                });
            }
        }
    }

    pub(super) fn timed_out(&self, node: &Node) -> Bytes {
        redcar_error(format_args!(
            "timed out after {:?} waiting for {}",
            self.config.op_timeout,
            node.addr()
        ))
    }
}

/// Sleeps before retry `attempt`; false when the deadline leaves no time for another try.
pub(super) async fn pause_before_retry(base: Duration, attempt: u32, deadline: Instant) -> bool {
    let pause = base
        .saturating_mul(1 << attempt.min(4))
        .min(Duration::from_millis(500));
    let wake = Instant::now() + pause;
    if wake >= deadline {
        return false;
    }
    tokio::time::sleep_until(wake).await;
    true
}

/// Why the last attempt failed, turned into the client's reply when retries run out.
enum RetryCause {
    Reply(Bytes),
    Upstream(UpstreamError),
}

impl RetryCause {
    fn into_reply(self) -> Bytes {
        match self {
            // The node's own error (e.g. -CLUSTERDOWN) is the most precise answer.
            RetryCause::Reply(reply) => reply,
            RetryCause::Upstream(e) => redcar_error(e),
        }
    }
}

/// A write whose connection broke after sending: it may have been applied, so it is not re-sent.
pub(super) fn lost_write(error: &UpstreamError) -> Bytes {
    redcar_error(format_args!(
        "{error}; the write may have been applied, so it was not retried"
    ))
}
