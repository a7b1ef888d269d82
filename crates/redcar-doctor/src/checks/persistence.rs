//! Checks of persistence settings that cost latency: AOF fsync on every write, RDB snapshots
//! (fork + copy-on-write) on busy nodes, and failed background saves.

use crate::model::{Finding, NodeData, Severity};

/// Writes per second since the last save above which RDB snapshots fire constantly.
const BUSY_WRITES_PER_SEC: f64 = 1000.0;
/// Operations per second above which a fork's pause is felt by many requests.
const BUSY_OPS_PER_SEC: u64 = 1000;

/// `appendonly yes` + `appendfsync always`: Redis calls fdatasync after every write, on its
/// single event loop, so every command (reads too) waits behind the disk (5-8 ms on cloud disks).
pub(crate) fn appendfsync(node: &NodeData) -> Option<Finding> {
    let aof = node.config("appendonly")? == "yes";
    (aof && node.config("appendfsync")? == "always").then(|| {
        Finding::node(
            Severity::Critical,
            node,
            "appendonly yes + appendfsync always: an fdatasync after every write stalls every command behind the disk",
            "CONFIG SET appendfsync everysec (loses at most ~1 s of writes on power loss), then CONFIG REWRITE",
        )
    })
}

/// `save` rules on a node taking many writes: each BGSAVE forks; the fork pauses the node and
/// copy-on-write can double its memory.
pub(crate) fn rdb_save(node: &NodeData) -> Option<Finding> {
    let rules = node.config("save")?.trim();
    if rules.is_empty() {
        return None;
    }
    let ops = node.info_u64("instantaneous_ops_per_sec").unwrap_or(0);
    let fix = "on a cache: CONFIG SET save \"\"; for durability prefer AOF everysec, or snapshot from replicas only";
    match write_rate(node) {
        Some(rate) if rate >= BUSY_WRITES_PER_SEC => Some(Finding::node(
            Severity::Warn,
            node,
            format!("RDB save rules \"{rules}\" with ~{rate:.0} writes/s: frequent fork + copy-on-write stalls (latest_fork_usec)"),
            fix,
        )),
        _ if ops >= BUSY_OPS_PER_SEC => Some(Finding::node(
            Severity::Info,
            node,
            format!("RDB save rules \"{rules}\" on a node serving {ops} ops/s: each snapshot forks and pauses it briefly"),
            fix,
        )),
        _ => None,
    }
}

/// Average writes per second since the last save: `rdb_changes_since_last_save` over the time
/// since `rdb_last_save_time` (by the node's own clock, `server_time_usec`, Redis 7+).
fn write_rate(node: &NodeData) -> Option<f64> {
    let changes = node.info_f64("rdb_changes_since_last_save")?;
    let now = node.info_f64("server_time_usec")? / 1e6;
    let elapsed = now - node.info_f64("rdb_last_save_time")?;
    (elapsed >= 1.0).then(|| changes / elapsed)
}

/// A failed BGSAVE: with `stop-writes-on-bgsave-error yes` (the default) the node refuses writes.
pub(crate) fn bgsave_status(node: &NodeData) -> Option<Finding> {
    (node.info("rdb_last_bgsave_status")? == "err").then(|| {
        Finding::node(
            Severity::Critical,
            node,
            "the last background save failed: writes get -MISCONF while stop-writes-on-bgsave-error is yes",
            "read the node's log (disk full? fork failed: vm.overcommit_memory=1?), then BGSAVE",
        )
    })
}
