//! Which node one attempt of a command goes to: writes to the primary, reads by `read_policy`,
//! never to an ejected node, and among replicas the less loaded of two picked at random
//! (power of two choices over outstanding requests × latency EWMA) — never LIFO, never sticky.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cluster::{MigratingSlots, Shard};
use crate::upstream::Node;

/// Where reads go (`router.read_policy`, `--read-policy`). Writes always go to the primary.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ReadPolicy {
    /// Reads go to the primary only (read-your-writes).
    #[default]
    Primary,
    /// The primary; a replica when the primary is ejected.
    PreferPrimary,
    /// Replicas only; an error when none is usable.
    Replica,
    /// Replicas; the primary when no replica is usable, or after each replica failed once.
    PreferReplica,
    /// Any node of the shard, by load.
    Any,
}

impl ReadPolicy {
    /// True when reads may go to replicas, which then need `READONLY` on their connections.
    pub(crate) fn uses_replicas(self) -> bool {
        self != ReadPolicy::Primary
    }

    /// The name used in the config file and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ReadPolicy::Primary => "primary",
            ReadPolicy::PreferPrimary => "prefer-primary",
            ReadPolicy::Replica => "replica",
            ReadPolicy::PreferReplica => "prefer-replica",
            ReadPolicy::Any => "any",
        }
    }
}

/// The policy for one command on `slot`. A read of a slot being migrated goes to the primary (a
/// replica only while the primary is ejected) whatever the policy: a key already moved is not
/// on the source's replica, which answers nil where its primary answers `-ASK`. The default
/// policy pays nothing; the others one bit test.
#[inline]
pub(super) fn policy_for(
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
pub(super) fn pick<'s>(
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
pub(super) fn was_tried(node: &Node, tried: &[Arc<Node>]) -> bool {
    tried.iter().any(|t| std::ptr::eq(Arc::as_ptr(t), node))
}

/// Power of two choices among the usable (not ejected, `keep`) nodes of `nodes` plus `extra`:
/// two distinct candidates at random, the one with the lower load score wins. No allocation.
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
mod tests;
