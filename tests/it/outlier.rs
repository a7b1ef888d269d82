//! Read policies, outlier ejection, fail-fast for shards with no usable node, and the retry
//! budget, against a real cluster whose nodes the tests kill.

use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::resp_client::command_calls;
use crate::support::{Redcar, RedisCluster, RedisServer, Value};

/// `GET` calls a node has served (INFO commandstats).
fn get_calls(node: &RedisServer) -> u64 {
    command_calls(&node.cli(&["INFO", "commandstats"]), "get")
}

/// The value of one Prometheus series in `/metrics`; a missing series fails the test (a typo or
/// an unregistered metric must not read as zero).
fn metric(redcar: &Redcar, series: &str) -> f64 {
    let (_, body) = redcar.http_get("/metrics").expect("scrape /metrics");
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in /metrics:\n{body}"))
}

/// Sends `GET key` until the reply satisfies `done` or `within` passes; returns the last reply.
fn get_until(redcar: &Redcar, key: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let mut client = redcar.client();
    let start = Instant::now();
    loop {
        let reply = client.q(&["GET", key]);
        if done(&reply) || start.elapsed() > within {
            return reply;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn reads_go_to_replicas_only_when_the_read_policy_says_so() {
    let cluster = RedisCluster::start(3, 1);
    let primary_port = cluster.primary_ports()[0];
    let key = cluster.key_on_node("policy", primary_port);
    let primary = cluster.node_by_port(primary_port);
    let replica = cluster.replicas_of(primary_port)[0];

    // 20 GETs through `redcar`: how many the primary and the replica served.
    let served = |redcar: &Redcar| {
        let before = (get_calls(primary), get_calls(replica));
        for _ in 0..20 {
            assert_eq!(redcar.cmd(&["GET", &key]), Value::bulk("v"));
        }
        (get_calls(primary) - before.0, get_calls(replica) - before.1)
    };

    let default = Redcar::start(&cluster.seeds());
    assert_eq!(default.cmd(&["SET", &key, "v"]), Value::simple("OK"));
    assert_eq!(
        served(&default),
        (20, 0),
        "primary policy: the primary serves"
    );

    let replicas = Redcar::start_with(&cluster.seeds(), &["--read-policy", "replica"]);
    // The replica may lag the SET by a moment.
    let reply = get_until(&replicas, &key, Duration::from_secs(5), |v| {
        *v == Value::bulk("v")
    });
    assert_eq!(reply, Value::bulk("v"));
    assert_eq!(
        served(&replicas),
        (0, 20),
        "replica policy: the replica serves"
    );
    // Writes still go to the primary.
    assert_eq!(replicas.cmd(&["SET", &key, "w"]), Value::simple("OK"));
    assert_eq!(primary.cmd(&["GET", &key]), Value::bulk("w"));
}

#[test]
fn strict_replica_policy_fails_fast_once_the_only_replica_is_ejected() {
    let mut cluster = RedisCluster::start(3, 1);
    let primary_port = cluster.primary_ports()[0];
    let key = cluster.key_on_node("strict", primary_port);
    let replica_port = cluster.replicas_of(primary_port)[0].port();
    let config = write_config(
        "router:\n  read_policy: replica\n  op_timeout: 2s\n\
         upstream:\n  outlier:\n    consecutive_failures: 2\n    base_ejection_time: 30s\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    assert_eq!(redcar.cmd(&["SET", &key, "v"]), Value::simple("OK"));
    cluster.node_by_port_mut(replica_port).kill();
    let reply = get_until(&redcar, &key, Duration::from_secs(10), |v| {
        v.error().is_some_and(|e| e.contains("no usable node"))
    });
    let message = reply.error().unwrap_or_default().to_string();
    assert!(
        message.starts_with("ERR redcar: no usable node for this read (read_policy: replica)")
            && message.contains(&format!("127.0.0.1:{replica_port} ejected")),
        "{reply:?}"
    );
    let ejected = format!("redcar_node_ejected{{node=\"127.0.0.1:{replica_port}\"}}");
    assert_eq!(metric(&redcar, &ejected), 1.0);
    // The node's health is visible in /topology.
    let (_, topology) = redcar.http_get("/topology").expect("topology");
    assert!(topology.contains("\"ejected\":true"), "{topology}");
}

#[test]
fn a_spent_retry_budget_returns_the_error_at_once() {
    let mut cluster = RedisCluster::start(3, 1);
    let primary_port = cluster.primary_ports()[1];
    let key = cluster.key_on_node("budget", primary_port);
    let replica_port = cluster.replicas_of(primary_port)[0].port();
    // No retries at all: every retry needs budget, and there is none.
    let config = write_config(
        "router:\n  read_policy: prefer-replica\n  retry_budget:\n    ratio: 0\n    min_per_second: 0\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    assert_eq!(redcar.cmd(&["SET", &key, "v"]), Value::simple("OK"));
    cluster.node_by_port_mut(replica_port).kill();
    let reply = get_until(&redcar, &key, Duration::from_secs(5), Value::is_error);
    let message = reply.error().unwrap_or_default();
    assert!(
        message.contains(&format!("127.0.0.1:{replica_port}"))
            && message.ends_with("(not retried: router.retry_budget is spent)"),
        "{reply:?}"
    );
    assert!(metric(&redcar, "redcar_retry_budget_exhausted_total") >= 1.0);
    assert_eq!(metric(&redcar, "redcar_retries_total"), 0.0);
}

#[test]
fn a_dead_primary_fails_fast_without_holding_up_other_shards_then_its_replica_takes_over() {
    // A long node timeout leaves several seconds between the kill and the promotion.
    let mut cluster = RedisCluster::start_with(3, 1, 6000);
    let ports = cluster.primary_ports();
    let (dead, healthy) = (ports[0], ports[1]);
    let dead_key = cluster.key_on_node("dead", dead);
    let healthy_key = cluster.key_on_node("healthy", healthy);
    let heir = cluster.replicas_of(dead)[0].port();
    let config = write_config(
        "router:\n  op_timeout: 5s\nupstream:\n  outlier:\n    consecutive_failures: 2\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", &dead_key, "kept"]), Value::simple("OK"));
    // Acknowledged by the replica too, so the failover cannot lose it.
    assert_eq!(c.q(&["WAIT", "1", "1000"]), Value::Int(1));
    assert_eq!(c.q(&["SET", &healthy_key, "fine"]), Value::simple("OK"));

    let killed_at = Instant::now();
    cluster.node_by_port_mut(dead).kill();
    let reply = get_until(&redcar, &dead_key, Duration::from_secs(3), |v| {
        v.error().is_some_and(|e| e.contains("no usable node"))
    });
    assert!(
        reply
            .error()
            .is_some_and(|e| e.contains("no usable node for this read")),
        "ejected primary: fail fast, got {reply:?}"
    );
    // A pipeline: the command for the dead shard is answered at once with the error, so the
    // healthy shard's reply behind it is not held up until op_timeout (5s).
    let started = Instant::now();
    let replies = c
        .pipeline(&[vec!["GET", &dead_key], vec!["GET", &healthy_key]])
        .expect("pipeline");
    let took = started.elapsed();
    let promoted = cluster
        .nodes_seen_by(healthy)
        .map(|nodes| nodes.iter().any(|n| n.port == heir && n.is_primary()))
        .unwrap_or(false);
    eprintln!(
        "fail-fast pipeline took {took:?}, {:?} after the kill (promoted: {promoted})",
        killed_at.elapsed()
    );
    // With a 6 s node timeout the promotion cannot have happened yet.
    assert!(
        !promoted,
        "promoted too early for this test to prove anything"
    );
    assert!(
        replies[0]
            .error()
            .is_some_and(|e| e.contains("no usable node")),
        "{replies:?}"
    );
    assert!(
        took < Duration::from_secs(4),
        "not held up to op_timeout: {took:?}"
    );
    assert_eq!(replies[1], Value::bulk("fine"));

    // Once the replica is promoted, reads and writes reach it, and the write survived.
    let reply = get_until(&redcar, &dead_key, Duration::from_secs(30), |v| {
        *v == Value::bulk("kept")
    });
    assert_eq!(
        reply,
        Value::bulk("kept"),
        "after {:?}",
        killed_at.elapsed()
    );
    assert_eq!(c.q(&["SET", &dead_key, "after"]), Value::simple("OK"));
    let ejections = format!("redcar_node_ejections_total{{node=\"127.0.0.1:{dead}\"}}");
    assert!(metric(&redcar, &ejections) >= 1.0);
}
