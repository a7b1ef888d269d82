//! `/topology`: the slot map as JSON, with what redcar knows about each node.

use std::sync::Arc;

use axum::extract::State;
use axum::response::Json;
use serde::Serialize;

use super::AdminState;
use crate::metrics::Metrics;
use crate::upstream::{HealthSnapshot, Node, UpstreamMetrics};

#[derive(Serialize)]
struct RangeView {
    start: u16,
    end: u16,
    /// The primary's config epoch (0 when `CLUSTER NODES` could not be read).
    epoch: Option<u64>,
    primary: Option<NodeView>,
    replicas: Vec<NodeView>,
}

#[derive(Serialize)]
struct NodeView {
    addr: String,
    connections: i64,
    in_flight: i64,
    requests: u64,
    errors: u64,
    mean_latency_us: Option<u64>,
    /// Outlier detection's view: ejected or not, failure streak, latency EWMA.
    health: HealthSnapshot,
}

/// `nodes`: the hub's per-node group, looked up once per request.
fn node_view(node: &Node, nodes: &UpstreamMetrics, metrics: &Metrics) -> NodeView {
    let series = nodes.node(node.addr(), &metrics.events);
    NodeView {
        addr: node.addr().to_string(),
        connections: series.connections.get(),
        in_flight: series.in_flight.get(),
        requests: series.requests.get(),
        errors: series.errors.get(),
        mean_latency_us: series.mean_latency_us(),
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
    let nodes = state.metrics.group::<UpstreamMetrics>();
    let ranges: Vec<RangeView> = topology
        .ranges()
        .into_iter()
        .map(|(start, end, shard)| RangeView {
            start,
            end,
            epoch: shard.map(|s| s.epoch),
            primary: shard.map(|s| node_view(&s.primary, &nodes, &state.metrics)),
            replicas: shard.map_or_else(Vec::new, |s| {
                s.replicas
                    .iter()
                    .map(|r| node_view(r, &nodes, &state.metrics))
                    .collect()
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
