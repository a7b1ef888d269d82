//! Hedged reads (`router.hedge_after`): a read that has not been answered after `hedge_after` is
//! sent to a second node of its shard as well, and the first good reply wins. This is also how a
//! read that times out on one replica is retried on another without waiting for the deadline.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use super::command::{Candidate, ForwardedCommand, Outcome};
use super::redirect::{classify, Verdict};
use super::was_tried;
use super::Forwarder;
use crate::router::RouterConfig;
use crate::upstream::{Node, Reply};

impl Forwarder {
    /// True when `command` is a read that may be hedged (opt-in: `hedge_after` > 0 and a read
    /// policy that uses replicas). Hedged reads cost a boxed future each; the others, nothing.
    pub(super) fn hedges(config: &RouterConfig, command: &ForwardedCommand) -> bool {
        !command.write && Forwarder::hedges_reads(config)
    }

    /// True when reads are hedged at all (`router.hedge_after` with a read policy that uses
    /// replicas).
    pub(in crate::router) fn hedges_reads(config: &RouterConfig) -> bool {
        !config.hedge_after.is_zero() && config.read_policy.uses_replicas()
    }

    /// Waits for `first` (already queued on `node`); after `hedge_after` sends the read to a
    /// second node and takes whichever good reply comes first. Failures and redirects go on
    /// through [`Forwarder::finish`], with the nodes that failed marked as tried.
    pub(super) async fn hedged(
        &self,
        command: ForwardedCommand,
        node: Arc<Node>,
        mut first: Reply,
    ) -> Bytes {
        let hedge_at = (Instant::now() + self.core.hedge_after()).min(command.deadline);
        tokio::select! {
            outcome = &mut first => return self.finish(command, Some((node, outcome)), Vec::new()).await,
            () = tokio::time::sleep_until(hedge_at) => {}
        }
        let tried = vec![node.clone()];
        let other = match self.candidate(&command.target, command.slot, false, &tried) {
            Candidate::Node(other) if !was_tried(&other, &tried) => other,
            // Nobody else to ask: keep waiting for the first node.
            _ => {
                return match tokio::time::timeout_at(command.deadline, first).await {
                    Ok(outcome) => {
                        self.finish(command, Some((node, outcome)), Vec::new())
                            .await
                    }
                    Err(_elapsed) => self.node_timed_out(&node),
                }
            }
        };
        self.core.counts.hedge();
        let mut second = other.send(command.payload.clone(), false, command.lane);
        let deadline = tokio::time::sleep_until(command.deadline);
        tokio::pin!(deadline);
        let mut first_failed: Option<Outcome> = None;
        let mut second_failed: Option<Outcome> = None;
        loop {
            tokio::select! {
                outcome = &mut first, if first_failed.is_none() => {
                    if is_good(&outcome) {
                        if second_failed.is_none() {
                            watch_abandoned(other, second, command.deadline);
                        }
                        // A replica's "no such key" is still confirmed by the primary.
                        return self.finish(command, Some((node, outcome)), Vec::new()).await;
                    }
                    first_failed = Some(outcome);
                }
                outcome = &mut second, if second_failed.is_none() => {
                    if is_good(&outcome) {
                        if first_failed.is_none() {
                            watch_abandoned(node, first, command.deadline);
                        }
                        return self.finish(command, Some((other, outcome)), Vec::new()).await;
                    }
                    second_failed = Some(outcome);
                }
                () = &mut deadline => {
                    let slow = if first_failed.is_none() { &node } else { &other };
                    return self.node_timed_out(slow);
                }
            }
            if first_failed.is_some() {
                if let Some(last) = second_failed.take() {
                    // Both failed: the usual redirect/retry rules, the first node marked as tried.
                    return self.finish(command, Some((other, last)), tried).await;
                }
            }
        }
    }
}

/// The losing attempt of a hedged read still counts for its node's health: if it is not
/// answered by the command's deadline, that is a timeout like any other (otherwise a hung node
/// whose reads are always hedged away would never be ejected, and every read of its shard would
/// wait `hedge_after` for as long as it hangs). Its reply is dropped either way; a late answer
/// resets the failure streak on the connection as usual.
fn watch_abandoned(node: Arc<Node>, reply: Reply, deadline: Instant) {
    tokio::spawn(async move {
        if tokio::time::timeout_at(deadline, reply).await.is_err() {
            node.health().record_failure("command timed out");
        }
    });
}

/// A reply the client can have as it is (not MOVED/ASK/transient, not a connection error).
fn is_good(outcome: &Outcome) -> bool {
    matches!(outcome, Ok(reply) if classify(reply) == Verdict::Done)
}
