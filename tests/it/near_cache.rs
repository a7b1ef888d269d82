//! The near cache (`near_cache:`) on a real cluster: reads served from memory without reaching
//! the nodes, a write straight on a node invalidating them, a client reading its own writes,
//! keys with a TTL leaving on time, replies typed per protocol, MGET from memory, and the whole
//! cache dropped when a slot changes owner.

use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, RedisServer, Value};

const CONFIG: &str = "near_cache:
  enabled: true
  max_silence: 200ms
  keys:
    - prefix: \"nc:\"
    - pattern: \"flag:*:on\"
";

fn start(cluster: &RedisCluster) -> (Redcar, crate::redirects::TempConfig) {
    let config = write_config(CONFIG);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    (redcar, config)
}

/// How many times `node` ran `command` (INFO commandstats).
pub fn calls(node: &RedisServer, command: &str) -> u64 {
    let Value::Bulk(Some(text)) = node.cmd(&["INFO", "commandstats"]) else {
        return 0;
    };
    let prefix = format!("cmdstat_{command}:calls=");
    String::from_utf8_lossy(&text)
        .lines()
        .find_map(|line| line.strip_prefix(&prefix)?.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// Polls `GET key` through redcar until it returns `want`; how long that took.
fn until_served(redcar: &Redcar, key: &str, want: &str, limit: Duration) -> Duration {
    let mut c = redcar.client();
    let start = Instant::now();
    loop {
        if c.q(&["GET", key]) == Value::bulk(want) {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{key} never became {want:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn cached_reads_stay_off_the_node_until_a_write_straight_on_it_invalidates_them() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "nc:a", "1"]), Value::simple("OK"));
    let node = cluster.primary_for_key("nc:a");
    // The first read fills (the dirty mark of the SET ends after max_silence).
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(c.q(&["GET", "nc:a"]), Value::bulk("1"));
    let before = calls(node, "get");
    for _ in 0..200 {
        assert_eq!(c.q(&["GET", "nc:a"]), Value::bulk("1"));
    }
    let reached = calls(node, "get") - before;
    assert!(
        reached <= 2,
        "{reached} of 200 cached GETs reached the node"
    );
    assert!(redcar.metric_sum("redcar_near_cache_hits_total") >= 198.0);
    let (status, page) = redcar.http_get("/status.json").expect("status.json");
    assert_eq!(status, 200);
    let page: serde_json::Value = serde_json::from_str(&page).expect("json");
    assert!(
        page["near_cache"]["hits"].as_u64() >= Some(198),
        "{}",
        page["near_cache"]
    );

    // A key no rule admits always reaches the node.
    c.q(&["SET", "other", "x"]);
    let before = calls(cluster.primary_for_key("other"), "get");
    for _ in 0..20 {
        assert_eq!(c.q(&["GET", "other"]), Value::bulk("x"));
    }
    assert_eq!(calls(cluster.primary_for_key("other"), "get") - before, 20);

    // A writer straight on the node: the invalidation arrives within the bound.
    node.cmd(&["SET", "nc:a", "2"]);
    let took = until_served(&redcar, "nc:a", "2", Duration::from_secs(2));
    assert!(took < Duration::from_millis(250), "stale for {took:?}");
    assert!(redcar.metric_sum("redcar_near_cache_invalidations_total") >= 1.0);

    // Pattern rules admit too.
    node.cmd(&["DEL", "nc:a"]);
    c.q(&["SET", "flag:dark:on", "yes"]);
    std::thread::sleep(Duration::from_millis(250));
    let flag_node = cluster.primary_for_key("flag:dark:on");
    c.q(&["GET", "flag:dark:on"]);
    let before = calls(flag_node, "get");
    for _ in 0..50 {
        assert_eq!(c.q(&["GET", "flag:dark:on"]), Value::bulk("yes"));
    }
    assert!(calls(flag_node, "get") - before <= 1);
}

#[test]
fn a_client_reads_its_own_writes_through_the_cache() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let mut c = redcar.client();
    for i in 0..300 {
        let value = i.to_string();
        assert_eq!(c.q(&["SET", "nc:mine", &value]), Value::simple("OK"));
        assert_eq!(c.q(&["GET", "nc:mine"]), Value::bulk(&value), "write {i}");
        // Reads between writes fill and hit the cache.
        assert_eq!(c.q(&["GET", "nc:mine"]), Value::bulk(&value), "write {i}");
    }
    // Multi-key writes split over slots drop their keys too.
    c.q(&["SET", "nc:x", "0"]);
    c.q(&["SET", "nc:y", "0"]);
    std::thread::sleep(Duration::from_millis(250));
    c.q(&["GET", "nc:x"]);
    c.q(&["GET", "nc:y"]);
    c.q(&["MSET", "nc:x", "1", "nc:y", "1"]);
    assert_eq!(c.q(&["GET", "nc:x"]), Value::bulk("1"));
    assert_eq!(c.q(&["GET", "nc:y"]), Value::bulk("1"));
    c.q(&["DEL", "nc:x", "nc:y"]);
    assert!(c.q(&["GET", "nc:x"]).is_nil());
    assert!(c.q(&["GET", "nc:y"]).is_nil());
}

#[test]
fn a_key_with_a_ttl_leaves_the_cache_when_it_expires() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let node = cluster.primary_for_key("nc:short");
    // Set on the node itself, so no dirty mark delays the fill.
    node.cmd(&["SET", "nc:short", "v", "PX", "400"]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["GET", "nc:short"]), Value::bulk("v"));
    let before = calls(node, "get");
    assert_eq!(c.q(&["GET", "nc:short"]), Value::bulk("v"));
    assert_eq!(calls(node, "get"), before, "served from memory");
    std::thread::sleep(Duration::from_millis(450));
    assert!(c.q(&["GET", "nc:short"]).is_nil(), "served past its TTL");
}

