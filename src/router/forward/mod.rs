//! Sending a planned command to a node and getting the client its final reply: follows MOVED and
//! ASK, waits for a slot owner, and retries what is safe to retry, all within `op_timeout`.
//!
//! The single-command path, and what every other path sends through: the [`Call`] a session
//! holds (`call`), reading node errors (`redirect`), when and how long to retry (`retry`,
//! `retry_budget`), hedged reads (`hedge`), NOSCRIPT healing (`scripts`) and fault injection
//! (`fault`).

mod call;
mod command;
mod fault;
mod hedge;
mod redirect;
mod retry;
mod retry_budget;
mod scripts;

pub use call::Call;
pub(in crate::router) use command::{Command, Outcome, Target};
pub(in crate::router) use fault::Faults;
pub use fault::{validate as validate_faults, FaultRule};
pub use redirect::{classify, is_nil, Verdict};
pub(in crate::router) use retry::{lost_write, pause_before_retry};
pub(in crate::router) use retry_budget::RetryBudget;
pub use retry_budget::RetryBudgetConfig;
pub(in crate::router) use scripts::ScriptCache;

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use self::command::Candidate;
use self::retry::{node_unavailable, RetryCause};
use crate::cluster::{ClusterState, Shard};
use crate::router::reply::{error_with_prefix, redcar_error};
use crate::router::{select, ReadPolicy, RouteTarget, Router};
use crate::upstream::Lane;
use crate::upstream::{Inbox, Node};

