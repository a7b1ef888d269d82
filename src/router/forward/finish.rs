//! After the fast path: a command's redirects (MOVED, ASK, a replica's miss confirmed by the
//! primary) and retries, until its final reply or its deadline.
//!
//! What holds: a write is retried only when it provably did not run (never sent, or refused
//! before running: TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN, NOREPLICAS, READONLY); a write
//! lost with its connection is answered with an error saying it may have run, never sent again.
//! Redirects (MOVED, ASK) and a primary's confirmation of a replica's miss are not retries: they
//! spend no budget and wait no pause, but are capped by `router.max_redirects` per attempt, so a
//! cluster bouncing a slot back and forth cannot hold a command until its deadline. Every retry
//! spends from the shared retry budget, so a failing cluster sees at most a fixed share of extra
//! traffic.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use super::command::Candidate;
use super::retry::{node_unavailable, RetryCause};
use super::was_tried;
use super::{
    classify, lost_write, pause_before_retry, AttemptTarget, ForwardedCommand, Forwarder, Outcome,
    Verdict,
};
use crate::router::reply::redcar_error;
use crate::upstream::Node;

impl Forwarder {
    /// Everything after the fast path: `first` is the attempt already made (if any) and its
    /// outcome; then redirects and retries until a final reply or the deadline. A failed node
    /// goes into `tried`, so the next attempt of a read prefers another replica, then the
    /// primary; a node is tried again only after a back-off pause.
    pub(in crate::router) async fn finish(
        &self,
        command: ForwardedCommand,
        mut first: Option<(Arc<Node>, Outcome)>,
        mut tried: Vec<Arc<Node>>,
    ) -> Bytes {
        let mut target = AttemptTarget::Owner(command.slot);
        let mut hops = Hops::default();
        let mut attempt: u32 = 0;
        loop {
            let (node, outcome) = match first.take() {
                Some(first) => first,
                None => match self.attempt(&target, &command, &tried).await {
                    Ok(sent) => sent,
                    Err(reply) => return reply,
                },
            };
            let error = match self.on_outcome(&command, node, outcome, &mut hops, &mut tried) {
                Next::Reply(reply) => return reply,
                Next::Follow(next) => {
                    target = next;
                    continue;
                }
                Next::Retry(error) => error,
            };
            attempt += 1;
            if let Err(note) = self.before_retry(&command, &error, attempt, &tried).await {
                return error.into_reply(note);
            }
            // A retry goes back to the slot's current owner, which may have changed; the
            // redirect limit is per attempt (a migration's ASK, then TRYAGAIN, repeats).
            target = AttemptTarget::Owner(command.slot);
            hops.redirects = 0;
        }
    }

    /// One more attempt of `command` at `target`, by its deadline: the node and its outcome,
    /// or the client's reply when no node can be found or the node does not answer in time.
    ///
    /// A node that does not answer by the deadline ends the command with a timeout error naming the
    /// node: the deadline is the client's, and nothing after it could still help.
    #[inline]
    async fn attempt(
        &self,
        target: &AttemptTarget,
        command: &ForwardedCommand,
        tried: &[Arc<Node>],
    ) -> Result<(Arc<Node>, Outcome), Bytes> {
        let (node, asking) = self.resolve_for(target, command, tried).await?;
        let reply = node.send(command.payload.clone(), asking, command.lane);
        match tokio::time::timeout_at(command.deadline, reply).await {
            Ok(outcome) => Ok((node, outcome)),
            Err(_elapsed) => Err(self.node_timed_out(&node)),
        }
    }

