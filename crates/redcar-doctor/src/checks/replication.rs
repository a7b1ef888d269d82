//! Checks of replication: replicas cut off from their primary, and replicas falling behind.

use crate::model::{Finding, NodeData, Severity};
use crate::parse::parse_fields;

/// Bytes of replication stream a replica may trail by before it is worth a warning.
const LAG_BYTES_WARN: u64 = 1024 * 1024;
/// Seconds since a replica's last ACK (`lag=`) before it is worth a warning; it ACKs every second.
const LAG_SECONDS_WARN: u64 = 10;

/// A replica whose `master_link_status` is `down` serves stale data and cannot fail over safely.
pub(crate) fn replica_link(node: &NodeData) -> Option<Finding> {
    if !node.is_replica() || node.info("master_link_status") != Some("down") {
        return None;
    }
    let primary = format!(
        "{}:{}",
        node.info("master_host").unwrap_or("?"),
        node.info("master_port").unwrap_or("?")
    );
    let since = node.info("master_link_down_since_seconds").unwrap_or("?");
    Some(Finding::node(
        Severity::Critical,
        node,
        format!("replica's link to its primary {primary} is down (for {since} s): it serves stale data"),
        "check the primary's reachability and both logs (repl-timeout, client-output-buffer-limit replica)",
    ))
}

/// From a primary's `INFO replication`: `slaveN:ip=..,port=..,state=online,offset=..,lag=..`.
/// Its own `master_repl_offset` is read in the same INFO, so the difference is a true snapshot.
pub(crate) fn replication_lag(node: &NodeData) -> Vec<Finding> {
    let Some(primary_offset) = node.info_u64("master_repl_offset") else {
        return Vec::new();
    };
    let mut replicas: Vec<(&String, &String)> = node
        .info
        .iter()
        .filter(|(k, _)| k.starts_with("slave") && k[5..].chars().all(|c| c.is_ascii_digit()))
        .collect();
    replicas.sort();
    replicas
        .into_iter()
        .filter_map(|(_, line)| replica_finding(node, primary_offset, line))
        .collect()
}

fn replica_finding(node: &NodeData, primary_offset: u64, line: &str) -> Option<Finding> {
    let f = parse_fields(line);
    let replica = format!("{}:{}", f.get("ip")?, f.get("port")?);
    let nodes = vec![node.addr.clone(), replica.clone()];
    let state = f.get("state").copied().unwrap_or("?");
    if state != "online" {
        return Some(Finding::new(
            Severity::Info,
            nodes,
            format!("replica {replica} is in state {state}: a full resynchronisation is running"),
            "wait for it; if it repeats, raise repl-backlog-size so reconnects can resume partially",
        ));
    }
    let behind = primary_offset.saturating_sub(f.get("offset")?.parse().ok()?);
    let lag: u64 = f.get("lag").and_then(|l| l.parse().ok()).unwrap_or(0);
    (behind > LAG_BYTES_WARN || lag > LAG_SECONDS_WARN).then(|| {
        Finding::new(
            Severity::Warn,
            nodes,
            format!("replica {replica} is {behind} bytes behind, last ACK {lag} s ago: reads from it are stale"),
            "check the replica's CPU, disk (its own AOF/RDB) and network; big writes to the primary",
        )
    })
}
