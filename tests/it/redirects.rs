//! Topology changes under redcar: MOVED after a slot migration, ASK during one, a node restart.

use std::time::{Duration, Instant};

use crate::support::{Redcar, RedisCluster, Value};

#[test]
fn moved_after_a_slot_migration_is_followed_transparently() {
    let cluster = RedisCluster::start(3, 1);
    let (redcar, _config) = start_learning_from_redirects(&cluster);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "moving-key", "before"]), Value::simple("OK"));
    let (slot, from, to) = slot_and_another_owner(&cluster, "moving-key");
    cluster.migrate_slot(slot, from, to);

    assert_eq!(c.q(&["GET", "moving-key"]), Value::bulk("before"));
    let (_, metrics) = redcar.http_get("/metrics").expect("scrape");
    let series = format!("redcar_redirects_total{{kind=\"moved\",node=\"127.0.0.1:{to}\"}} 1");
    assert!(metrics.contains(&series), "{series} in:\n{metrics}");
    assert_eq!(c.q(&["SET", "moving-key", "after"]), Value::simple("OK"));
    assert_eq!(
        cluster.node_by_port(to).cmd(&["GET", "moving-key"]),
        Value::bulk("after")
    );
}

#[test]
fn ask_during_a_slot_migration_is_followed_transparently() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let (slot, from, to) = slot_and_another_owner(&cluster, "{mig}stay");
    assert_eq!(c.q(&["SET", "{mig}stay", "on-source"]), Value::simple("OK"));
    assert_eq!(
        c.q(&["SET", "{mig}moved", "on-target"]),
        Value::simple("OK")
    );

    let migration = cluster.start_migration(slot, from, to);
    cluster.migrate_keys(&migration, &[b"{mig}moved"]);
    // The source still has one key and answers; the moved one gets -ASK, which redcar follows.
    assert_eq!(c.q(&["GET", "{mig}stay"]), Value::bulk("on-source"));
    assert_eq!(c.q(&["GET", "{mig}moved"]), Value::bulk("on-target"));
    // A new key in a migrating slot is created on the target (source replies ASK).
    assert_eq!(c.q(&["SET", "{mig}new", "created"]), Value::simple("OK"));
    let mut target = cluster.node_by_port(to).client();
    assert_eq!(target.q(&["ASKING"]), Value::simple("OK"));
    assert_eq!(
        target.q(&["GET", "{mig}new"]),
        Value::bulk("created"),
        "stored on the target"
    );
    cluster.finish_migration(migration);
    for (key, value) in [
        ("{mig}stay", "on-source"),
        ("{mig}moved", "on-target"),
        ("{mig}new", "created"),
    ] {
        assert_eq!(
            c.q(&["GET", key]),
            Value::bulk(value),
            "{key} after the migration"
        );
    }
}

