//! Which node an attempt goes to: the slot's owner in the command's backend, by read policy for
//! reads, avoiding nodes already tried and never an ejected one; waiting (within the deadline)
//! for a map that has an owner when there is none. Among replicas the less loaded of two picked
//! at random (power of two choices over outstanding requests × latency EWMA): never LIFO, never
//! sticky.
//!
//! Who calls it: every attempt of a forwarded command asks `candidate` (or `candidate_by` on the
//! fast path) once, and retries ask again with the nodes already tried, so a retry moves on to
//! another node when there is one. What holds: a write only ever goes to its slot's primary; an
//! ejected node is never picked while any other candidate is usable, and when none is, the client
//! gets an error listing each node's state at once (failing fast) rather than waiting out the
//! deadline. Only a missing owner (no map yet, or a slot no shard serves) is waited for, by asking
//! for a refresh and waiting on the map's version until the command's deadline.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use super::command::{AttemptTarget, Candidate, ForwardedCommand};
use super::Forwarder;
use crate::cluster::{ClusterState, MigratingSlots, Shard};
use crate::router::reply::{error_with_prefix, redcar_error};
use crate::router::{ReadPolicy, RouteTarget};
use crate::upstream::{Lane, Node};

impl Forwarder {
    /// The node for an attempt at `slot`: the primary for writes, by read policy for reads,
    /// preferring nodes not in `tried`; never an ejected one.
    ///
    /// `target` is the route's backend (`None`: the catch-all), whose own read policy, if set,
    /// overrides the global one.
    pub(in crate::router) fn candidate(
        &self,
        target: &Option<Arc<RouteTarget>>,
        slot: Option<u16>,
        write: bool,
        tried: &[Arc<Node>],
    ) -> Candidate {
        let read_policy = target
            .as_ref()
            .and_then(|t| t.read_policy)
            .unwrap_or_else(|| self.core.read_policy());
        self.candidate_by(read_policy, self.core.state(target), slot, write, tried)
            .0
    }

    /// [`Forwarder::candidate`] with the read policy already loaded (the first attempt), and
    /// whether the node is its shard's primary in the map it was picked from: a primary's nil
    /// needs no confirming ([`Forwarder::replica_miss`]), which the fast path then decides
    /// without loading the map again.
    pub(super) fn candidate_by(
        &self,
        read_policy: ReadPolicy,
        cluster: &ClusterState,
        slot: Option<u16>,
        write: bool,
        tried: &[Arc<Node>],
    ) -> (Candidate, bool) {
        let snapshot = cluster.topology_now();
        let Some(topology) = snapshot.as_deref() else {
            return (Candidate::NoOwner, false);
        };
        let Some(slot) = slot else {
            // Keyless commands: any primary that is not ejected.
            let shards = topology.shards();
            let candidate = match shards.iter().find(|s| !s.primary.is_ejected()) {
                Some(shard) => Candidate::Node(shard.primary.clone()),
                None if shards.is_empty() => Candidate::NoOwner,
                None => Candidate::Unusable(redcar_error(
                    "every primary is ejected after consecutive failures (upstream.outlier)",
                )),
            };
            return (candidate, true);
        };
        let Some(shard) = topology.shard(slot) else {
            return (Candidate::NoOwner, false);
        };
        let policy = policy_for(read_policy, write, slot, cluster.migrating());
        match pick(shard, policy, write, tried) {
            Some(node) => (
                Candidate::Node(node.clone()),
                Arc::ptr_eq(node, &shard.primary),
            ),
            None => (
                Candidate::Unusable(self.unusable(slot, shard, write)),
                false,
            ),
        }
    }

