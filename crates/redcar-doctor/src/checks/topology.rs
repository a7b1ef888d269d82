//! Checks of the cluster's shape: reachable nodes, cluster_state, slot coverage, agreement on
//! the slot map, and shards without a replica.

use std::collections::HashMap;

use crate::model::{ClusterSnapshot, Finding, NodeData, Role, Severity};

/// The slots of a Redis Cluster's key space (CRC16 of the key, modulo this).
const SLOT_COUNT: usize = 16384;

/// Nodes that did not answer, and nodes the cluster flags `fail`/`fail?`.
pub(crate) fn reachability(snapshot: &ClusterSnapshot) -> Vec<Finding> {
    let mut findings: Vec<Finding> = snapshot
        .unreachable
        .iter()
        .map(|(addr, why)| {
            Finding::new(
                Severity::Critical,
                vec![addr.clone()],
                format!("node listed in CLUSTER NODES does not answer: {why}"),
                "check the redis-server process, its host and the network path from here",
            )
        })
        .collect();
    let failed: Vec<String> = snapshot
        .topology
        .iter()
        // An unreachable node is already reported above; this is for nodes that answer us but
        // not their peers (a partition).
        .filter(|n| n.failed && !snapshot.unreachable.iter().any(|(addr, _)| *addr == n.addr))
        .map(|n| n.addr.clone())
        .collect();
    if !failed.is_empty() {
        findings.push(Finding::new(
            Severity::Critical,
            failed,
            "the cluster flags these nodes fail/fail? (they miss gossip pings)",
            "restart or reconnect them; CLUSTER FORGET nodes that are gone for good",
        ));
    }
    findings
}

/// `cluster_state:fail` means the node refuses every query with `-CLUSTERDOWN`.
pub(crate) fn cluster_state(node: &NodeData) -> Option<Finding> {
    let state = node.cluster_info.get("cluster_state")?;
    (state != "ok").then(|| {
        Finding::node(
            Severity::Critical,
            node,
            format!("cluster_state:{state}: the node answers queries with CLUSTERDOWN"),
            "restore slot coverage (bring failed primaries back, or `redis-cli --cluster fix`)",
        )
    })
}

/// Slots with no primary in this node's `CLUSTER SLOTS`: commands for them fail.
pub(crate) fn slot_coverage(node: &NodeData) -> Option<Finding> {
    let owners = node.slots.as_ref()?;
    let covered: usize = owners
        .iter()
        .map(|o| usize::from(o.end) - usize::from(o.start) + 1)
        .sum();
    (covered < SLOT_COUNT).then(|| {
        Finding::node(
            Severity::Critical,
            node,
            format!(
                "{} of {SLOT_COUNT} slots have no primary in CLUSTER SLOTS: their keys are unreachable",
                SLOT_COUNT - covered.min(SLOT_COUNT)
            ),
            "assign them: `redis-cli --cluster fix <node>` (or CLUSTER ADDSLOTS on the right node)",
        )
    })
}

/// Nodes whose slot map differs from the majority's: clients get MOVED until gossip converges.
pub(crate) fn slot_map_agreement(snapshot: &ClusterSnapshot) -> Vec<Finding> {
    let mut groups: HashMap<_, Vec<String>> = HashMap::new();
    for node in &snapshot.nodes {
        if let Some(slots) = &node.slots {
            groups.entry(slots).or_default().push(node.addr.clone());
        }
    }
    if groups.len() < 2 {
        return Vec::new();
    }
    let majority = groups.values().map(Vec::len).max().unwrap_or(0);
    let mut minority: Vec<String> = groups
        .into_values()
        .filter(|addrs| addrs.len() < majority)
        .flatten()
        .collect();
    minority.sort();
    if minority.is_empty() {
        // An even split: no majority to blame, so name every node.
        minority = snapshot.nodes.iter().map(|n| n.addr.clone()).collect();
    }
    vec![Finding::new(
        Severity::Warn,
        minority,
        "these nodes' CLUSTER SLOTS differ from the majority's (a migration or failover in progress, or a split)",
        "re-run in a few seconds; if it persists, compare CLUSTER NODES and run `redis-cli --cluster check`",
    )]
}

/// Primaries that own slots but have no healthy replica: losing one loses its slots.
pub(crate) fn replicas(snapshot: &ClusterSnapshot) -> Vec<Finding> {
    let nodes = &snapshot.topology;
    nodes
        .iter()
        .filter(|p| p.role == Role::Primary && p.slots > 0 && !p.failed)
        .filter(|p| {
            !nodes
                .iter()
                .any(|r| r.primary_id.as_deref() == Some(p.id.as_str()) && !r.failed)
        })
        .map(|p| {
            Finding::new(
                Severity::Warn,
                vec![p.addr.clone()],
                format!(
                    "primary of {} slots has no healthy replica: if it fails, they go down",
                    p.slots
                ),
                "add a replica: `redis-cli --cluster add-node NEW:PORT THIS:PORT --cluster-slave`",
            )
        })
        .collect()
}
