//! The checks: one table of small pure functions over a [`ClusterSnapshot`], run in order, and how
//! their findings are combined into the report.

mod clients;
mod memory;
mod persistence;
mod replication;
mod topology;
mod workload;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;

use super::model::{ClusterSnapshot, Finding, NodeData, Severity};

/// One check: its stable id (used in JSON and docs/doctor.md), what "nothing found" means, and
/// the function that looks.
pub(crate) struct Check {
    /// Stable across releases: scripts match findings by it.
    pub(crate) id: &'static str,
    /// The summary reported when the check finds nothing.
    pub(crate) ok: &'static str,
    /// What the check looks at, and the function that looks.
    pub(crate) run: Run,
}

/// The shape of a check function: most look at one node at a time.
pub(crate) enum Run {
    /// Looks at the whole snapshot (topology, coverage, balance).
    Cluster(fn(&ClusterSnapshot) -> Vec<Finding>),
    /// Looks at one node at a time; at most one finding each.
    Node(fn(&NodeData) -> Option<Finding>),
    /// Looks at one node at a time; any number of findings each.
    NodeMany(fn(&NodeData) -> Vec<Finding>),
}

/// Every check, in report order (topology first: the rest matters less if slots are down).
/// One line per check, so the table reads as the list in docs/doctor.md.
#[rustfmt::skip]
pub(crate) const CHECKS: &[Check] = &[
    Check { id: "reachability", ok: "every node in CLUSTER NODES answered and none is flagged failing", run: Run::Cluster(topology::reachability) },
    Check { id: "cluster_state", ok: "every node reports cluster_state:ok", run: Run::Node(topology::cluster_state) },
    Check { id: "slot_coverage", ok: "all 16384 slots have a primary in every node's view", run: Run::Node(topology::slot_coverage) },
    Check { id: "slot_map_agreement", ok: "all nodes agree on the slot map", run: Run::Cluster(topology::slot_map_agreement) },
    Check { id: "replicas", ok: "every shard has at least one healthy replica", run: Run::Cluster(topology::replicas) },
    Check { id: "replica_link", ok: "every replica's link to its primary is up", run: Run::Node(replication::replica_link) },
    Check { id: "replication_lag", ok: "replicas are online and close to their primary's offset", run: Run::NodeMany(replication::replication_lag) },
    Check { id: "appendfsync", ok: "no node fsyncs the AOF on every write", run: Run::Node(persistence::appendfsync) },
    Check { id: "rdb_save", ok: "no RDB save rules on busy nodes", run: Run::Node(persistence::rdb_save) },
    Check { id: "bgsave_status", ok: "no failed background save", run: Run::Node(persistence::bgsave_status) },
    Check { id: "maxmemory", ok: "every node has a maxmemory limit", run: Run::Node(memory::maxmemory) },
    Check { id: "eviction_policy", ok: "no node pairs maxmemory with noeviction", run: Run::Node(memory::eviction_policy) },
    Check { id: "fragmentation", ok: "memory fragmentation is within 1.0-1.5 (or the dataset is small)", run: Run::Node(memory::fragmentation) },
    Check { id: "idle_timeout", ok: "no node closes idle clients within 300 s", run: Run::Node(clients::idle_timeout) },
    Check { id: "tcp_keepalive", ok: "tcp-keepalive is on everywhere", run: Run::Node(clients::tcp_keepalive) },
    Check { id: "maxclients", ok: "connected clients are below 80% of maxclients", run: Run::Node(clients::maxclients) },
    Check { id: "slowlog", ok: "slow logs are empty", run: Run::Node(workload::slowlog) },
    Check { id: "latency_events", ok: "no LATENCY LATEST events (recorded only when latency-monitor-threshold > 0)", run: Run::Node(workload::latency_events) },
    Check { id: "keys_command", ok: "no node has served KEYS", run: Run::Node(workload::keys_command) },
    Check { id: "command_mix", ok: "no data commands served yet", run: Run::Cluster(workload::command_mix) },
    Check { id: "node_errors", ok: "every diagnostic command was answered", run: Run::Node(node_errors) },
];

/// Runs every check. A check that finds nothing contributes one `ok` finding, so the report
/// shows what was verified. Worst findings come first; ties keep the table's order.
pub(crate) fn run_all(snapshot: &ClusterSnapshot) -> Vec<Finding> {
    let mut report = Vec::new();
    for check in CHECKS {
        let mut findings = run_one(&check.run, snapshot);
        findings.iter_mut().for_each(|f| f.check = check.id);
        if findings.is_empty() {
            let mut ok = Finding::new(Severity::Ok, Vec::new(), check.ok, "");
            ok.check = check.id;
            report.push(ok);
        } else {
            report.extend(merge(findings));
        }
    }
    report.sort_by_key(|f| std::cmp::Reverse(f.severity));
    report
}

fn run_one(run: &Run, snapshot: &ClusterSnapshot) -> Vec<Finding> {
    match run {
        Run::Cluster(check) => check(snapshot),
        Run::Node(check) => snapshot.nodes.iter().filter_map(check).collect(),
        Run::NodeMany(check) => snapshot.nodes.iter().flat_map(check).collect(),
    }
}

/// Findings that differ only in their nodes become one finding listing all of them, so a
/// setting shared by 30 nodes is one line, not 30.
pub(crate) fn merge(findings: Vec<Finding>) -> Vec<Finding> {
    let mut merged: Vec<Finding> = Vec::with_capacity(findings.len());
    for finding in findings {
        let same = merged.iter_mut().find(|m| {
            m.severity == finding.severity && m.summary == finding.summary && m.fix == finding.fix
        });
        match same {
            Some(m) => m.nodes.extend(finding.nodes),
            None => merged.push(finding),
        }
    }
    merged
}

/// Commands a node refused (e.g. `CONFIG` renamed away): the checks that need them were skipped.
fn node_errors(node: &NodeData) -> Option<Finding> {
    if node.errors.is_empty() {
        return None;
    }
    Some(Finding::node(
        Severity::Info,
        node,
        format!("checks skipped, commands refused: {}", node.errors.join("; ")),
        "allow doctor's read-only commands (INFO, CONFIG GET, CLUSTER, SLOWLOG GET, LATENCY LATEST) for its user",
    ))
}
