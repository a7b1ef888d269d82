//! `/topology`: the slot map as JSON, with what redcar knows about each node.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Json;
use serde::Serialize;

use super::AdminState;
use crate::upstream::{HealthSnapshot, Node, NodeMetrics};

/// One run of slots with the same owner.
#[derive(Serialize)]
struct RangeView {
    /// First slot of the run.
    start: u16,
    /// Last slot, inclusive.
    end: u16,
    /// The primary's config epoch (0 when `CLUSTER NODES` could not be read).
    epoch: Option<u64>,
    /// The owner; `None` for unowned slots.
    primary: Option<NodeView>,
    /// The owner's replicas that serve reads.
    replicas: Vec<NodeView>,
}

/// One node with its counters since start and its health now.
#[derive(Serialize)]
struct NodeView {
    /// The node's `host:port`.
    addr: String,
    /// Open pipelined connections now.
    connections: i64,
    /// Commands awaiting the node's reply now.
    in_flight: i64,
    /// Commands sent since start.
    requests: u64,
    /// Connection failures and lost replies since start.
    errors: u64,
    /// Mean write-to-reply time since start; `None` before the first reply.
    mean_latency_us: Option<u64>,
    /// Outlier detection's view: ejected or not, failure streak, latency EWMA.
    health: HealthSnapshot,
}

/// A node never used has no series (and makes none here): zeros.
fn node_view(node: &Node) -> NodeView {
    let series = node.metrics();
    NodeView {
        addr: node.addr().to_string(),
        connections: series.map_or(0, |s| s.connections.get()),
        in_flight: series.map_or(0, |s| s.in_flight.get()),
        requests: series.map_or(0, |s| s.requests.get()),
        errors: series.map_or(0, |s| s.errors.get()),
        mean_latency_us: series.and_then(NodeMetrics::mean_latency_us),
        health: node.health().snapshot(),
    }
}

/// Every backend by name, in brief (the ranges above are the catch-all backend's).
fn backends(state: &AdminState) -> Vec<serde_json::Value> {
    state
        .backends
        .load()
        .iter()
        .map(|(name, backend)| {
            let topology = backend.topology();
            serde_json::json!({
                "name": name,
                "ready": backend.is_ready(),
                "owned_slots": topology.as_ref().map_or(0, |t| t.owned_slots()),
                "summary": topology.map(|t| t.summary()),
            })
        })
        .collect()
}

pub(super) async fn topology(State(state): State<Arc<AdminState>>) -> Json<serde_json::Value> {
    let Some(topology) = state.cluster.topology() else {
        return Json(serde_json::json!({
            "ready": false,
            "ranges": [],
            "backends": backends(&state),
        }));
    };
    let ranges: Vec<RangeView> = topology
        .ranges()
        .into_iter()
        .map(|(start, end, shard)| RangeView {
            start,
            end,
            epoch: shard.map(|s| s.epoch),
            primary: shard.map(|s| node_view(&s.primary)),
            replicas: shard.map_or_else(Vec::new, |s| {
                s.replicas.iter().map(|r| node_view(r)).collect()
            }),
        })
        .collect();
    Json(serde_json::json!({
        "ready": state.cluster.is_ready(),
        "owned_slots": topology.owned_slots(),
        "source": topology.source(),
        "has_epochs": topology.has_epochs(),
        // Slots seen migrating, whose reads go to the primary (cluster/migrating.rs).
        "migrating_slots": state.cluster.migrating().slots(),
        "ranges": ranges,
        "backends": backends(&state),
    }))
}