    /// What `node`'s `outcome` for `command` calls for: the client's reply, a redirect to
    /// follow (or a replica's miss to confirm with the primary), or a retry. A node that failed
    /// goes into `tried`.
    #[inline]
    fn on_outcome(
        &self,
        command: &ForwardedCommand,
        node: Arc<Node>,
        outcome: Outcome,
        hops: &mut Hops,
        tried: &mut Vec<Arc<Node>>,
    ) -> Next {
        let reply = match outcome {
            Ok(reply) => reply,
            Err(e) if e.never_sent() || !command.write => {
                self.core.state(&command.target).note_failure();
                tried.push(node);
                return Next::Retry(RetryCause::Upstream(e));
            }
            Err(e) => return Next::Reply(lost_write(&e)),
        };
        match classify(&reply) {
            Verdict::Done if !hops.miss_checked => {
                match self.replica_miss(command, &node, &reply) {
                    // Not a retry (the replica answered): no budget spent, no pause. A primary
                    // that cannot be reached leaves the replica's answer standing.
                    Some(primary) => {
                        hops.miss_checked = true;
                        self.core.counts.replica_miss_check();
                        Next::Follow(AttemptTarget::Redirected {
                            node: primary,
                            asking: false,
                        })
                    }
                    None => Next::Reply(reply),
                }
            }
            Verdict::Done => Next::Reply(reply),
            Verdict::Moved(addr) | Verdict::Ask(addr)
                if hops.redirects >= self.core.max_redirects() =>
            {
                let redirects = hops.redirects;
                Next::Reply(redcar_error(format_args!(
                    "gave up after {redirects} redirects (last to {addr})"
                )))
            }
            Verdict::Moved(addr) => {
                hops.redirects += 1;
                Next::Follow(self.follow_moved(command, addr))
            }
            Verdict::Ask(addr) => {
                hops.redirects += 1;
                Next::Follow(self.follow_ask(command, addr))
            }
            // The node did not run the command: try again a little later (or elsewhere).
            Verdict::Transient => {
                if node_unavailable(&reply) {
                    node.health()
                        .record_failure("node is loading or has no primary");
                    tried.push(node);
                }
                Next::Retry(RetryCause::Reply(reply))
            }
            // A failover demoted the node the map names as primary; the write did not run.
            // Once the map names the new primary, the retry goes there.
            Verdict::ReadOnly => {
                self.core.cluster.request_refresh();
                Next::Retry(RetryCause::Reply(reply))
            }
        }
    }

    /// MOVED: the slot has a new owner, which the map will learn at the next refresh; this
    /// command goes there now.
    ///
    /// Counts the redirect (by target) and notes it on the cluster state, where every
    /// `redirect_refresh_threshold`-th MOVED asks for the map; any migration mark on the slot is
    /// wound down, since its owner changed for good.
    #[inline]
    fn follow_moved(&self, command: &ForwardedCommand, addr: &str) -> AttemptTarget {
        self.core.redirects.redirect("moved", addr);
        let state = self.core.state(&command.target);
        state.note_redirect();
        if let Some(slot) = command.slot {
            state.migrating().note_moved(slot);
        }
        AttemptTarget::Redirected {
            node: self.core.upstreams.node(addr),
            asking: false,
        }
    }

    /// ASK: the slot is migrating and this key is already on the target, asked with ASKING.
    ///
    /// Counts the redirect and marks the slot as migrating (reads of it then go to its
    /// primary); no refresh is asked for: an ASK does not change the slot's owner.
    #[inline]
    fn follow_ask(&self, command: &ForwardedCommand, addr: &str) -> AttemptTarget {
        self.core.redirects.redirect("ask", addr);
        if let Some(slot) = command.slot {
            self.core.state(&command.target).migrating().note_ask(slot);
        }
        AttemptTarget::Redirected {
            node: self.core.upstreams.node(addr),
            asking: true,
        }
    }

    /// Whether retry `attempt` may go ahead: it spends from the retry budget and, unless another
    /// node can take it at once, waits a back-off pause. `Err`: the note for the client's error
    /// when it may not.
    #[inline]
    async fn before_retry(
        &self,
        command: &ForwardedCommand,
        error: &RetryCause,
        attempt: u32,
        tried: &[Arc<Node>],
    ) -> Result<(), &'static str> {
        if !self
            .retry_budget
            .try_spend(Instant::now(), self.core.nodes.requests_sent())
        {
            self.core.counts.retry_budget_exhausted();
            return Err(" (not retried: router.retry_budget is spent)");
        }
        self.core.counts.retry();
        // After a failure of the node itself, another replica (or the primary) is tried at
        // once; the same node, or any node after a slot-level error (TRYAGAIN, CLUSTERDOWN),
        // only after a pause.
        let fresh = error.is_node_failure()
            && matches!(
                self.candidate(&command.target, command.slot, command.write, tried),
                Candidate::Node(next) if !was_tried(&next, tried)
            );
        if !fresh && !pause_before_retry(self.core.retry_backoff(), attempt, command.deadline).await
        {
            return Err("");
        }
        Ok(())
    }
}

/// What `finish` does after an attempt.
enum Next {
    /// The client's final reply.
    Reply(Bytes),
    /// Send at once to this node (a redirect, or a primary confirming a replica's miss): not a
    /// retry, so no budget and no pause.
    Follow(AttemptTarget),
    /// The command did not run (or may be read elsewhere): retry within the budget.
    Retry(RetryCause),
}

/// The hops one attempt of `finish` has taken besides retries.
#[derive(Default)]
struct Hops {
    /// Reset after every retry.
    /// Redirects followed since the last retry.
    redirects: usize,
    /// At most one confirmation per command: the primary's answer is final.
    /// A replica's nil was already sent to the primary to confirm.
    miss_checked: bool,
}
