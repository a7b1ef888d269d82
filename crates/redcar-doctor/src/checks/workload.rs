//! Checks of what the nodes are being asked to do: slow log, latency events, KEYS, and the mix
//! of data commands (from `INFO commandstats`).

use std::collections::HashMap;

use crate::model::{ClusterSnapshot, Finding, NodeData, Severity};
use crate::parse::parse_fields;
use redcar_protocol::commands::spec::flags;
use redcar_protocol::commands::CommandTable;

/// A latency event this long (all-time max) is felt by users, not just by graphs.
const LATENCY_WARN_MS: u64 = 100;
/// How many commands the slow-log and command-mix summaries name.
const TOP: usize = 5;

/// The slow log's most frequent commands, with their worst duration.
pub(crate) fn slowlog(node: &NodeData) -> Option<Finding> {
    if node.slowlog.is_empty() {
        return None;
    }
    let mut by_command: HashMap<&str, (usize, u64)> = HashMap::new();
    for entry in &node.slowlog {
        let slot = by_command.entry(&entry.command).or_default();
        slot.0 += 1;
        slot.1 = slot.1.max(entry.micros);
    }
    let mut top: Vec<_> = by_command.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let listed: Vec<String> = top
        .iter()
        .take(TOP)
        .map(|(cmd, (n, max))| format!("{cmd} x{n} (max {:.1} ms)", *max as f64 / 1000.0))
        .collect();
    Some(Finding::node(
        Severity::Info,
        node,
        format!("slow log (last {}): {}", node.slowlog.len(), listed.join(", ")),
        "SLOWLOG GET on the node shows arguments; replace O(N) commands (KEYS -> SCAN, big HGETALL -> HSCAN)",
    ))
}

/// `LATENCY LATEST` events: info, or warn once one has reached 100 ms.
pub(crate) fn latency_events(node: &NodeData) -> Option<Finding> {
    if node.latency.is_empty() {
        return None;
    }
    let worst = node.latency.iter().map(|e| e.max_ms).max().unwrap_or(0);
    let listed: Vec<String> = node
        .latency
        .iter()
        .map(|e| format!("{} {} ms (max {} ms)", e.event, e.latest_ms, e.max_ms))
        .collect();
    let severity = if worst >= LATENCY_WARN_MS {
        Severity::Warn
    } else {
        Severity::Info
    };
    Some(Finding::node(
        severity,
        node,
        format!("latency events: {}", listed.join(", ")),
        "LATENCY DOCTOR on the node explains each (aof-fsync-* -> appendfsync/disk, fork -> RDB/AOF rewrite, command -> SLOWLOG)",
    ))
}

/// `KEYS` walks the whole keyspace while the node serves nobody else.
pub(crate) fn keys_command(node: &NodeData) -> Option<Finding> {
    let stats = parse_fields(node.info("cmdstat_keys")?);
    let calls: u64 = stats.get("calls")?.parse().ok()?;
    let usec: u64 = stats.get("usec").and_then(|u| u.parse().ok()).unwrap_or(0);
    (calls > 0).then(|| {
        Finding::node(
            Severity::Warn,
            node,
            format!(
                "{calls} KEYS calls ({} us each): O(N) over all keys, blocking the node meanwhile",
                usec / calls
            ),
            "use SCAN with MATCH and COUNT, or keep the key names you need in a set",
        )
    })
}

/// The cluster-wide mix of data commands (those with keys, so admin traffic such as INFO and
/// doctor's own calls is left out): top commands by calls and the share of writes. A replica's
/// writes are its primary's, replayed, so only its reads count.
pub(crate) fn command_mix(snapshot: &ClusterSnapshot) -> Vec<Finding> {
    let table = CommandTable::builtin();
    let mut calls: HashMap<&str, u64> = HashMap::new();
    let (mut total, mut writes) = (0u64, 0u64);
    for node in &snapshot.nodes {
        for (name, n) in command_calls(node) {
            let Some(spec) = table.by_name(name.as_bytes()) else {
                continue;
            };
            let write = spec.has_flag(flags::WRITE);
            if !spec.has_keys() || (write && node.is_replica()) {
                continue;
            }
            *calls.entry(spec.name).or_default() += n;
            total += n;
            writes += if write { n } else { 0 };
        }
    }
    if total == 0 {
        return Vec::new();
    }
    let mut top: Vec<(&str, u64)> = calls.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let listed: Vec<String> = top
        .iter()
        .take(TOP)
        .map(|(name, n)| format!("{name} {:.0}%", 100.0 * *n as f64 / total as f64))
        .collect();
    vec![Finding::new(
        Severity::Info,
        Vec::new(),
        format!(
            "{total} data commands since start: {}; writes are {:.0}%",
            listed.join(", "),
            100.0 * writes as f64 / total as f64
        ),
        "compare with what the application should be doing (e.g. writes on a read path)",
    )]
}

/// `cmdstat_<name>:calls=N,...` → `(name, N)`.
fn command_calls(node: &NodeData) -> impl Iterator<Item = (&str, u64)> {
    node.info.iter().filter_map(|(key, value)| {
        let name = key.strip_prefix("cmdstat_")?;
        let calls = parse_fields(value).get("calls")?.parse().ok()?;
        Some((name, calls))
    })
}
