//! A replica's "no such key", confirmed by the slot's primary (`router.replica_miss_check`):
//! whether a reply to a read is one that a missing key would produce (`commands::absent`, which
//! knows it for every read command) and came from a node that is not the slot's primary.
//!
//! The hook the per-command paths call: [`Forwarder::replica_miss`] (the single-command path
//! and `finish`) delegates here, and the split's batches ask it for each part's reply.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::Forwarder;
use crate::commands::absent;
use crate::router::RouteTarget;
use crate::upstream::Node;

impl Forwarder {
    /// The slot's primary when `reply`, `node`'s answer to the read `payload` of `slot`, says a
    /// key does not exist and `node` is not that primary, so the primary should confirm it;
    /// `None` for writes, keyless commands, with the check off, or when the primary is ejected
    /// (the replica's answer then stands). The cheap tests come first: most replies from a
    /// replica stop at the look at their first bytes (`absent::means_absent`).
    pub(in crate::router) fn absent_on_replica(
        &self,
        target: &Option<Arc<RouteTarget>>,
        slot: Option<u16>,
        write: bool,
        node: &Arc<Node>,
        payload: &Bytes,
        reply: &[u8],
    ) -> Option<Arc<Node>> {
        if write || !self.replica_miss_check.load(Ordering::Relaxed) {
            return None;
        }
        let slot = slot?;
        if !absent::means_absent(payload, reply) {
            return None;
        }
        let snapshot = self.core.state(target).topology_now();
        let primary = &snapshot.as_deref()?.shard(slot)?.primary;
        (!Arc::ptr_eq(primary, node) && !primary.is_ejected()).then(|| primary.clone())
    }
}
