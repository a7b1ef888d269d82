//! Checks of memory settings: no limit, a limit that refuses writes, and fragmentation/swap.

use crate::model::{Finding, NodeData, Severity};

/// Fragmentation only matters once there is enough data for the wasted RSS to hurt.
const FRAGMENTATION_MIN_USED: u64 = 100 * 1024 * 1024;
/// Below this, RSS lags allocations on a near-empty node and a ratio < 1 means nothing.
const SWAP_MIN_USED: u64 = 10 * 1024 * 1024;
const FRAGMENTATION_HIGH: f64 = 1.5;

/// `maxmemory 0`: the node grows until the kernel swaps it or the OOM killer ends it.
pub(crate) fn maxmemory(node: &NodeData) -> Option<Finding> {
    (node.config_u64("maxmemory")? == 0).then(|| {
        Finding::node(
            Severity::Warn,
            node,
            "maxmemory 0 (no limit): the node can grow into swap or the OOM killer",
            "CONFIG SET maxmemory to ~60-70% of the host's RAM (leave room for fork copy-on-write)",
        )
    })
}

/// `noeviction` with a limit: when full, writes fail with `-OOM`. Right for a data store (never
/// drop data), wrong for a cache (which should evict instead).
pub(crate) fn eviction_policy(node: &NodeData) -> Option<Finding> {
    let limited = node.config_u64("maxmemory")? > 0;
    (limited && node.config("maxmemory-policy")? == "noeviction").then(|| {
        Finding::node(
            Severity::Info,
            node,
            "maxmemory-policy noeviction: when maxmemory is reached writes fail with OOM (right for a store, wrong for a cache)",
            "for a cache: CONFIG SET maxmemory-policy allkeys-lru (or allkeys-lfu); for a store: alert on used_memory",
        )
    })
}

/// `mem_fragmentation_ratio` (RSS / used): high wastes RAM; below 1 means pages are swapped out.
pub(crate) fn fragmentation(node: &NodeData) -> Option<Finding> {
    let ratio = node.info_f64("mem_fragmentation_ratio")?;
    let used = node.info_u64("used_memory")?;
    let mib = used / (1024 * 1024);
    if ratio > FRAGMENTATION_HIGH && used > FRAGMENTATION_MIN_USED {
        return Some(Finding::node(
            Severity::Warn,
            node,
            format!("mem_fragmentation_ratio {ratio:.2} with {mib} MiB used: RSS is much larger than the data"),
            "CONFIG SET activedefrag yes, or fail over and restart the node off-peak",
        ));
    }
    (ratio < 1.0 && used >= SWAP_MIN_USED).then(|| {
        Finding::node(
            Severity::Warn,
            node,
            format!("mem_fragmentation_ratio {ratio:.2} < 1 with {mib} MiB used: part of the data is swapped out, each access is a disk read"),
            "give the host more RAM or lower maxmemory; check `vmstat` si/so; avoid swap on Redis hosts",
        )
    })
}
