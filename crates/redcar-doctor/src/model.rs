//! The data `redcar doctor` works on: what each node told us, and the findings checks produce.

use std::collections::HashMap;

use serde::Serialize;

/// How bad a finding is. Ordered, so the worst finding is the maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
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
pub(crate) struct Finding {
    /// Stable identifier of the check (see docs/doctor.md), e.g. `appendfsync`.
    pub(crate) check: &'static str,
    /// How bad it is; the worst finding decides the exit code.
    pub(crate) severity: Severity,
    /// `host:port` of every node concerned; empty for cluster-wide findings.
    pub(crate) nodes: Vec<String>,
    /// One line: what was seen and why it matters.
    pub(crate) summary: String,
    /// One line: how to fix it (empty for `ok`).
    pub(crate) fix: String,
}

/// A node's role as `CLUSTER NODES` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    /// Owns slots (or could: a primary without slots is still one).
    Primary,
    /// Replicates a primary.
    Replica,
}

/// One line of `CLUSTER NODES`, as the seed sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct ClusterNode {
    /// The node id, 40 hex digits.
    pub(crate) id: String,
    /// `host:port` clients connect to.
    pub(crate) addr: String,
    /// Primary or replica, by the `master`/`slave` flag.
    pub(crate) role: Role,
    /// For a replica, the id of its primary.
    pub(crate) primary_id: Option<String>,
    /// Flagged `fail` (the cluster agreed it is down) or `fail?` (this node suspects it).
    pub(crate) failed: bool,
    /// Number of slots the node owns (primaries only).
    pub(crate) slots: u32,
}

/// A slot range and the `host:port` of its primary, from one node's `CLUSTER SLOTS`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SlotOwner {
    /// First slot of the range.
    pub(crate) start: u16,
    /// Last slot, inclusive.
    pub(crate) end: u16,
    /// The owner's `host:port`.
    pub(crate) primary: String,
}

/// One `SLOWLOG GET` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeSlowEntry {
    /// Upper-case command name (arguments are left out: they may hold user data).
    pub(crate) command: String,
    /// How long it ran, in microseconds, as the node measured it.
    pub(crate) micros: u64,
}

/// One `LATENCY LATEST` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LatencyEvent {
    /// The latency event's name (`command`, `fork`, `aof-fsync-always`...).
    pub(crate) event: String,
    /// Its latest spike, in milliseconds.
    pub(crate) latest_ms: u64,
    /// Its worst spike since the node started or the events were reset, in milliseconds.
    pub(crate) max_ms: u64,
}

/// What one reachable node told us. A command that failed leaves its part empty and says why in
/// `errors`, so the other checks still run.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct NodeData {
    /// The node's `host:port`.
    pub(crate) addr: String,
    /// `INFO all`, flattened: `field → value` (`cmdstat_get → calls=1,usec=2,...`).
    pub(crate) info: HashMap<String, String>,
    /// `CONFIG GET` of the parameters the checks need.
    pub(crate) config: HashMap<String, String>,
    /// `CLUSTER INFO`, flattened.
    pub(crate) cluster_info: HashMap<String, String>,
    /// `CLUSTER SLOTS`, sorted; `None` when the command failed.
    pub(crate) slots: Option<Vec<SlotOwner>>,
    /// `SLOWLOG GET`'s entries, newest first.
    pub(crate) slowlog: Vec<NodeSlowEntry>,
    /// `LATENCY LATEST`'s events.
    pub(crate) latency: Vec<LatencyEvent>,
    /// Commands that failed on this node (e.g. `CONFIG` renamed away), one line each.
    pub(crate) errors: Vec<String>,
}

/// Everything gathered from one cluster: the input of every check.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ClusterSnapshot {
    /// The seed whose `CLUSTER NODES` described the cluster.
    pub(crate) seed: String,
    /// Every node the seed's `CLUSTER NODES` lists.
    pub(crate) topology: Vec<ClusterNode>,
    /// What each reachable node said.
    pub(crate) nodes: Vec<NodeData>,
    /// Nodes listed in the topology that could not be read: `(addr, why)`.
    pub(crate) unreachable: Vec<(String, String)>,
}

// === impl Severity ===

impl Severity {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Critical => "critical",
        }
    }

    /// Process exit status for a run whose worst finding has this severity.
    pub(crate) fn exit_code(self) -> u8 {
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
    pub(crate) fn new(
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
    pub(crate) fn node(
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
    pub(crate) fn info(&self, field: &str) -> Option<&str> {
        self.info.get(field).map(String::as_str)
    }

    /// An `INFO` field as a number (Redis prints integers and fixed-point decimals).
    pub(crate) fn info_f64(&self, field: &str) -> Option<f64> {
        self.info(field)?.trim().parse().ok()
    }

    pub(crate) fn info_u64(&self, field: &str) -> Option<u64> {
        self.info(field)?.trim().parse().ok()
    }

    /// A `CONFIG GET` value.
    pub(crate) fn config(&self, name: &str) -> Option<&str> {
        self.config.get(name).map(String::as_str)
    }

    pub(crate) fn config_u64(&self, name: &str) -> Option<u64> {
        self.config(name)?.trim().parse().ok()
    }

    /// True when `INFO replication` says this node is a replica.
    pub(crate) fn is_replica(&self) -> bool {
        self.info("role") == Some("slave")
    }
}
