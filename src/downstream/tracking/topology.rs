//! Client-side caching across topology changes: when a slot changes owner (a failover, a
//! migration, a node replaced), the new owner never tracked what clients read from the old one,
//! so every tracking session is told to flush (a null invalidation). While any client tracks
//! in BCAST mode, every primary's invalidation connection is kept started, and
//! `CLIENT TRACKING on BCAST` answers once every primary confirmed the client's prefixes.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;

use crate::cluster::{ClusterState, Topology};
use crate::metrics::FlushCause;

/// How often an idle watcher looks whether the tracking state still exists.
const LIVENESS: Duration = Duration::from_secs(1);

/// How long `CLIENT TRACKING on BCAST` waits for every primary to confirm its prefixes.
const BCAST_CONFIRM: Duration = Duration::from_secs(5);

/// Who owns each run of slots: (first, last, primary address).
type Owners = Vec<(u16, u16, Option<Arc<str>>)>;

/// What the watch asks of the tracking state it watches (`Tracking`, in `mod.rs`).
pub(super) trait Hub {
    /// Every tracking session flushes its cache, counted under `cause`.
    fn flush_all(&self, cause: FlushCause);
    /// The BCAST prefixes every primary registers, once some client tracked in BCAST mode.
    fn bcast_cover(&self) -> Option<Vec<Bytes>>;
}

/// Watches `cluster` while `hub` exists (started with the first client that tracks).
pub(super) async fn watch<H: Hub>(hub: Weak<H>, cluster: Arc<ClusterState>) {
    let mut seen = cluster.version();
    let mut owners = owners_of(cluster.topology().as_deref());
    loop {
        tokio::select! {
            version = cluster.changed_since(seen) => seen = version,
            () = tokio::time::sleep(LIVENESS) => {
                if hub.strong_count() == 0 {
                    return;
                }
                continue;
            }
        }
        let Some(hub) = hub.upgrade() else {
            return;
        };
        let topology = cluster.topology();
        let next = owners_of(topology.as_deref());
        let changed = next != owners;
        if changed {
            tracing::info!("slot owners changed: tracking clients are told to flush");
            hub.flush_all(FlushCause::Topology);
            owners = next;
        }
        let Some(cover) = hub.bcast_cover() else {
            continue;
        };
        let late = !registered_everywhere(topology.as_deref(), &cover);
        start_primaries(topology.as_deref());
        if changed && late && confirmed(&cluster, cover).await.is_ok() {
            // A new primary broadcast nothing until it confirmed the prefixes: BCAST clients
            // may have cached what was written there since the flush above.
            hub.flush_all(FlushCause::Topology);
        }
    }
}

/// Whether every primary confirmed a BCAST registration covering `cover` already.
fn registered_everywhere(topology: Option<&Topology>, cover: &[Bytes]) -> bool {
    topology
        .map_or(&[][..], |t| t.shards())
        .iter()
        .all(|shard| {
            shard
                .primary
                .bcast_registered()
                .is_some_and(|r| r.covers_now(cover))
        })
}

/// Starts the invalidation connection of every primary (BCAST).
pub(super) fn start_primaries(topology: Option<&Topology>) {
    for shard in topology.map_or(&[][..], |t| t.shards()) {
        shard.primary.start_tracking();
    }
}

/// Resolves once every primary of the slot map in `cluster` confirmed, on its invalidation
/// connection, a registration covering `prefixes` (`""`: every key), or with the reason it did
/// not within [`BCAST_CONFIRM`]. Starts the primaries' invalidation connections as needed.
pub(super) fn confirmed(
    cluster: &ClusterState,
    prefixes: Vec<Bytes>,
) -> impl Future<Output = Result<(), String>> + Send + 'static {
    let topology = cluster.topology();
    let mut waits = Vec::new();
    for shard in topology.as_deref().map_or(&[][..], |t| t.shards()) {
        shard.primary.start_tracking();
        waits.push((
            shard.primary.addr().clone(),
            shard.primary.bcast_registered(),
        ));
    }
    async move {
        if topology.is_none() {
            return Err("no slot map yet".to_string());
        }
        let deadline = tokio::time::Instant::now() + BCAST_CONFIRM;
        for (addr, registered) in waits {
            let Some(registered) = registered else {
                return Err(format!("no invalidation connection to {addr}"));
            };
            let covered = tokio::time::timeout_at(deadline, registered.covers(&prefixes)).await;
            if covered != Ok(true) {
                return Err(format!(
                    "{addr} did not confirm the BCAST prefixes within {BCAST_CONFIRM:?}"
                ));
            }
        }
        Ok(())
    }
}

fn owners_of(topology: Option<&Topology>) -> Owners {
    topology.map_or_else(Vec::new, |t| {
        t.ranges()
            .into_iter()
            .map(|(first, last, shard)| (first, last, shard.map(|s| s.primary.addr().clone())))
            .collect()
    })
}
