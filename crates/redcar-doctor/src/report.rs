//! Presenting the findings: a table for people, JSON for machines, and the exit status.

use std::fmt::Write;

use serde::Serialize;

use super::model::{ClusterSnapshot, Finding, Role, Severity};

/// Version of the JSON layout below; bumped when a field changes meaning or goes away.
const JSON_VERSION: u32 = 1;
/// Nodes named in the NODES column before the rest is summarised as "+N".
const NODES_SHOWN: usize = 1;

/// The JSON document (`--json`), documented field by field in docs/doctor.md.
#[derive(Debug, Serialize)]
pub(crate) struct Report<'a> {
    /// The document's format version ([`JSON_VERSION`]); bumped only when a field changes meaning.
    pub(crate) version: u32,
    /// The node the topology was read from.
    pub(crate) seed: &'a str,
    /// Every node of the topology, readable or not.
    pub(crate) nodes: Vec<NodeSummary>,
    /// Every check's result, in check order.
    pub(crate) findings: &'a [Finding],
    /// How many findings of each severity.
    pub(crate) counts: Counts,
    /// The worst severity found.
    pub(crate) worst: Severity,
    /// What the process exits with, so scripts reading the JSON need not map severities themselves.
    pub(crate) exit_code: u8,
}

/// One node of the topology and whether doctor could read it.
#[derive(Debug, Serialize)]
pub(crate) struct NodeSummary {
    /// The node's `host:port`.
    pub(crate) addr: String,
    /// Its node id.
    pub(crate) id: String,
    /// Primary or replica.
    pub(crate) role: Role,
    /// For a replica, its primary's `host:port` (when known).
    pub(crate) primary: Option<String>,
    /// Whether doctor could connect and read it; its checks are skipped otherwise.
    pub(crate) reachable: bool,
}

/// Findings per severity.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Counts {
    /// Checks that passed.
    pub(crate) ok: usize,
    /// Findings worth knowing, nothing to fix.
    pub(crate) info: usize,
    /// Findings that should be fixed.
    pub(crate) warn: usize,
    /// Findings that put data or availability at risk now.
    pub(crate) critical: usize,
}

// === impl Report ===

impl<'a> Report<'a> {
    pub(crate) fn new(snapshot: &'a ClusterSnapshot, findings: &'a [Finding]) -> Report<'a> {
        let worst = findings
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Ok);
        Report {
            version: JSON_VERSION,
            seed: &snapshot.seed,
            nodes: node_summaries(snapshot),
            findings,
            counts: Counts::of(findings),
            worst,
            exit_code: worst.exit_code(),
        }
    }

    pub(crate) fn to_json(&self) -> String {
        // Serialising plain strings and numbers cannot fail; fall back to a valid document anyway.
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": \"cannot encode report: {e}\"}}"))
    }

    /// The human table: problems first, one row each with its fix underneath, then the checks
    /// that passed on one line.
    pub(crate) fn to_table(&self) -> String {
        let mut out = String::new();
        let primaries = self
            .nodes
            .iter()
            .filter(|n| n.role == Role::Primary)
            .count();
        let answered = self.nodes.iter().filter(|n| n.reachable).count();
        let _ = writeln!(
            out,
            "redcar doctor: {} nodes ({primaries} primaries, {} replicas) via {}; {answered} answered\n",
            self.nodes.len(),
            self.nodes.len() - primaries,
            self.seed
        );
        let problems: Vec<&Finding> = self
            .findings
            .iter()
            .filter(|f| f.severity != Severity::Ok)
            .collect();
        if !problems.is_empty() {
            let _ = writeln!(
                out,
                "{:<9} {:<19} {:<32} FINDING",
                "SEVERITY", "CHECK", "NODES"
            );
        }
        for finding in problems {
            self.write_row(&mut out, finding);
        }
        let passed: Vec<&str> = self
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Ok)
            .map(|f| f.check)
            .collect();
        if !passed.is_empty() {
            let _ = writeln!(out, "\nok: {}", passed.join(", "));
        }
        let c = &self.counts;
        let _ = writeln!(
            out,
            "\nworst: {} (exit {}): {} critical, {} warn, {} info, {} ok",
            self.worst.as_str(),
            self.exit_code,
            c.critical,
            c.warn,
            c.info,
            c.ok
        );
        out
    }

    fn write_row(&self, out: &mut String, finding: &Finding) {
        let pad = " ".repeat(9 + 1 + 19 + 1 + 32 + 1);
        let _ = writeln!(
            out,
            "{:<9} {:<19} {:<32} {}",
            finding.severity.as_str(),
            finding.check,
            self.nodes_column(&finding.nodes),
            finding.summary
        );
        if finding.nodes.len() > NODES_SHOWN && finding.nodes.len() < self.nodes.len() {
            let _ = writeln!(out, "{pad}nodes: {}", finding.nodes.join(", "));
        }
        if !finding.fix.is_empty() {
            let _ = writeln!(out, "{pad}fix: {}", finding.fix);
        }
    }

    fn nodes_column(&self, nodes: &[String]) -> String {
        match nodes.len() {
            0 => "(cluster)".to_string(),
            n if n == self.nodes.len() && n > 1 => format!("all {n} nodes"),
            n if n > NODES_SHOWN => {
                format!("{} +{}", nodes[..NODES_SHOWN].join(","), n - NODES_SHOWN)
            }
            _ => nodes.join(","),
        }
    }
}

fn node_summaries(snapshot: &ClusterSnapshot) -> Vec<NodeSummary> {
    let addr_of = |id: &str| {
        snapshot
            .topology
            .iter()
            .find(|n| n.id == id)
            .map(|n| n.addr.clone())
    };
    snapshot
        .topology
        .iter()
        .map(|n| NodeSummary {
            addr: n.addr.clone(),
            id: n.id.clone(),
            role: n.role,
            primary: n.primary_id.as_deref().and_then(addr_of),
            reachable: snapshot.nodes.iter().any(|d| d.addr == n.addr),
        })
        .collect()
}

// === impl Counts ===

impl Counts {
    fn of(findings: &[Finding]) -> Counts {
        let mut counts = Counts::default();
        for finding in findings {
            *match finding.severity {
                Severity::Ok => &mut counts.ok,
                Severity::Info => &mut counts.info,
                Severity::Warn => &mut counts.warn,
                Severity::Critical => &mut counts.critical,
            } += 1;
        }
        counts
    }
}
