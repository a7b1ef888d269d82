//! `GET /status.json`: everything the status page draws, in one document — slot ranges by
//! shard, each node's role, health, latency, load and rates, command rates, the event log and
//! the newest slow commands, and the hottest and biggest keys.
//!
//! The field names of the document are what the status page (and anyone scripting against it)
//! reads, so they only ever gain fields. Everything here is read from state the proxy keeps anyway
//! (the adopted map, the sampler's recent rates, the metrics hub, the event log), so serving the
//! page costs no traffic to the nodes and takes no lock on the command path. Rates are the
//! sampler's, over its last window; counters are since start.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Json;
use serde::Serialize;

use super::sampler::{NodeRates, Rates};
use super::AdminState;
use crate::auth::TenantMetrics;
use crate::cluster::Topology;
use crate::near_cache::NearCacheMetrics;
use crate::upstream::Node;

/// Slow commands included (the full list is at `/slowlog`).
const SLOW_SHOWN: usize = 20;

/// Hot and big keys included (the full lists are at `/hotkeys`).
const HOT_SHOWN: usize = 10;

/// A run of slots with one owner, for the slot bar.
#[derive(Serialize)]
struct Range {
    /// First slot of the run.
    start: u16,
    /// Last slot of the run, inclusive.
    end: u16,
    /// Index into `shards`, or `None` for unowned slots.
    shard: Option<usize>,
}

/// One shard: its primary first, then its replicas.
#[derive(Serialize)]
struct ShardView {
    /// The shard's index, as ranges refer to it.
    index: usize,
    /// The primary's config epoch; 0 when the map's epochs are unknown.
    epoch: u64,
    /// Slots the shard owns.
    slots: usize,
    /// The primary, then the replicas the map serves reads from.
    nodes: Vec<NodeStatus>,
}

/// One node as the page draws it.
#[derive(Serialize)]
struct NodeStatus {
    /// The node's `host:port`.
    addr: String,
    /// `primary` or `replica`.
    role: &'static str,
    /// `healthy`, `failing` (a failure streak below the ejection threshold) or `ejected`.
    health: &'static str,
    /// Open pipelined connections now.
    connections: i64,
    /// Commands awaiting the node's reply now.
    in_flight: i64,
    /// Over the sampler's last window; `None` before it has two samples.
    requests_per_s: Option<f64>,
    /// As `requests_per_s`, for errors.
    errors_per_s: Option<f64>,
    /// Median latency over the sampler's window, microseconds.
    p50_us: Option<u64>,
    /// 99th percentile over the sampler's window, microseconds.
    p99_us: Option<u64>,
    /// The latency EWMA the replica choice uses, microseconds.
    latency_ewma_us: u64,
    /// Failures in a row now.
    consecutive_failures: u32,
    /// Ejections in a row (the doubling's exponent).
    ejections: u32,
    /// Time left in the current ejection.
    ejected_for_ms: u64,
}

/// One command's rate over the sampler's window.
#[derive(Serialize)]
struct CommandRate {
    command: &'static str,
    per_s: f64,
}

/// Served on the admin listener only. With no map yet, `ranges` and `shards` are empty and `source`
/// is null, which the page shows as waiting for the cluster.
pub(super) async fn status(State(state): State<Arc<AdminState>>) -> Json<serde_json::Value> {
    let rates = state.sampler.rates();
    let topology = state.cluster.topology();
    let (ranges, shards) = match topology.as_deref() {
        Some(t) => (ranges(t), shards(t, &rates)),
        None => (Vec::new(), Vec::new()),
    };
    let commands: Vec<CommandRate> = rates
        .commands
        .iter()
        .map(|&(command, per_s)| CommandRate { command, per_s })
        .collect();
    let mut slow = state.metrics.slowlog.entries();
    slow.truncate(SLOW_SHOWN);
    let totals = state.metrics.totals();
    let mut hotkeys = state.downstream.hotkeys.report(tokio::time::Instant::now());
    hotkeys.hot.truncate(HOT_SHOWN);
    hotkeys.big.truncate(HOT_SHOWN);
    Json(serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": totals.uptime.as_secs(),
        "pid": totals.pid,
        "restart_generation": totals.generation,
        "upgrade_old_pid": (totals.old_pid != 0).then_some(totals.old_pid),
        "ready": state.cluster.is_ready(),
        "topology_version": state.cluster.version(),
        "source": topology.as_deref().map(Topology::source),
        "owned_slots": topology.as_deref().map_or(0, Topology::owned_slots),
        "clients": totals.clients,
        "commands_per_s": rates.commands_per_s,
        "commands_per_s_history": state.sampler.rate_history(),
        "latency_window_s": rates.latency_window_s,
        "ranges": ranges,
        "shards": shards,
        "departed": state.sampler.departed.list(),
        "commands": commands,
        "events": state.metrics.events.entries(),
        "slowlog": slow,
        "hotkeys": hotkeys,
        "near_cache": near_cache(&state),
        "workers": workers(&state),
        "users": state.metrics.group::<TenantMetrics>().summaries(),
    }))
}

