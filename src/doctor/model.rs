//! The data `redcar doctor` works on: what each node told us, and the findings checks produce.

use std::collections::HashMap;

use serde::Serialize;

/// How bad a finding is. Ordered, so the worst finding is the maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The check ran and found nothing to report.
    Ok,
    /// Worth knowing; no action required.
    Info,
    /// Likely to cost latency or data under some load or failure.
    Warn,
    /// Costs latency or availability now.
    Critical,
}

/// One result of one check: what is wrong, where, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable identifier of the check (see docs/doctor.md), e.g. `appendfsync`.
    pub check: &'static str,
    pub severity: Severity,
    /// `host:port` of every node concerned; empty for cluster-wide findings.
    pub nodes: Vec<String>,
    /// One line: what was seen and why it matters.
    pub summary: String,
    /// One line: how to fix it (empty for `ok`).
    pub fix: String,
}

/// A node's role as `CLUSTER NODES` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Primary,
    Replica,
}

/// One line of `CLUSTER NODES`, as the seed sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterNode {
    pub id: String,
    /// `host:port` clients connect to.
    pub addr: String,
    pub role: Role,
    /// For a replica, the id of its primary.
    pub primary_id: Option<String>,
    /// Flagged `fail` (the cluster agreed it is down) or `fail?` (this node suspects it).
    pub failed: bool,
    /// Number of slots the node owns (primaries only).
    pub slots: u32,
}

/// A slot range and the `host:port` of its primary, from one node's `CLUSTER SLOTS`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotOwner {
    pub start: u16,
    pub end: u16,
    pub primary: String,
}

/// One `SLOWLOG GET` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowEntry {
    /// Upper-case command name (arguments are left out: they may hold user data).
    pub command: String,
    pub micros: u64,
}

/// One `LATENCY LATEST` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyEvent {
    pub event: String,
    pub latest_ms: u64,
    pub max_ms: u64,
}

/// What one reachable node told us. A command that failed leaves its part empty and says why in
/// `errors`, so the other checks still run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeData {
    pub addr: String,
    /// `INFO all`, flattened: `field → value` (`cmdstat_get → calls=1,usec=2,...`).
    pub info: HashMap<String, String>,
    /// `CONFIG GET` of the parameters the checks need.
    pub config: HashMap<String, String>,
    /// `CLUSTER INFO`, flattened.
    pub cluster_info: HashMap<String, String>,
    /// `CLUSTER SLOTS`, sorted; `None` when the command failed.
    pub slots: Option<Vec<SlotOwner>>,
    pub slowlog: Vec<SlowEntry>,
    pub latency: Vec<LatencyEvent>,
    /// Commands that failed on this node (e.g. `CONFIG` renamed away), one line each.
    pub errors: Vec<String>,
}

/// Everything gathered from one cluster: the input of every check.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The seed whose `CLUSTER NODES` described the cluster.
    pub seed: String,
    pub topology: Vec<ClusterNode>,
    pub nodes: Vec<NodeData>,
    /// Nodes listed in the topology that could not be read: `(addr, why)`.
    pub unreachable: Vec<(String, String)>,
}

// === impl Severity ===

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Critical => "critical",
        }
    }

    /// Process exit status for a run whose worst finding has this severity.
    pub fn exit_code(self) -> u8 {
        match self {
            Severity::Ok | Severity::Info => 0,
            Severity::Warn => 1,
            Severity::Critical => 2,
        }
    }
}

// === impl Finding ===

impl Finding {
    /// A finding; `check` is filled in by the check runner, which knows the check's id.
    pub fn new(
        severity: Severity,
        nodes: Vec<String>,
        summary: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            check: "",
            severity,
            nodes,
            summary: summary.into(),
            fix: fix.into(),
        }
    }

    /// A finding about one node.
    pub fn node(
        severity: Severity,
        node: &NodeData,
        summary: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding::new(severity, vec![node.addr.clone()], summary, fix)
    }
}

// === impl NodeData ===

impl NodeData {
    /// An `INFO` field.
    pub fn info(&self, field: &str) -> Option<&str> {
        self.info.get(field).map(String::as_str)
    }

    /// An `INFO` field as a number (Redis prints integers and fixed-point decimals).
    pub fn info_f64(&self, field: &str) -> Option<f64> {
        self.info(field)?.trim().parse().ok()
    }

    pub fn info_u64(&self, field: &str) -> Option<u64> {
        self.info(field)?.trim().parse().ok()
    }

    /// A `CONFIG GET` value.
    pub fn config(&self, name: &str) -> Option<&str> {
        self.config.get(name).map(String::as_str)
    }

    pub fn config_u64(&self, name: &str) -> Option<u64> {
        self.config(name)?.trim().parse().ok()
    }

    /// True when `INFO replication` says this node is a replica.
    pub fn is_replica(&self) -> bool {
        self.info("role") == Some("slave")
    }
}