    /// Why no node of `shard` may serve the command (all candidates ejected).
    ///
    /// Lists every node of the shard with its state (ejected with the time to its next health
    /// check, or up), so an operator reading the client's error sees why at once; the error is a
    /// redcar error, not a Redis one, because no node said it.
    fn unusable(&self, slot: u16, shard: &Shard, write: bool) -> Bytes {
        let what = if write {
            "this write".to_string()
        } else {
            format!(
                "this read (read_policy: {})",
                self.core.read_policy().name()
            )
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

    /// Finds the node for `target` in `backend` (`None`: the catch-all backend), waiting
    /// (within the deadline) for a map that has an owner. Used by transactions and dedicated
    /// connections: always the primary.
    pub(in crate::router) async fn resolve_on(
        &self,
        backend: Option<Arc<RouteTarget>>,
        target: &AttemptTarget,
        deadline: Instant,
    ) -> Result<(Arc<Node>, bool), Bytes> {
        let command = ForwardedCommand {
            payload: Bytes::new(),
            slot: None,
            write: true,
            lane: Lane::default(),
            deadline,
            target: backend,
        };
        self.resolve_for(target, &command, &[]).await
    }

    /// [`resolve_on`](Self::resolve_on) for one command: by read policy for reads, avoiding `tried`.
    ///
    /// Loops while no node owns the slot: each round asks for a refresh and waits until the map
    /// changes or the deadline passes. On the deadline the client gets CLUSTERDOWN for a keyed
    /// command (as Redis would answer for an unserved slot) or a redcar error for a keyless one,
    /// with the refresher's last failure when there is no map at all. The returned flag is whether
    /// the node must be sent ASKING first (only ever true for a redirect's target).
    pub(super) async fn resolve_for(
        &self,
        target: &AttemptTarget,
        command: &ForwardedCommand,
        tried: &[Arc<Node>],
    ) -> Result<(Arc<Node>, bool), Bytes> {
        let slot = match target {
            AttemptTarget::Redirected { node, asking } => return Ok((node.clone(), *asking)),
            AttemptTarget::Owner(slot) => *slot,
        };
        let cluster = self.core.state(&command.target);
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
}

/// The policy for one command on `slot`. A read of a slot being migrated goes to the primary (a
/// replica only while the primary is ejected) whatever the policy: a key already moved is not
/// on the source's replica, which answers nil where its primary answers `-ASK`. The default
/// policy pays nothing; the others one bit test.
#[inline]
pub(in crate::router) fn policy_for(
    policy: ReadPolicy,
    write: bool,
    slot: u16,
    migrating: &MigratingSlots,
) -> ReadPolicy {
    if write || !policy.uses_replicas() || !migrating.contains(slot) {
        return policy;
    }
    ReadPolicy::PreferPrimary
}

/// The node for the next attempt, or `None` when every candidate is ejected. `tried` holds the
/// nodes that already failed this command: an untried candidate comes first, so a retry lands
/// on another replica, then the primary, and only then on a node that failed before.
#[inline]
pub(in crate::router) fn pick<'s>(
    shard: &'s Shard,
    policy: ReadPolicy,
    write: bool,
    tried: &[Arc<Node>],
) -> Option<&'s Arc<Node>> {
    let primary = (!shard.primary.is_ejected()).then_some(&shard.primary);
    if write {
        return primary;
    }
    let fresh = |node: &Node| !was_tried(node, tried);
    let replicas = &shard.replicas;
    match policy {
        ReadPolicy::Primary => primary,
        ReadPolicy::PreferPrimary => primary.or_else(|| least_loaded(replicas, None, |_| true)),
        ReadPolicy::Replica => {
            least_loaded(replicas, None, fresh).or_else(|| least_loaded(replicas, None, |_| true))
        }
        ReadPolicy::PreferReplica => least_loaded(replicas, None, fresh)
            .or(primary)
            .or_else(|| least_loaded(replicas, None, |_| true)),
        ReadPolicy::Any => least_loaded(replicas, primary, fresh)
            .or(primary)
            .or_else(|| least_loaded(replicas, None, |_| true)),
    }
}

/// True when `node` is in `tried`.
pub(in crate::router) fn was_tried(node: &Node, tried: &[Arc<Node>]) -> bool {
    tried.iter().any(|t| std::ptr::eq(Arc::as_ptr(t), node))
}

/// Power of two choices among the usable (not ejected, `keep`) nodes of `nodes` plus `extra`:
/// two distinct candidates at random, the one with the lower load score wins. No allocation.
///
/// `extra` is a further candidate outside `nodes` (the primary, under `read_policy: any`). The load
/// score weighs outstanding requests by latency, so a slow replica loses even with few requests in
/// flight. With one usable node it is returned without drawing; with none, `None`.
fn least_loaded<'s>(
    nodes: &'s [Arc<Node>],
    extra: Option<&'s Arc<Node>>,
    keep: impl Fn(&Node) -> bool,
) -> Option<&'s Arc<Node>> {
    let usable = || {
        nodes
            .iter()
            .chain(extra)
            .filter(|node| !node.is_ejected() && keep(node))
    };
    let count = usable().count();
    if count <= 1 {
        return usable().next();
    }
    use rand::Rng;
    let mut rng = rand::rng();
    let a = rng.random_range(0..count);
    let mut b = rng.random_range(0..count - 1);
    if b >= a {
        b += 1;
    }
    let first = usable().nth(a)?;
    let second = usable().nth(b)?;
    if second.health().load_score() < first.health().load_score() {
        Some(second)
    } else {
        Some(first)
    }
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "select_tests.rs"]
mod select_tests;
