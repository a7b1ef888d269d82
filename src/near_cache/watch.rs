//! Drops the near cache when a slot changes hands (the new owner never tracked what redcar
//! read from the old one), and samples the cache's size for its gauges.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::cluster::{ClusterState, Topology};
use crate::metrics::FlushCause;

/// How often the gauges are sampled (and the cache looked for, to end with it).
/// Also the longest a dropped cache's watch task lingers.
const SAMPLE: Duration = Duration::from_secs(1);

/// Who serves each run of slots: first and last slot, the primary and the replicas.
/// Compared whole after every map change: any difference in a run's nodes flushes the cache.
type Members = Vec<(u16, u16, Vec<Arc<str>>)>;

/// What the watch does to the cache it watches (the near cache, `mod.rs`).
/// Implemented by `NearCache`: all the watch needs from it, which keeps `watch.rs` free of the
/// store.
pub(super) trait Watched {
    /// Drops every entry, counting the flush under `cause`.
    fn flush(&self, cause: FlushCause);
    /// Samples the cache's size for its gauges.
    fn sample(&self);
}

/// Watches `cluster` while `cache` exists.
///
/// Holds only a `Weak`, so the task never keeps the cache alive; it ends within one `SAMPLE` of the
/// cache being dropped. A map change that leaves every run's nodes as they were (a refresh that
/// found nothing new) flushes nothing.
pub(super) async fn watch<C: Watched>(cache: Weak<C>, cluster: Arc<ClusterState>) {
    let mut seen = cluster.version();
    let mut members = members_of(cluster.topology().as_deref());
    loop {
        let changed = tokio::select! {
            version = cluster.changed_since(seen) => {
                seen = version;
                true
            }
            () = tokio::time::sleep(SAMPLE) => false,
        };
        let Some(cache) = cache.upgrade() else {
            return;
        };
        if changed {
            let next = members_of(cluster.topology().as_deref());
            if next != members {
                tracing::info!("slot owners changed: near cache flushed");
                cache.flush(FlushCause::Topology);
                members = next;
            }
        } else {
            cache.sample();
        }
    }
}

/// Replicas count too: a replica read from and then dropped from the map (it no longer
/// follows its primary) would never invalidate what it served.
/// Replicas are sorted so a reordering alone flushes nothing; the primary stays first.
fn members_of(topology: Option<&Topology>) -> Members {
    topology.map_or_else(Vec::new, |t| {
        t.ranges()
            .into_iter()
            .map(|(first, last, shard)| {
                let nodes = shard.map_or_else(Vec::new, |s| {
                    let mut nodes: Vec<Arc<str>> = std::iter::once(&s.primary)
                        .chain(&s.replicas)
                        .map(|n| n.addr().clone())
                        .collect();
                    nodes[1..].sort();
                    nodes
                });
                (first, last, nodes)
            })
            .collect()
    })
}