#[test]
fn replies_keep_each_protocols_types_and_mget_is_served_whole() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let node = cluster.primary_for_key("nc:h");
    node.cmd(&["HSET", "nc:h", "f", "1", "g", "2"]);
    let mut resp2 = redcar.client();
    let mut resp3 = redcar.client().typed();
    resp3.q(&["HELLO", "3"]);
    for _ in 0..3 {
        let flat = resp2.q(&["HGETALL", "nc:h"]);
        assert!(
            matches!(&flat, Value::Array(Some(items)) if items.len() == 4),
            "{flat:?}"
        );
        let map = resp3.q(&["HGETALL", "nc:h"]);
        assert!(
            format!("{map:?}").contains("Map"),
            "RESP3 HGETALL is a map: {map:?}"
        );
        assert_eq!(resp2.q(&["HGET", "nc:h", "g"]), Value::bulk("2"));
        assert!(resp3.q(&["GET", "nc:absent"]).is_nil());
    }
    assert!(redcar.metric_sum("redcar_near_cache_hits_total") >= 8.0);

    for key in ["nc:m1", "nc:m2", "nc:m3"] {
        cluster.primary_for_key(key).cmd(&["SET", key, key]);
        resp2.q(&["GET", key]);
    }
    // Cached per protocol: the RESP3 client's nil above is not the RESP2 one.
    resp2.q(&["GET", "nc:absent"]);
    let hits = redcar.metric_sum("redcar_near_cache_hits_total");
    let all = resp2.q(&["MGET", "nc:m1", "nc:m2", "nc:m3", "nc:absent"]);
    assert_eq!(
        all,
        Value::Array(Some(vec![
            Value::bulk("nc:m1"),
            Value::bulk("nc:m2"),
            Value::bulk("nc:m3"),
            Value::Bulk(None),
        ]))
    );
    assert_eq!(
        redcar.metric_sum("redcar_near_cache_hits_total"),
        hits + 1.0
    );
    // One key not cached: the whole MGET goes to the nodes, with the same answer.
    let mixed = resp2.q(&["MGET", "nc:m1", "uncached"]);
    assert_eq!(
        mixed,
        Value::Array(Some(vec![Value::bulk("nc:m1"), Value::Bulk(None)]))
    );
}

