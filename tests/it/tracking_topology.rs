//! Client-side caching across topology changes and lost connections: tracking clients are told
//! to flush (a null invalidation) whenever redcar cannot vouch for what it tracked.

use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, RespClient};
use crate::tracking::{expect_push, flush, invalidate, next_within, tracker};

/// Frequent periodic refreshes, so redcar sees a new map without traffic.
const FAST_REFRESH: &str = "cluster:\n  refresh_interval: 200ms\n  refresh_min_gap: 10ms\n";

/// Reads frames until a null invalidation, within `wait`.
fn wait_for_flush(c: &mut RespClient, wait: Duration, what: &str) {
    let deadline = Instant::now() + wait;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match next_within(c, Duration::from_millis(500)) {
            Some(frame) if frame == flush() => return,
            Some(frame) => seen.push(frame),
            None => {}
        }
    }
    panic!("{what}: no null invalidation within {wait:?} (saw {seen:?})");
}

#[test]
fn a_failover_tells_tracking_clients_to_flush() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config(FAST_REFRESH);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0].port();
    let key = cluster.key_on_node("ct:fo", primary);
    let mut c = tracker(&redcar, &[]);
    assert!(c.q(&["GET", &key]).is_nil());
    cluster.failover(replica);
    wait_for_flush(&mut c, Duration::from_secs(20), "CLUSTER FAILOVER");
    let counted = Instant::now() + Duration::from_secs(5);
    while redcar.metric_sum("redcar_tracking_flushes_total{cause=\"topology\"} ") < 1.0 {
        assert!(
            Instant::now() < counted,
            "the flush is counted as a topology one"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Tracking goes on at the new primary.
    while next_within(&mut c, Duration::from_millis(300)).is_some() {}
    assert!(c.q(&["GET", &key]).is_nil());
    redcar.client().q(&["SET", &key, "v"]);
    expect_push(&mut c, invalidate(&[&key]), "a write at the new primary");
}

#[test]
fn a_lost_invalidation_connection_tells_tracking_clients_to_flush() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let key = "ct:lost";
    let mut c = tracker(&redcar, &[]);
    assert!(c.q(&["GET", key]).is_nil());
    let node = cluster.primary_for_key(key);
    let id = connection_named(node, "redcar-invalidations");
    node.cmd(&["CLIENT", "KILL", "ID", &id]);
    wait_for_flush(
        &mut c,
        Duration::from_secs(10),
        "invalidation connection killed",
    );
    // It reconnects, the lanes are pointed at it, and tracking works again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut round = 0;
    loop {
        while next_within(&mut c, Duration::from_millis(200)).is_some() {}
        c.q(&["GET", key]);
        round += 1;
        redcar.client().q(&["SET", key, &round.to_string()]);
        match next_within(&mut c, Duration::from_secs(1)) {
            Some(frame) if frame == invalidate(&[key]) => break,
            other => assert!(
                Instant::now() < deadline,
                "tracking did not resume: {other:?}"
            ),
        }
    }
    // Only the lane in use was pointed at the new connection: the RESP3 lane and the near
    // cache's BCAST lanes (off here) were not opened for it.
    let list = node.cli(&["CLIENT", "LIST"]);
    let named = |name: &str| list.matches(&format!("name={name} ")).count();
    assert_eq!(named("redcar-tracked"), 1, "{list}");
    assert_eq!(named("redcar-near"), 0, "{list}");
}

/// The id of the connection named `name` in `CLIENT LIST` of `node`.
pub fn connection_named(node: &crate::support::RedisServer, name: &str) -> String {
    let list = node.cli(&["CLIENT", "LIST"]);
    list.lines()
        .find(|line| line.contains(&format!("name={name} ")))
        .and_then(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
        .unwrap_or_else(|| panic!("no connection named {name} on the node: {list}"))
        .to_string()
}

#[test]
fn a_lost_tracked_lane_tells_tracking_clients_to_flush_at_once() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let key = "ct:lane";
    let mut c = tracker(&redcar, &[]);
    assert!(c.q(&["GET", key]).is_nil());
    let node = cluster.primary_for_key(key);
    let lane = connection_named(node, "redcar-tracked");
    node.cmd(&["CLIENT", "KILL", "ID", &lane]);
    // The node forgot what the lane tracked: every tracking client is told, without waiting
    // for the next tracked command to find the lane gone.
    wait_for_flush(&mut c, Duration::from_secs(5), "tracked lane lost");
    // Read again after the flush (as a client that emptied its cache does): the lane
    // reconnects, and the key is tracked on the new connection.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = c.q(&["GET", key]);
        if !reply.is_error() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lane did not come back: {reply:?}"
        );
    }
    redcar.client().q(&["SET", key, "v"]);
    expect_push(
        &mut c,
        invalidate(&[key]),
        "tracked again on the new lane connection",
    );
}

#[test]
fn a_flushall_on_a_node_tells_tracking_clients_to_flush() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let key = "ct:flushall";
    let mut c = tracker(&redcar, &[]);
    assert!(c.q(&["GET", key]).is_nil());
    cluster.primary_for_key(key).cmd(&["FLUSHALL"]);
    wait_for_flush(&mut c, Duration::from_secs(5), "FLUSHALL on the node");
}

#[test]
fn reads_served_by_replicas_are_invalidated_too() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--read-policy", "replica"]);
    let key = "ct:replica";
    let mut c = tracker(&redcar, &[]);
    redcar.client().q(&["SET", key, "1"]);
    // The replica may not have the write yet: read until it does.
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.q(&["GET", key]).as_bytes() != Some(b"1") {
        assert!(Instant::now() < deadline, "the replica never caught up");
    }
    redcar.client().q(&["SET", key, "2"]);
    // The replica invalidates as it applies the write (and the primary, which the SET read
    // nothing from, does not): one push.
    expect_push(
        &mut c,
        invalidate(&[key]),
        "a write replicated to the replica read from",
    );
}

#[test]
fn a_failover_under_bcast_flushes_again_once_the_new_primary_registered() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config(FAST_REFRESH);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let primary = cluster.primary_ports()[0];
    let new_primary = cluster.replicas_of(primary)[0];
    let key = cluster.key_on_node("ct:bfo:", primary);
    let mut c = tracker(&redcar, &["BCAST", "PREFIX", "ct:bfo:"]);
    cluster.failover(new_primary.port());
    // Once when the map is adopted, once more when the new primary confirmed the prefixes.
    let topology = "redcar_tracking_flushes_total{cause=\"topology\"} ";
    let deadline = Instant::now() + Duration::from_secs(20);
    while redcar.metric_sum(topology) < 2.0 {
        assert!(
            Instant::now() < deadline,
            "no second flush after the failover"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The new primary broadcasts: a write straight on it reaches the client.
    new_primary.cmd(&["SET", &key, "v"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match next_within(&mut c, Duration::from_millis(500)) {
            Some(frame) if frame == invalidate(&[&key]) => break,
            other => assert!(Instant::now() < deadline, "no invalidation: {other:?}"),
        }
    }
}
