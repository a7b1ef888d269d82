//! Safe topology against a real cluster: failovers are adopted with the new primary's higher
//! config epoch (a manual one at once, a primary's death once a second node confirms it), and
//! /topology shows each shard's epoch as the cluster reports it.

use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster};

/// Frequent periodic refreshes, so the test sees the new map without sending traffic.
const FAST_REFRESH: &str = "cluster:\n  refresh_interval: 200ms\n  refresh_min_gap: 10ms\n";

fn topology_json(redcar: &Redcar) -> serde_json::Value {
    let (status, body) = redcar.http_get("/topology").expect("admin reachable");
    assert_eq!(status, 200, "/topology: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/topology is not JSON ({e}): {body}"))
}

/// The range of /topology holding `slot`.
fn range_of(topology: &serde_json::Value, slot: u16) -> serde_json::Value {
    let ranges = topology["ranges"].as_array().expect("ranges");
    ranges
        .iter()
        .find(|r| {
            r["start"].as_u64() <= Some(u64::from(slot))
                && Some(u64::from(slot)) <= r["end"].as_u64()
        })
        .cloned()
        .unwrap_or_else(|| panic!("no range holds slot {slot}: {topology}"))
}

/// The config epoch of the node on `port`, as a live node's `CLUSTER NODES` reports it.
fn config_epoch(cluster: &RedisCluster, port: u16) -> u64 {
    let text = cluster.any_node().cli(&["CLUSTER", "NODES"]);
    let suffix = format!(":{port}@");
    text.lines()
        .find(|line| line.split(' ').nth(1).is_some_and(|a| a.contains(&suffix)))
        .and_then(|line| line.split(' ').nth(6))
        .and_then(|epoch| epoch.parse().ok())
        .unwrap_or_else(|| panic!("no epoch for port {port} in:\n{text}"))
}

/// Polls /topology until `slot`'s primary is `port`, returning that topology.
fn wait_for_primary(redcar: &Redcar, slot: u16, port: u16, within: Duration) -> serde_json::Value {
    let want = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + within;
    loop {
        let topology = topology_json(redcar);
        if range_of(&topology, slot)["primary"]["addr"] == want.as_str() {
            return topology;
        }
        assert!(
            Instant::now() < deadline,
            "redcar never adopted {want} for slot {slot}: {topology}\n{}",
            redcar.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_manual_failover_is_adopted_with_the_new_primarys_higher_epoch() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config(FAST_REFRESH);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let before = topology_json(&redcar);
    assert_eq!(before["has_epochs"], true, "{before}");
    for port in cluster.primary_ports() {
        let slot = cluster
            .slot_map()
            .iter()
            .find(|r| r.primary == port)
            .expect("owns slots")
            .start;
        assert_eq!(
            range_of(&before, slot)["epoch"].as_u64(),
            Some(config_epoch(&cluster, port)),
            "epoch of {port} in {before}"
        );
    }
    let old = cluster.primary_port_for_slot(0);
    let old_epoch = config_epoch(&cluster, old);
    let replica = cluster.replicas_of(old)[0].port();

    cluster.failover(replica);
    let after = wait_for_primary(&redcar, 0, replica, Duration::from_secs(10));
    let range = range_of(&after, 0);
    let new_epoch = range["epoch"].as_u64().expect("epoch");
    assert!(
        new_epoch > old_epoch,
        "epoch {new_epoch} after {old_epoch}: {after}"
    );
    assert_eq!(new_epoch, config_epoch(&cluster, replica));
    let (_, metrics) = redcar.http_get("/metrics").expect("scrape");
    assert!(
        metrics.contains("redcar_topology_rejected_total{reason=\"stale\"} 0\n"),
        "a genuine failover is not stale:\n{metrics}"
    );
    // The log says what changed in one short line, not the whole map (that is at debug level).
    let log = redcar.log();
    let adopted: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("adopted new slot map"))
        .collect();
    let moved = format!("127.0.0.1:{old} → 127.0.0.1:{replica}");
    assert!(
        adopted
            .iter()
            .any(|l| l.contains(&moved) && l.contains("slots moved")),
        "a line names the move {moved}:\n{}",
        adopted.join("\n")
    );
    assert!(
        adopted
            .iter()
            .all(|l| !l.contains("slots=") && l.len() < 600),
        "no adopted-map line carries the whole map:\n{}",
        adopted.join("\n")
    );
}

#[test]
fn a_dead_primary_is_replaced_once_a_second_node_confirms_it() {
    let mut cluster = RedisCluster::start(3, 1);
    let config = write_config(FAST_REFRESH);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let old = cluster.primary_port_for_slot(0);
    let replica = cluster.replicas_of(old)[0].port();

    cluster.node_by_port_mut(old).kill();
    // Failure detection (node timeout) plus the replica's election.
    let after = wait_for_primary(&redcar, 0, replica, Duration::from_secs(30));
    let range = range_of(&after, 0);
    let replicas = range["replicas"].as_array().expect("replicas");
    let dead = format!("127.0.0.1:{old}");
    assert!(
        replicas.iter().all(|r| r["addr"] != dead.as_str()),
        "the dead node is no replica: {after}"
    );
    // The old primary vanished from the map: that surprise needed a second node's word.
    let log = redcar.log();
    assert!(log.contains("surprising slot map confirmed"), "{log}");
}
