//! Sending a planned command to a node and getting the client its final reply: follows MOVED and
//! ASK, waits for a slot owner, and retries what is safe to retry, all within `op_timeout`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::redirect::{classify, Verdict};
use super::reply::{error_with_prefix, redcar_error};
use super::Router;
use crate::upstream::{Node, UpstreamError};

/// Where the next attempt goes.
enum Target {
    /// The slot's owner in the current map.
    Slot(u16),
    /// Any primary.
    AnyPrimary,
    /// A node named by a redirect; `asking` for ASK.
    Redirected { node: Arc<Node>, asking: bool },
}

impl Router {
    /// Forwards `payload` (one encoded command) to the owner of `slot` (`None`: any primary) and
    /// returns the reply frame for the client. Never returns MOVED or ASK.
    pub async fn forward(&self, payload: Bytes, slot: Option<u16>, write: bool) -> Bytes {
        let deadline = Instant::now() + self.config.op_timeout;
        let mut target = slot.map_or(Target::AnyPrimary, Target::Slot);
        let mut redirects = 0;
        let mut attempt: u32 = 0;
        loop {
            let (node, asking) = match self.resolve(&target, deadline).await {
                Ok(found) => found,
                Err(reply) => return reply,
            };
            let outcome = tokio::time::timeout_at(deadline, node.call(payload.clone(), asking)).await;
            let error = match outcome {
                Err(_elapsed) => return self.timed_out(&node),
                Ok(Ok(reply)) => match classify(&reply) {
                    Verdict::Done => return reply,
                    Verdict::Moved(addr) | Verdict::Ask(addr) if redirects >= self.config.max_redirects => {
                        return redcar_error(format_args!(
                            "gave up after {redirects} redirects (last to {addr})"
                        ));
                    }
                    Verdict::Moved(addr) => {
                        redirects += 1;
                        self.cluster.request_refresh();
                        target = Target::Redirected { node: self.upstreams.node(addr), asking: false };
                        continue;
                    }
                    Verdict::Ask(addr) => {
                        redirects += 1;
                        target = Target::Redirected { node: self.upstreams.node(addr), asking: true };
                        continue;
                    }
                    // The node did not run the command: wait a little and try again.
                    Verdict::Transient => RetryCause::Reply(reply),
                },
                Ok(Err(e)) if e.never_sent() || !write => {
                    self.cluster.request_refresh();
                    RetryCause::Upstream(e)
                }
                Ok(Err(e)) => return lost_write(&e),
            };
            attempt += 1;
            if !self.pause_before_retry(attempt, deadline).await {
                return error.into_reply();
            }
            // A retry goes back to the slot's current owner, which may have changed.
            if let Target::Redirected { .. } = target {
                target = slot.map_or(Target::AnyPrimary, Target::Slot);
            }
        }
    }

    /// Finds the node for `target`, waiting (within the deadline) for a map that has an owner.
    async fn resolve(&self, target: &Target, deadline: Instant) -> Result<(Arc<Node>, bool), Bytes> {
        let slot = match target {
            Target::Redirected { node, asking } => return Ok((node.clone(), *asking)),
            Target::Slot(slot) => Some(*slot),
            Target::AnyPrimary => None,
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
                    None => redcar_error("no cluster topology known yet (are the seed nodes reachable?)"),
                });
            }
        }
    }

    /// Sleeps before retry `attempt`; false when the deadline leaves no time for another try.
    async fn pause_before_retry(&self, attempt: u32, deadline: Instant) -> bool {
        let base = self.config.retry_backoff;
        let pause = base.saturating_mul(1 << attempt.min(4)).min(Duration::from_millis(500));
        let wake = Instant::now() + pause;
        if wake >= deadline {
            return false;
        }
        tokio::time::sleep_until(wake).await;
        true
    }

    fn timed_out(&self, node: &Node) -> Bytes {
        redcar_error(format_args!(
            "timed out after {:?} waiting for {}",
            self.config.op_timeout,
            node.addr()
        ))
    }
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
fn lost_write(error: &UpstreamError) -> Bytes {
    redcar_error(format_args!(
        "{error}; the write may have been applied, so it was not retried"
    ))
}
