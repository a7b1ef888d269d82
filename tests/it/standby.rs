//! Pooled node connections only where commands go: with `read_policy: primary` no replica keeps
//! one (topology refreshes ask the primaries), a primary demoted by a failover lets its go within
//! seconds rather than after `upstream.idle_timeout`, and replicas a read policy uses keep theirs.

use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, Value};

/// Frequent refreshes: each one used to open a pooled connection to a random node of the map.
const FAST_REFRESH: &str = "cluster:\n  refresh_interval: 200ms\n";

/// `redcar_node_connections` of the node on `port` (0 when it has no series).
fn open_to(redcar: &Redcar, port: u16) -> i64 {
    let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
    let series = format!("redcar_node_connections{{node=\"127.0.0.1:{port}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series.as_str())?.trim().parse().ok())
        .unwrap_or(0)
}

/// SET then GET of 50 keys spread over every slot range.
fn traffic(redcar: &Redcar) {
    let mut c = redcar.client();
    for i in 0..50 {
        let key = format!("standby:{i}");
        assert_eq!(c.q(&["SET", &key, "v"]), Value::simple("OK"));
        assert_eq!(c.q(&["GET", &key]), Value::bulk("v"));
    }
}

fn replica_ports(cluster: &RedisCluster) -> Vec<u16> {
    let primaries = cluster.primary_ports();
    primaries
        .iter()
        .flat_map(|&p| cluster.replicas_of(p).into_iter().map(|r| r.port()))
        .collect()
}

#[test]
fn with_read_policy_primary_no_replica_holds_pooled_connections() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config(FAST_REFRESH);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    // About 15 refreshes, with traffic on every primary.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        traffic(&redcar);
        thread::sleep(Duration::from_millis(100));
    }
    for port in cluster.primary_ports() {
        assert!(open_to(&redcar, port) >= 1, "primary {port} serves traffic");
    }
    for port in replica_ports(&cluster) {
        assert_eq!(
            open_to(&redcar, port),
            0,
            "replica {port} serves nothing under read_policy: primary"
        );
    }
}

#[test]
fn replicas_a_read_policy_uses_keep_their_connections() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config(&format!("{FAST_REFRESH}router:\n  read_policy: replica\n"));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    traffic(&redcar);
    // Longer than a node on standby keeps an idle connection.
    thread::sleep(Duration::from_secs(2));
    for port in replica_ports(&cluster) {
        assert!(
            open_to(&redcar, port) >= 1,
            "replica {port} serves reads and keeps its pooled connection"
        );
    }
    traffic(&redcar);
}

#[test]
fn a_primary_demoted_by_a_failover_closes_its_pooled_connections_within_seconds() {
    let cluster = RedisCluster::start(3, 1);
    // The default upstream.idle_timeout (300 s): only standby can close them this soon.
    let redcar = Redcar::start(&cluster.seeds());
    let old = cluster.primary_ports()[0];
    let key = cluster.key_on_node("demoted:", old);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", &key, "1"]), Value::simple("OK"));
    assert!(
        open_to(&redcar, old) >= 1,
        "the primary's connection is open"
    );
    let replica = cluster.replicas_of(old)[0].port();
    cluster.failover(replica);
    // Commands follow the new primary (MOVED, then a refresh); the old one is left idle.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut served = 0;
    loop {
        if c.q(&["INCR", &key]).as_int().is_some() {
            served += 1;
        }
        if served > 0 && open_to(&redcar, old) == 0 && open_to(&redcar, replica) >= 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the demoted primary {old} still has {} pooled connections 10 s after the failover",
            open_to(&redcar, old)
        );
        thread::sleep(Duration::from_millis(100));
    }
    // It is still in the map (a replica now), and the key is still served.
    let (_, topology) = redcar.http_get("/topology").expect("topology");
    assert!(topology.contains(&format!("127.0.0.1:{old}")), "{topology}");
    let value = c.q(&["GET", &key]);
    assert!(matches!(value, Value::Bulk(Some(_))), "{value:?}");
}