#[test]
fn a_slot_moving_to_another_primary_drops_the_cache() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let key = "nc:moving";
    let from = cluster.primary_for_key(key).port();
    cluster.primary_for_key(key).cmd(&["SET", key, "before"]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["GET", key]), Value::bulk("before"));
    assert_eq!(c.q(&["GET", key]), Value::bulk("before"));
    let to = cluster
        .primary_ports()
        .into_iter()
        .find(|&p| p != from)
        .expect("another primary");
    cluster.migrate_slot(cluster.key_slot(key), from, to);
    cluster.node_by_port(to).cmd(&["SET", key, "after"]);
    // MIGRATE deleted the key on the old owner, which said so: no stale read after it.
    let took = until_served(&redcar, key, "after", Duration::from_secs(2));
    assert!(took < Duration::from_millis(500), "stale for {took:?}");
    // And once redcar adopts the new map, everything goes.
    let flushed = "redcar_near_cache_flushes_total{cause=\"topology\"}";
    let deadline = Instant::now() + Duration::from_secs(10);
    while redcar.metric_sum(flushed) < 1.0 {
        assert!(Instant::now() < deadline, "no flush after the slot moved");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_frozen_node_stops_its_entries_being_served_within_the_bound() {
    use crate::support::freeze::{signal, Resume};
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let node = cluster.primary_for_key("nc:frozen");
    node.cmd(&["SET", "nc:frozen", "v"]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["GET", "nc:frozen"]), Value::bulk("v"));
    assert_eq!(c.q(&["GET", "nc:frozen"]), Value::bulk("v"));
    let pid = node.pid().expect("node pid");
    signal(pid, "-STOP");
    let _resume = Resume(pid);
    let frozen = Instant::now();
    // Its invalidations could be stuck behind the freeze: within max_silence (200 ms) the
    // cache steps aside, and the read waits for the node like any other (op_timeout 1 s).
    std::thread::sleep(Duration::from_millis(260));
    let reply = c.q(&["GET", "nc:frozen"]);
    assert!(
        matches!(&reply, Value::Error(e) if e.contains("redcar")),
        "served {reply:?} {:?} into the freeze",
        frozen.elapsed()
    );
    signal(pid, "-CONT");
    let took = until_served(&redcar, "nc:frozen", "v", Duration::from_secs(5));
    assert!(took < Duration::from_secs(5));
}