impl Router {
    /// Forwards `payload` (one encoded command) to the owner of `slot` (`None`: any primary);
    /// reads go where `router.read_policy` says. `now` is when the command arrived (its deadline
    /// counts from it): a session starts a whole read's commands on one clock read.
    ///
    /// The first attempt is queued on the node connection *now*, before this returns, so a
    /// client's commands reach each node in the order the client sent them. The returned [`Call`]
    /// yields the reply frame for the client; it never yields MOVED or ASK. `lane` keeps one
    /// client's commands on one connection per node (see [`Node::send`]).
    ///
    /// A client session passes its `inbox`: the first attempt's reply goes there, and the call
    /// must be polled with it ([`Call::poll_in`]); other callers pass `None`.
    pub fn forward(
        &self,
        inbox: Option<&mut Inbox>,
        payload: Bytes,
        slot: Option<u16>,
        write: bool,
        lane: Lane,
        now: Instant,
    ) -> Call<'_> {
        self.forward_to(None, inbox, payload, slot, write, lane, now)
    }

    /// [`forward`](Self::forward) to a route's backend (`None`: the catch-all backend), with the
    /// reply to a session's inbox when given one.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn forward_to(
        &self,
        target: Option<Arc<RouteTarget>>,
        inbox: Option<&mut Inbox>,
        payload: Bytes,
        slot: Option<u16>,
        write: bool,
        lane: Lane,
        now: Instant,
    ) -> Call<'_> {
        // One snapshot of the reloadable settings for the whole dispatch.
        let live = self.live.load();
        let read_policy = match target.as_deref() {
            Some(RouteTarget {
                read_policy: Some(policy),
                ..
            }) => *policy,
            _ => live.config.read_policy,
        };
        let candidate = self.candidate_by(read_policy, self.state(&target), slot, write, &[]);
        let command = Command {
            payload,
            slot,
            write,
            lane,
            deadline: now + live.config.op_timeout,
            target,
        };
        match candidate {
            Candidate::Node(node) => {
                if let Some(faults) = &live.faults {
                    if let Some(picked) = faults.pick(&command.payload, node.addr()) {
                        return self.inject(picked, command, node);
                    }
                }
                let hedged = Router::hedges(&live.config, &command);
                if let (Some(inbox), false) = (inbox, hedged) {
                    return match node.queue_into(inbox, command.payload.clone(), lane) {
                        Ok(seq) => Call::inboxed(self, node, seq, command),
                        Err(never) => {
                            Call::slow(self.finish(command, Some((node, Err(never))), Vec::new()))
                        }
                    };
                }
                let reply = node.queue(command.payload.clone(), false, lane, 1);
                if hedged {
                    let reply = reply.into_reply(&node);
                    return Call::slow(self.hedged(command, node, reply));
                }
                Call::sent(self, node, reply, command)
            }
            Candidate::Unusable(reply) => Call::ready(reply),
            Candidate::NoOwner => Call::slow(self.finish(command, None, Vec::new())),
        }
    }

    /// The slot's primary when `reply`, `node`'s answer to `command`, is a replica's nil for a
    /// single-key read that the primary should confirm (`router.replica_miss_check`), unless
    /// that primary is ejected. Only nil replies get past the first test, so other replies pay
    /// one compare.
    pub(in crate::router) fn replica_miss(
        &self,
        command: &Command,
        node: &Arc<Node>,
        reply: &[u8],
    ) -> Option<Arc<Node>> {
        if !is_nil(reply)
            || command.write
            || !self
                .replica_miss_check
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return None;
        }
        let slot = command.slot?;
        let snapshot = self.state(&command.target).topology_now();
        let primary = &snapshot.as_deref()?.shard(slot)?.primary;
        (!Arc::ptr_eq(primary, node) && !primary.is_ejected()).then(|| primary.clone())
    }

    /// The node for an attempt at `slot`: the primary for writes, by read policy for reads,
    /// preferring nodes not in `tried`; never an ejected one.
    pub(super) fn candidate(
        &self,
        target: &Option<Arc<RouteTarget>>,
        slot: Option<u16>,
        write: bool,
        tried: &[Arc<Node>],
    ) -> Candidate {
        let read_policy = target
            .as_ref()
            .and_then(|t| t.read_policy)
            .unwrap_or_else(|| self.read_policy());
        self.candidate_by(read_policy, self.state(target), slot, write, tried)
    }

    /// The slot map a command goes by: its route's backend, or the catch-all one.
    pub(super) fn state<'a>(&'a self, target: &'a Option<Arc<RouteTarget>>) -> &'a ClusterState {
        target.as_ref().map_or(&self.cluster, |t| &t.state)
    }

    /// [`Router::candidate`] with the read policy already loaded (the first attempt).
    fn candidate_by(
        &self,
        read_policy: ReadPolicy,
        cluster: &ClusterState,
        slot: Option<u16>,
        write: bool,
        tried: &[Arc<Node>],
    ) -> Candidate {
        let snapshot = cluster.topology_now();
        let Some(topology) = snapshot.as_deref() else {
            return Candidate::NoOwner;
        };
        let Some(slot) = slot else {
            // Keyless commands: any primary that is not ejected.
            let shards = topology.shards();
            return match shards.iter().find(|s| !s.primary.is_ejected()) {
                Some(shard) => Candidate::Node(shard.primary.clone()),
                None if shards.is_empty() => Candidate::NoOwner,
                None => Candidate::Unusable(redcar_error(
                    "every primary is ejected after consecutive failures (upstream.outlier)",
                )),
            };
        };
        let Some(shard) = topology.shard(slot) else {
            return Candidate::NoOwner;
        };
        let policy = select::policy_for(read_policy, write, slot, cluster.migrating());
        match select::pick(shard, policy, write, tried) {
            Some(node) => Candidate::Node(node.clone()),
            None => Candidate::Unusable(self.unusable(slot, shard, write)),
        }
    }

    /// Why no node of `shard` may serve the command (all candidates ejected).
    fn unusable(&self, slot: u16, shard: &Shard, write: bool) -> Bytes {
        let what = if write {
            "this write".to_string()
        } else {
            format!("this read (read_policy: {})", self.read_policy().name())
        };
        let state = |node: &Node| {
            if node.is_ejected() {
                format!(
                    "{} ejected, next health check in {}ms",
                    node.addr(),
                    node.health().ejected_for().as_millis()
                )
            } else {
                format!("{} up", node.addr())
            }
        };
        let replicas: Vec<String> = shard.replicas.iter().map(|r| state(r)).collect();
        let replicas = if replicas.is_empty() {
            "none".to_string()
        } else {
            replicas.join(", ")
        };
        redcar_error(format_args!(
            "no usable node for {what} in slot {slot}: primary {}; replicas: {replicas} \
             (ejected after consecutive failures, upstream.outlier; failing fast)",
            state(&shard.primary)
        ))
    }

    /// Everything after the fast path: `first` is the attempt already made (if any) and its
    /// outcome; then redirects and retries until a final reply or the deadline. A failed node
    /// goes into `tried`, so the next attempt of a read prefers another replica, then the
    /// primary; a node is tried again only after a back-off pause.
    pub(super) async fn finish(
        &self,
        command: Command,
        mut first: Option<(Arc<Node>, Outcome)>,
        mut tried: Vec<Arc<Node>>,
    ) -> Bytes {
        let mut target = Target::Owner(command.slot);
        let mut redirects = 0;
        let mut attempt: u32 = 0;
        let mut miss_checked = false;
        loop {
            let (node, outcome) = match first.take() {
                Some(first) => first,
                None => {
                    let (node, asking) = match self.resolve_for(&target, &command, &tried).await {
                        Ok(found) => found,
                        Err(reply) => return reply,
                    };
                    let reply = node.send(command.payload.clone(), asking, command.lane);
                    match tokio::time::timeout_at(command.deadline, reply).await {
                        Ok(outcome) => (node, outcome),
                        Err(_elapsed) => return self.node_timed_out(&node),
                    }
                }
            };
            let error = match outcome {
                Ok(reply) => match classify(&reply) {
                    Verdict::Done if !miss_checked => {
                        match self.replica_miss(&command, &node, &reply) {
                            // Not a retry (the replica answered): no budget spent, no pause. A
                            // primary that cannot be reached leaves the replica's answer standing.
                            Some(primary) => {
                                miss_checked = true;
                                target = Target::Redirected {
                                    node: primary,
                                    asking: false,
                                };
                                continue;
                            }
                            None => return reply,
                        }
                    }
                    Verdict::Done => return reply,
                    Verdict::Moved(addr) | Verdict::Ask(addr)
                        if redirects >= self.max_redirects() =>
                    {
                        return redcar_error(format_args!(
                            "gave up after {redirects} redirects (last to {addr})"
                        ));
                    }
                    Verdict::Moved(addr) => {
                        redirects += 1;
                        self.metrics.redirect("moved", addr);
                        let state = self.state(&command.target);
                        state.note_redirect();
                        if let Some(slot) = command.slot {
                            state.migrating().note_moved(slot);
                        }
                        target = Target::Redirected {
                            node: self.upstreams.node(addr),
                            asking: false,
                        };
                        continue;
                    }
                    Verdict::Ask(addr) => {
                        redirects += 1;
                        self.metrics.redirect("ask", addr);
                        if let Some(slot) = command.slot {
                            self.state(&command.target).migrating().note_ask(slot);
                        }
                        target = Target::Redirected {
                            node: self.upstreams.node(addr),
                            asking: true,
                        };
                        continue;
                    }
                    // The node did not run the command: try again a little later (or elsewhere).
                    Verdict::Transient => {
                        if node_unavailable(&reply) {
                            node.health()
                                .record_failure("node is loading or has no primary");
                            tried.push(node);
                        }
                        RetryCause::Reply(reply)
                    }
                    // A failover demoted the node the map names as primary; the write did not
                    // run. Once the map names the new primary, the retry goes there.
                    Verdict::ReadOnly => {
                        self.cluster.request_refresh();
                        RetryCause::Reply(reply)
                    }
                },
                Err(e) if e.never_sent() || !command.write => {
                    self.state(&command.target).note_failure();
                    tried.push(node);
                    RetryCause::Upstream(e)
                }
                Err(e) => return lost_write(&e),
            };
            attempt += 1;
            if !self
                .retry_budget
                .try_spend(Instant::now(), self.metrics.requests_sent())
            {
                self.metrics.retry_budget_exhausted();
                return error.into_reply(" (not retried: router.retry_budget is spent)");
            }
            self.metrics.retry();
            // A retry goes back to the slot's current owner, which may have changed; the
            // redirect limit is per attempt (a migration's ASK, then TRYAGAIN, repeats).
            target = Target::Owner(command.slot);
            redirects = 0;
            // After a failure of the node itself, another replica (or the primary) is tried at
            // once; the same node, or any node after a slot-level error (TRYAGAIN,
            // CLUSTERDOWN), only after a pause.
            let fresh = error.is_node_failure()
                && matches!(
                    self.candidate(&command.target, command.slot, command.write, &tried),
                    Candidate::Node(next) if !select::was_tried(&next, &tried)
                );
            if !fresh && !pause_before_retry(self.retry_backoff(), attempt, command.deadline).await
            {
                return error.into_reply("");
            }
        }
    }

    /// Finds the node for `target` in `backend` (`None`: the catch-all backend), waiting
    /// (within the deadline) for a map that has an owner. Used by transactions and dedicated
    /// connections: always the primary.
    pub(super) async fn resolve_on(
        &self,
        backend: Option<Arc<RouteTarget>>,
        target: &Target,
        deadline: Instant,
    ) -> Result<(Arc<Node>, bool), Bytes> {
        let command = Command {
            payload: Bytes::new(),
            slot: None,
            write: true,
            lane: Lane::default(),
            deadline,
            target: backend,
        };
        self.resolve_for(target, &command, &[]).await
    }

    /// [`resolve`](Self::resolve) for one command: by read policy for reads, avoiding `tried`.
    async fn resolve_for(
        &self,
        target: &Target,
        command: &Command,
        tried: &[Arc<Node>],
    ) -> Result<(Arc<Node>, bool), Bytes> {
        let slot = match target {
            Target::Redirected { node, asking } => return Ok((node.clone(), *asking)),
            Target::Owner(slot) => *slot,
        };
        let cluster = self.state(&command.target);
        loop {
            let seen = cluster.version();
            match self.candidate(&command.target, slot, command.write, tried) {
                Candidate::Node(node) => return Ok((node, false)),
                Candidate::Unusable(reply) => return Err(reply),
                Candidate::NoOwner => {}
            }
            cluster.request_refresh();
            let waited =
                tokio::time::timeout_at(command.deadline, cluster.changed_since(seen)).await;
            if waited.is_err() {
                // With no map at all, the refresher's last failure is the useful part.
                let mut why = match (cluster.topology(), cluster.refresh_error()) {
                    (None, Some(error)) => format!("; no slot map yet, last refresh: {error}"),
                    _ => String::new(),
                };
                if let Some(target) = &command.target {
                    let map = if cluster.topology().is_none() {
                        ", which has no map yet"
                    } else {
                        ""
                    };
                    why = format!(" of backend {}{map}{why}", target.backend);
                }
                return Err(match slot {
                    Some(slot) => error_with_prefix(
                        "CLUSTERDOWN ",
                        format_args!(
                            "Hash slot not served (redcar: no node owns slot {slot}{why})"
                        ),
                    ),
                    None => redcar_error(format_args!(
                        "no cluster topology known yet (are the seed nodes reachable?){why}"
                    )),
                });
            }
        }
    }

    /// A command gave up waiting for `node` at its deadline: the node's health counts the
    /// failure, and the client gets [`Router::timed_out`].
    pub(super) fn node_timed_out(&self, node: &Node) -> Bytes {
        node.health().record_failure("command timed out");
        self.timed_out(node)
    }

    pub(super) fn timed_out(&self, node: &Node) -> Bytes {
        redcar_error(format_args!(
            "timed out after {:?} waiting for {}",
            self.op_timeout(),
            node.addr()
        ))
    }
}

#[cfg(test)]
mod readonly_tests;