#[test]
fn a_restarted_replica_and_primary_are_reconnected() {
    let mut cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--op-timeout", "2s"]);
    let mut c = redcar.client();
    let key = "restart-key";
    let primary = cluster.primary_for_key(key).port();
    assert_eq!(c.q(&["SET", key, "1"]), Value::simple("OK"));

    // Restart the primary quickly (well inside the cluster's failover timeout).
    cluster.node_by_port_mut(primary).restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut errors = Vec::new();
    loop {
        match c.q(&["SET", key, "2"]) {
            Value::Simple(ok) if ok == "OK" => break,
            other => errors.push(other),
        }
        assert!(
            Instant::now() < deadline,
            "no success after the restart: {errors:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(c.q(&["GET", key]), Value::bulk("2"));
    // Whatever failed in between failed with an explicit error, never a dropped connection.
    for e in &errors {
        assert!(
            e.is_error(),
            "unexpected reply while the node restarted: {e:?}"
        );
    }
}

/// The slot of `key`, its owner's port, and the port of another primary to move it to.
pub fn slot_and_another_owner(cluster: &RedisCluster, key: &str) -> (u16, u16, u16) {
    let slot = cluster.key_slot(key);
    let from = cluster.primary_port_for_slot(slot);
    let to = cluster
        .primary_ports()
        .into_iter()
        .find(|&p| p != from)
        .expect("another primary");
    (slot, from, to)
}

/// redcar with an hour between periodic refreshes, so only a MOVED reply can teach it a slot's
/// new owner; keep the config for as long as redcar runs.
pub fn start_learning_from_redirects(cluster: &RedisCluster) -> (Redcar, TempConfig) {
    let config = write_config("cluster:\n  refresh_interval: 1h\n  refresh_min_gap: 10ms\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    (redcar, config)
}

/// A config file in a temp dir that lives as long as the value.
pub struct TempConfig {
    _dir: tempfile::TempDir,
    path: String,
}

impl TempConfig {
    pub fn path_str(&self) -> &str {
        &self.path
    }
}

pub fn write_config(yaml: &str) -> TempConfig {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redcar.yaml");
    std::fs::write(&path, yaml).expect("write config");
    TempConfig {
        path: path.to_string_lossy().into_owned(),
        _dir: dir,
    }
}

/// `count` keys in as many different slots, all served by the primary on `port`.
fn keys_on_one_primary(cluster: &RedisCluster, port: u16, count: usize) -> Vec<String> {
    let mut slots = std::collections::HashSet::new();
    (0..)
        .map(|i| format!("batched:{i}"))
        .filter(|key| {
            let slot = cluster.key_slot(key);
            cluster.primary_port_for_slot(slot) == port && slots.insert(slot)
        })
        .take(count)
        .collect()
}

#[test]
fn split_parts_sent_to_one_node_together_follow_moved_and_ask_one_by_one() {
    let cluster = RedisCluster::start(3, 1);
    let (redcar, _config) = start_learning_from_redirects(&cluster);
    let mut c = redcar.client();
    let from = cluster.primary_ports()[0];
    let to = cluster.primary_ports()[1];
    // Four slots of one primary: each MGET or MSET of them goes to it as one batch.
    let keys = keys_on_one_primary(&cluster, from, 4);
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut mset = vec!["MSET"];
    for key in &refs {
        mset.extend([*key, *key]);
    }
    assert_eq!(c.q(&mset), Value::simple("OK"));
    let series = format!("redcar_node_requests_total{{node=\"127.0.0.1:{from}\"}}");
    let before = redcar.metric_sum(&series);
    let mut mget = vec!["MGET"];
    mget.extend(&refs);
    let all = Value::Array(Some(refs.iter().map(Value::bulk).collect()));
    assert_eq!(c.q(&mget), all);
    assert_eq!(
        redcar.metric_sum(&series) - before,
        4.0,
        "the node's request count counts each part of a batch"
    );

    // keys[1]'s slot moves for good (MOVED); keys[2]'s slot is being migrated and keys[2] has
    // already left (ASK). The other parts of the same batch are answered by the first node.
    cluster.migrate_slot(cluster.key_slot(&keys[1]), from, to);
    let migration = cluster.start_migration(cluster.key_slot(&keys[2]), from, to);
    cluster.migrate_keys(&migration, &[keys[2].as_bytes()]);
    assert_eq!(c.q(&mget), all, "MGET with a moved and an asked part");

    let mut mset = vec!["MSET"];
    let values: Vec<String> = keys.iter().map(|k| format!("{k}:new")).collect();
    for (key, value) in refs.iter().zip(&values) {
        mset.extend([*key, value.as_str()]);
    }
    assert_eq!(c.q(&mset), Value::simple("OK"));
    for (i, (key, value)) in keys.iter().zip(&values).enumerate() {
        let owner = if i == 1 || i == 2 { to } else { from };
        let mut node = cluster.node_by_port(owner).client();
        if i == 2 {
            assert_eq!(node.q(&["ASKING"]), Value::simple("OK"));
        }
        assert_eq!(
            node.q(&["GET", key]),
            Value::bulk(value),
            "{key} on 127.0.0.1:{owner}"
        );
    }
    cluster.finish_migration(migration);
    let news = Value::Array(Some(values.iter().map(Value::bulk).collect()));
    assert_eq!(c.q(&mget), news, "MGET after the migration");
}