#[test]
fn keys_read_often_enough_are_cached_without_a_rule() {
    let cluster = RedisCluster::start(3, 0);
    let config =
        write_config("near_cache:\n  enabled: true\n  hot_keys:\n    min_reads_per_second: 50\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let (_, page) = redcar.http_get("/status.json").expect("status.json");
    assert!(page.contains("\"near_cache\":{"), "on: counters shown");
    let plain = Redcar::start(&cluster.seeds());
    let (_, page) = plain.http_get("/status.json").expect("status.json");
    assert!(page.contains("\"near_cache\":null"), "off: null");
    let hot = cluster.primary_for_key("any:hot");
    hot.cmd(&["SET", "any:hot", "h"]);
    let cold = cluster.primary_for_key("any:cold");
    cold.cmd(&["SET", "any:cold", "c"]);
    let mut c = redcar.client();
    // Well past 50 reads in a second: admitted, then served from memory.
    for _ in 0..300 {
        assert_eq!(c.q(&["GET", "any:hot"]), Value::bulk("h"));
    }
    let before = calls(hot, "get");
    for _ in 0..100 {
        assert_eq!(c.q(&["GET", "any:hot"]), Value::bulk("h"));
    }
    assert!(calls(hot, "get") - before <= 1, "the hot key is cached");
    // Read once in a while: never admitted.
    let before = calls(cold, "get");
    for _ in 0..5 {
        assert_eq!(c.q(&["GET", "any:cold"]), Value::bulk("c"));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        calls(cold, "get") - before,
        5,
        "a cold key always reaches its node"
    );
    // Writes through redcar reach hot keys the rules do not name.
    assert_eq!(c.q(&["SET", "any:hot", "h2"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "any:hot"]), Value::bulk("h2"));
}

#[test]
fn a_pipelined_write_never_overtakes_a_filling_read_of_the_same_client() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let mut c = redcar.client();
    let mut other = redcar.client();
    for i in 0..300 {
        let key = format!("nc:pipe:{i}");
        let side = format!("nc:side:{i}");
        cluster.primary_for_key(&key).cmd(&["SET", &key, "old"]);
        // GET misses and fills on the tracked lane; the SET and GET behind it must reach the
        // node after it, and a read of another key in between must not move them elsewhere.
        let replies = c
            .pipeline(&[
                vec!["GET", key.as_str()],
                vec!["SET", key.as_str(), "new"],
                vec!["GET", side.as_str()],
                vec!["GET", key.as_str()],
                vec!["INCR", key.as_str()],
            ])
            .expect("pipeline");
        assert_eq!(replies[0], Value::bulk("old"), "pipeline {i}: {replies:?}");
        assert_eq!(replies[3], Value::bulk("new"), "pipeline {i}: {replies:?}");
        assert!(replies[4].is_error(), "INCR of \"new\": {replies:?}");
        // And one at a time, from another client, the cache agrees.
        assert_eq!(other.q(&["GET", &key]), Value::bulk("new"), "pipeline {i}");
    }
    assert!(redcar.metric_sum("redcar_near_cache_fills_total") >= 100.0);
}

/// The ids of `node`'s clients named `name` (CLIENT LIST).
fn client_ids(node: &RedisServer, name: &str) -> Vec<String> {
    let Value::Bulk(Some(text)) = node.cmd(&["CLIENT", "LIST"]) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&text)
        .lines()
        .filter(|line| line.split(' ').any(|f| f == format!("name={name}")))
        .filter_map(|line| Some(line.split(' ').next()?.strip_prefix("id=")?.to_string()))
        .collect()
}

#[test]
fn a_tracked_lane_reaching_its_node_again_is_not_held_by_the_invalidation_back_off() {
    // With a 1 s back-off, the invalidation connection's second failed connect makes it wait
    // 2 s before the next. A miss read on the tracked lane in that time used to wait for it up
    // to connect_timeout (1 s), and the client got an error: the lane now wakes it.
    let config = write_config(&format!(
        "{CONFIG}upstream:\n  reconnect_backoff: 1s\n  outlier:\n    consecutive_failures: 0\n"
    ));
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let node = cluster.primary_for_key("nc:lane");
    node.cmd(&["SET", "nc:lane", "v1"]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["GET", "nc:lane"]), Value::bulk("v1"));
    let invalidations = client_ids(node, "redcar-invalidations");
    // `nc:` is a prefix rule: its reads take the near lanes (BCAST).
    let mut lanes = client_ids(node, "redcar-tracked");
    lanes.extend(client_ids(node, "redcar-near"));
    assert_eq!(invalidations.len(), 1, "{invalidations:?}");
    assert!(!lanes.is_empty());

    // The node takes no new client for 1.5 s; its tracking connections are cut meanwhile.
    let mut admin = node.client();
    assert_eq!(
        admin.q(&["CONFIG", "SET", "maxclients", "1"]),
        Value::simple("OK")
    );
    for id in invalidations.iter().chain(&lanes) {
        admin.q(&["CLIENT", "KILL", "ID", id]);
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        admin.q(&["CONFIG", "SET", "maxclients", "10000"]),
        Value::simple("OK")
    );
    assert_eq!(admin.q(&["SET", "nc:lane", "v2"]), Value::simple("OK"));

    let mut fresh = redcar.client();
    let reply = fresh.q(&["GET", "nc:lane"]);
    assert_eq!(
        reply,
        Value::bulk("v2"),
        "the first read after the node took clients again"
    );
    assert_eq!(client_ids(node, "redcar-invalidations").len(), 1);
}
