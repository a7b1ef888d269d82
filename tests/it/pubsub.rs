//! Pub/sub through redcar: cluster-wide channels and patterns on one dedicated connection,
//! shard channels on their slot's primary (and followed when the slot moves), subscribe-mode
//! rules, and PUBSUB queries merged over the primaries.

use std::time::{Duration, Instant};

use crate::redirects::slot_and_another_owner;
use crate::support::{Redcar, RedisCluster, RespClient, Value};

fn push(kind: &str, parts: &[&str], count: i64) -> Value {
    let mut items = vec![Value::bulk(kind)];
    items.extend(parts.iter().copied().map(Value::bulk));
    items.push(Value::Int(count));
    Value::Array(Some(items))
}

fn message(kind: &str, parts: &[&str]) -> Value {
    let mut items = vec![Value::bulk(kind)];
    items.extend(parts.iter().copied().map(Value::bulk));
    Value::Array(Some(items))
}

fn read(c: &mut RespClient) -> Value {
    c.set_timeout(Duration::from_secs(5)).expect("timeout");
    c.read_reply().expect("a pushed frame")
}

#[test]
fn channels_and_patterns_work_cluster_wide_with_subscribe_mode_rules() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut sub = redcar.client();
    let mut publisher = redcar.client();
    sub.send(&["SUBSCRIBE", "news", "alerts"]).expect("send");
    assert_eq!(read(&mut sub), push("subscribe", &["news"], 1));
    assert_eq!(read(&mut sub), push("subscribe", &["alerts"], 2));
    sub.send(&["PSUBSCRIBE", "log.*"]).expect("send");
    assert_eq!(read(&mut sub), push("psubscribe", &["log.*"], 3));

    let refused = sub.q(&["GET", "x"]);
    assert!(
        refused
            .error()
            .is_some_and(|e| e.starts_with("ERR Can't execute 'get'")),
        "{refused:?}"
    );
    assert_eq!(sub.q(&["PING"]), message("pong", &[""]));

    // Published through redcar, and directly on every node: subscribers hear all of it.
    // PUBLISH counts only the receiving node's subscribers (Redis Cluster semantics), so the
    // count is not checked; delivery is.
    assert!(publisher
        .q(&["PUBLISH", "news", "hello"])
        .as_int()
        .is_some());
    assert_eq!(read(&mut sub), message("message", &["news", "hello"]));
    for node in cluster.nodes() {
        node.cmd(&["PUBLISH", "log.web", "from-node"]);
        assert_eq!(
            read(&mut sub),
            message("pmessage", &["log.*", "log.web", "from-node"])
        );
    }
    assert_eq!(
        publisher.q(&["PUBSUB", "NUMSUB", "news", "nobody"]),
        Value::Array(Some(vec![
            Value::bulk("news"),
            Value::Int(1),
            Value::bulk("nobody"),
            Value::Int(0)
        ]))
    );
    assert_eq!(publisher.q(&["PUBSUB", "NUMPAT"]), Value::Int(1));

    // Leaving every subscription returns the client to normal mode.
    sub.send(&["UNSUBSCRIBE"]).expect("send");
    let left = [read(&mut sub), read(&mut sub)];
    let mut channels: Vec<String> = left
        .iter()
        .map(|v| match v.as_array() {
            Some([kind, channel, Value::Int(_)]) if kind == &Value::bulk("unsubscribe") => {
                channel.to_text()
            }
            _ => panic!("expected an unsubscribe confirmation, got {v:?}"),
        })
        .collect();
    channels.sort();
    assert_eq!(channels.len(), 2);
    // The pattern subscription remains: the last confirmation counts it.
    assert_eq!(left[1].as_array().and_then(|a| a[2].as_int()), Some(1));
    assert_eq!(
        sub.q(&["PUNSUBSCRIBE"]),
        push("punsubscribe", &["log.*"], 0)
    );
    assert_eq!(sub.q(&["SET", "after-pubsub", "1"]), Value::simple("OK"));
    assert_eq!(publisher.q(&["PUBLISH", "news", "unheard"]), Value::Int(0));

    // RESET also leaves subscribe mode.
    sub.send(&["SUBSCRIBE", "x"]).expect("send");
    assert_eq!(read(&mut sub), push("subscribe", &["x"], 1));
    assert_eq!(sub.q(&["RESET"]), Value::simple("RESET"));
    assert_eq!(sub.q(&["GET", "after-pubsub"]), Value::bulk("1"));
}

#[test]
fn shard_channels_follow_their_slot_to_a_new_owner() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut sub = redcar.client();
    let mut publisher = redcar.client();
    sub.send(&["SSUBSCRIBE", "{orders}new", "{orders}paid"])
        .expect("send");
    assert_eq!(read(&mut sub), push("ssubscribe", &["{orders}new"], 1));
    assert_eq!(read(&mut sub), push("ssubscribe", &["{orders}paid"], 2));
    sub.send(&["SSUBSCRIBE", "elsewhere"]).expect("send");
    assert_eq!(read(&mut sub), push("ssubscribe", &["elsewhere"], 3));
    let cross = sub.q(&["SSUBSCRIBE", "a", "b"]);
    assert!(
        cross.error().is_some_and(|e| e.starts_with("CROSSSLOT")),
        "{cross:?}"
    );

    assert_eq!(
        publisher.q(&["SPUBLISH", "{orders}new", "o1"]),
        Value::Int(1)
    );
    assert_eq!(read(&mut sub), message("smessage", &["{orders}new", "o1"]));
    assert_eq!(
        publisher.q(&["PUBSUB", "SHARDNUMSUB", "{orders}new"]),
        Value::Array(Some(vec![Value::bulk("{orders}new"), Value::Int(1)]))
    );

    // The slot moves: the old owner drops the subscription; redcar subscribes at the new one
    // without telling the client, and messages keep coming.
    let (slot, from, to) = slot_and_another_owner(&cluster, "{orders}new");
    cluster.migrate_slot(slot, from, to);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let heard = publisher.q(&["SPUBLISH", "{orders}new", "o2"]);
        if heard == Value::Int(1) {
            break;
        }
        assert!(Instant::now() < deadline, "never re-subscribed: {heard:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(read(&mut sub), message("smessage", &["{orders}new", "o2"]));
    assert_eq!(
        cluster
            .node_by_port(to)
            .cmd(&["PUBSUB", "SHARDNUMSUB", "{orders}new"]),
        Value::Array(Some(vec![Value::bulk("{orders}new"), Value::Int(1)])),
        "subscribed on the new owner"
    );

    sub.send(&["SUNSUBSCRIBE"]).expect("send");
    let mut counts: Vec<i64> = (0..3)
        .map(|_| {
            let frame = read(&mut sub);
            let count = frame.as_array().and_then(|a| a.get(2)?.as_int());
            count.unwrap_or_else(|| panic!("expected a sunsubscribe confirmation, got {frame:?}"))
        })
        .collect();
    counts.sort_unstable();
    assert_eq!(counts, vec![0, 1, 2]);
    assert_eq!(
        sub.q(&["PING"]),
        Value::simple("PONG"),
        "back in normal mode"
    );
}
