//! Tests of the test harness itself, against real redis-server processes.

use std::time::{Duration, Instant};

use crate::support::{RedisCluster, RedisServer, Value};

#[test]
fn standalone_server_set_get_pipeline_restart() {
    let mut s = RedisServer::start();
    let mut c = s.client();
    assert_eq!(c.q(&["SET", "k", "v"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "k"]), Value::bulk("v"));
    assert_eq!(c.q(&["GET", "missing"]), Value::Bulk(None));
    assert!(c.q(&["NOSUCHCOMMAND"]).is_error());
    let replies = c
        .pipeline(&[
            vec!["INCR", "n"],
            vec!["INCR", "n"],
            vec!["RPUSH", "l", "a", "b"],
            vec!["LRANGE", "l", "0", "-1"],
        ])
        .expect("pipeline");
    assert_eq!(
        replies,
        vec![
            Value::Int(1),
            Value::Int(2),
            Value::Int(2),
            Value::Array(Some(vec![Value::bulk("a"), Value::bulk("b")])),
        ]
    );
    assert_eq!(s.cli(&["GET", "n"]), "2");

    let port = s.port();
    s.kill();
    assert!(c.cmd(&["PING"]).is_err(), "killed server still answers");
    s.restart();
    assert_eq!(s.port(), port);
    assert_eq!(s.cli(&["PING"]), "PONG");
    // --save "" and no AOF: data is gone after a kill.
    assert_eq!(s.cmd(&["GET", "k"]), Value::Bulk(None));
}

#[test]
fn cluster_reaches_ok_and_slot_migration_moves_keys() {
    let t0 = Instant::now();
    let cluster = RedisCluster::start(3, 1);
    eprintln!("cluster of 6 healthy after {:?}", t0.elapsed());

    assert_eq!(cluster.nodes().len(), 6);
    assert_eq!(cluster.seeds().split(',').count(), 6);
    let primaries = cluster.primary_ports();
    assert_eq!(primaries.len(), 3);
    for p in &primaries {
        let reps = cluster.replicas_of(*p);
        assert_eq!(reps.len(), 1, "replicas of {p}");
        assert_eq!(
            reps[0].info_field("replication", "master_port"),
            Some(p.to_string())
        );
    }
    for n in cluster.nodes() {
        assert!(n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"));
    }

    // Full migration of the slot of "user:1" (with its keys) to another primary.
    let slot = cluster.key_slot("user:1");
    assert_eq!(slot, 10778); // CRC16("user:1") % 16384
    let from = cluster.primary_port_for_slot(slot);
    let to = *primaries
        .iter()
        .find(|p| **p != from)
        .expect("other primary");
    let src = cluster.node_by_port(from);
    assert_eq!(src.cli(&["SET", "user:1", "alice"]), "OK");
    assert_eq!(src.cli(&["SET", "{user:1}:b", "bob"]), "OK");

    cluster.migrate_slot(slot, from, to);

    assert_eq!(cluster.primary_port_for_slot(slot), to);
    let dst = cluster.node_by_port(to);
    assert_eq!(dst.cli(&["GET", "user:1"]), "alice");
    assert_eq!(dst.cli(&["GET", "{user:1}:b"]), "bob");
    let moved = cluster.node_by_port(from).cmd(&["GET", "user:1"]);
    assert_eq!(
        moved.error(),
        Some(format!("MOVED {slot} 127.0.0.1:{to}").as_str())
    );
    // Every node agrees (finish_migration waited for it).
    for n in cluster.nodes() {
        let map = cluster.slots_seen_by(n.port()).expect("CLUSTER SLOTS");
        assert!(map
            .iter()
            .any(|r| r.start <= slot && slot <= r.end && r.primary == to));
    }

    // Two-phase migration back: ASK while in the middle.
    let m = cluster.start_migration(slot, to, from);
    let src = cluster.node_by_port(to);
    let dst = cluster.node_by_port(from);
    // Key still on the source: served there.
    assert_eq!(src.cli(&["GET", "user:1"]), "alice");
    // Key absent on the source: ASK redirect to the target.
    let ask = src.cmd(&["GET", "{user:1}:new"]);
    assert_eq!(
        ask.error(),
        Some(format!("ASK {slot} 127.0.0.1:{from}").as_str())
    );
    // Move one key; the source now redirects for it, the target serves it after ASKING.
    cluster.migrate_keys(&m, &[b"user:1"]);
    assert!(src
        .cmd(&["GET", "user:1"])
        .error()
        .is_some_and(|e| e.starts_with("ASK ")));
    let moved_plain = dst.cmd(&["GET", "user:1"]);
    assert!(
        moved_plain.error().is_some_and(|e| e.starts_with("MOVED ")),
        "target without ASKING: {moved_plain:?}"
    );
    let mut c = dst.client();
    let r = c
        .pipeline(&[vec!["ASKING"], vec!["GET", "user:1"]])
        .expect("pipeline");
    assert_eq!(r, vec![Value::simple("OK"), Value::bulk("alice")]);

    cluster.finish_migration(m);
    assert_eq!(cluster.primary_port_for_slot(slot), from);
    assert_eq!(
        cluster.node_by_port(from).cli(&["GET", "{user:1}:b"]),
        "bob"
    );
}

#[test]
fn cluster_node_restart_comes_back_with_same_identity() {
    let mut cluster = RedisCluster::start_with(3, 1, 2000);
    let key = "restart-key";
    let slot = cluster.key_slot(key);
    let primary = cluster.primary_port_for_slot(slot);
    let replica = cluster.replicas_of(primary)[0].port();
    let replica_id = cluster.node_id(replica);
    let primary_id = cluster.node_id(primary);
    assert_eq!(cluster.node_by_port(primary).cli(&["SET", key, "v1"]), "OK");

    // Restart the replica: same port, same node id (nodes.conf kept), resyncs.
    cluster.node_by_port_mut(replica).restart();
    assert_eq!(cluster.node_id(replica), replica_id);
    cluster.wait_healthy(Duration::from_secs(30));
    cluster.wait_until(Duration::from_secs(10), "replica has the key", |c| {
        let mut r = c.node_by_port(replica).client();
        r.pipeline(&[vec!["READONLY"], vec!["GET", key]])
            .map(|v| v[1] == Value::bulk("v1"))
            .unwrap_or(false)
    });

    // Kill and quickly restart the primary (well within the node timeout,
    // so no failover): it keeps its id and slots.
    cluster.node_by_port_mut(primary).kill();
    assert!(cluster.health_problem().is_some());
    cluster.node_by_port_mut(primary).restart();
    assert_eq!(cluster.node_id(primary), primary_id);
    cluster.wait_healthy(Duration::from_secs(30));
    assert_eq!(cluster.primary_port_for_slot(slot), primary);

    // Manual failover helper: the replica takes over, the old primary follows it.
    cluster.failover(replica);
    assert_eq!(cluster.primary_port_for_slot(slot), replica);
    cluster.wait_until(
        Duration::from_secs(10),
        "old primary to become a replica of the new one",
        |c| c.replicas_of(replica).iter().any(|n| n.port() == primary),
    );
    cluster.wait_healthy(Duration::from_secs(30));
}