/// Per-core workers: the placement, whether new clients are packed now, and each worker's
/// clients and busy share; `null` with the shared runtime.
fn workers(state: &AdminState) -> serde_json::Value {
    let Some(spread) = state.downstream.spread() else {
        return serde_json::Value::Null;
    };
    let (placement, packing, each) = spread.standing();
    let each: Vec<_> = each
        .into_iter()
        .map(|(clients, busy)| serde_json::json!({ "clients": clients, "busy": busy }))
        .collect();
    serde_json::json!({ "placement": placement, "packing": packing, "each": each })
}

/// The near cache's counters since start-up (the page turns them into recent rates), or
/// `null` when it is off.
fn near_cache(state: &AdminState) -> serde_json::Value {
    if !state.downstream.near_cache_on() {
        return serde_json::Value::Null;
    }
    let m = state.metrics.group::<NearCacheMetrics>();
    serde_json::json!({
        "hits": m.hits.get(),
        "misses": m.misses.get(),
        "invalidations": m.invalidations.get(),
        "evictions": m.evictions.get(),
        "bytes": m.bytes.get(),
        "entries": m.entries.get(),
    })
}

/// Owned runs point at their shard by index, so the page can colour the slot bar without repeating
/// addresses 16384 times.
fn ranges(topology: &Topology) -> Vec<Range> {
    let index_of = |primary: &str| {
        topology
            .shards()
            .iter()
            .position(|s| s.primary.addr().as_ref() == primary)
    };
    topology
        .ranges()
        .into_iter()
        .map(|(start, end, shard)| Range {
            start,
            end,
            shard: shard.and_then(|s| index_of(s.primary.addr())),
        })
        .collect()
}

/// Slot counts come from the runs, not a walk of every slot.
fn shards(topology: &Topology, rates: &Rates) -> Vec<ShardView> {
    let mut slots = vec![0usize; topology.shards().len()];
    for range in ranges(topology) {
        if let Some(i) = range.shard {
            slots[i] += usize::from(range.end - range.start) + 1;
        }
    }
    topology
        .shards()
        .iter()
        .enumerate()
        .map(|(index, shard)| {
            let primary = node_status(&shard.primary, "primary", rates);
            let replicas = shard
                .replicas
                .iter()
                .map(|r| node_status(r, "replica", rates));
            ShardView {
                index,
                epoch: shard.epoch,
                slots: slots[index],
                nodes: std::iter::once(primary).chain(replicas).collect(),
            }
        })
        .collect()
}

/// A node never used has no series (and makes none here): zeros.
fn node_status(node: &Node, role: &'static str, rates: &Rates) -> NodeStatus {
    let series = node.metrics();
    let health = node.health().snapshot();
    let live = rates
        .nodes
        .get(node.addr().as_ref())
        .copied()
        .unwrap_or(NodeRates::default());
    NodeStatus {
        addr: node.addr().to_string(),
        role,
        health: if health.ejected {
            "ejected"
        } else if health.consecutive_failures > 0 {
            "failing"
        } else {
            "healthy"
        },
        connections: series.map_or(0, |s| s.connections.get()),
        in_flight: series.map_or(0, |s| s.in_flight.get()),
        requests_per_s: live.requests_per_s,
        errors_per_s: live.errors_per_s,
        p50_us: live.p50_us,
        p99_us: live.p99_us,
        latency_ewma_us: health.latency_ewma_us,
        consecutive_failures: health.consecutive_failures,
        ejections: health.ejections,
        ejected_for_ms: health.ejected_for_ms,
    }
}
