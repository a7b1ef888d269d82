//! RESP3 clients (`HELLO 3`): the handshake as Redis 7 answers it, switching back and forth on
//! one connection, RESP3 types on the paths the differential test does not generate (INFO,
//! blocking commands on dedicated connections, a failed WATCH, the cluster facade), and the
//! nodes' RESP3 connections opened only once a RESP3 client needs them.

use std::time::Duration;

use crate::support::{Redcar, RedisCluster, Resp3, RespClient, Value};

fn typed(redcar: &Redcar) -> RespClient {
    redcar.client().typed()
}

fn kind(v: &Value) -> Option<Resp3> {
    match v {
        Value::Typed(kind, _) => Some(*kind),
        _ => None,
    }
}

/// The values of a RESP3 map (or a RESP2 flat list) by name.
fn field<'a>(map: &'a Value, name: &str) -> Option<&'a Value> {
    let items = map.as_array()?;
    items
        .chunks(2)
        .find(|pair| pair[0].as_str() == Some(name))
        .map(|pair| &pair[1])
}

#[test]
fn hello_switches_protocols_on_one_connection_with_auth_and_setname() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--requirepass", "s3cret"]);
    let mut c = typed(&redcar);
    let refused = c.q(&["HELLO", "3"]);
    assert!(
        refused.error().is_some_and(|e| e.starts_with("NOAUTH ")),
        "HELLO 3 before AUTH: {refused:?}"
    );
    let wrong = c.q(&["HELLO", "3", "AUTH", "default", "nope"]);
    assert!(wrong.error().is_some_and(|e| e.starts_with("WRONGPASS")));
    let hello = c.q(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "app"]);
    assert_eq!(kind(&hello), Some(Resp3::Map), "{hello:?}");
    assert_eq!(field(&hello, "proto"), Some(&Value::Int(3)));
    assert_eq!(c.q(&["CLIENT", "GETNAME"]), Value::bulk("app"));
    assert_eq!(c.q(&["SET", "r3:k", "v"]), Value::simple("OK"));
    let null = c.q(&["GET", "r3:missing"]);
    assert_eq!(kind(&null), Some(Resp3::Null), "{null:?}");
    assert_eq!(c.q(&["HSET", "r3:h", "f", "1"]), Value::Int(1));
    assert_eq!(kind(&c.q(&["HGETALL", "r3:h"])), Some(Resp3::Map));

    // Back to RESP2 on the same connection: flat arrays and RESP2 nulls again.
    let two = c.q(&["HELLO", "2"]);
    assert_eq!(kind(&two), None, "{two:?}");
    assert_eq!(field(&two, "proto"), Some(&Value::Int(2)));
    assert_eq!(c.q(&["GET", "r3:missing"]), Value::Bulk(None));
    let flat = c.q(&["HGETALL", "r3:h"]);
    assert_eq!(
        flat,
        Value::Array(Some(vec![Value::bulk("f"), Value::bulk("1")]))
    );
    let unsupported = c.q(&["HELLO", "4"]);
    assert_eq!(
        unsupported.error(),
        Some("NOPROTO unsupported protocol version")
    );
    assert_eq!(
        c.q(&["GET", "r3:k"]),
        Value::bulk("v"),
        "still RESP2 and usable"
    );
}

#[test]
fn merged_blocking_and_transaction_replies_have_resp3_types() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = typed(&redcar);
    assert_eq!(kind(&c.q(&["HELLO", "3"])), Some(Resp3::Map));

    // INFO, merged from every primary by redcar: verbatim text, as Redis sends it.
    let info = c.q(&["INFO", "server"]);
    assert_eq!(kind(&info), Some(Resp3::Verbatim), "{info:?}");
    assert!(info.to_text().contains("redis_version:"), "{info:?}");

    // A blocking command runs on a dedicated connection, which speaks RESP3 too.
    assert_eq!(c.q(&["ZADD", "{z}q", "1.5", "m"]), Value::Int(1));
    let popped = c.q(&["BZPOPMIN", "{z}q", "1"]);
    let items = popped.as_array().unwrap_or_else(|| panic!("{popped:?}"));
    assert_eq!(kind(&items[2]), Some(Resp3::Double), "{popped:?}");
    let timed_out = c.q(&["BZPOPMIN", "{z}q", "0.05"]);
    assert_eq!(kind(&timed_out), Some(Resp3::Null), "{timed_out:?}");

    // MULTI … EXEC: each item typed; a transaction a WATCH aborted is RESP3's null.
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["ZADD", "{z}s", "2", "a"]), Value::simple("QUEUED"));
    assert_eq!(c.q(&["ZSCORE", "{z}s", "a"]), Value::simple("QUEUED"));
    let exec = c.q(&["EXEC"]);
    let items = exec.as_array().unwrap_or_else(|| panic!("{exec:?}"));
    assert_eq!(kind(&items[1]), Some(Resp3::Double), "{exec:?}");
    assert_eq!(c.q(&["WATCH", "{z}w"]), Value::simple("OK"));
    let mut other = redcar.client();
    assert_eq!(other.q(&["SET", "{z}w", "changed"]), Value::simple("OK"));
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "{z}w", "mine"]), Value::simple("QUEUED"));
    let aborted = c.q(&["EXEC"]);
    assert_eq!(kind(&aborted), Some(Resp3::Null), "{aborted:?}");

    // Split across slots: the parts' RESP3 nulls land in the merged array.
    assert_eq!(c.q(&["SET", "r3:a", "1"]), Value::simple("OK"));
    let mget = c.q(&["MGET", "r3:a", "r3:nothing", "r3:none"]);
    let items = mget.as_array().unwrap_or_else(|| panic!("{mget:?}"));
    assert_eq!(items[0], Value::bulk("1"));
    assert_eq!(kind(&items[1]), Some(Resp3::Null), "{mget:?}");
}

#[test]
fn nodes_open_resp3_connections_only_for_resp3_clients() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let connections = || redcar.metric_sum("redcar_node_connections{");
    let mut two = redcar.client();
    for i in 0..50 {
        let key = format!("r3:spread:{i}");
        assert_eq!(two.q(&["SET", &key, "v"]), Value::simple("OK"));
    }
    let resp2_only = connections();
    assert!(resp2_only > 0.0, "RESP2 traffic opened node connections");
    let mut three = typed(&redcar);
    assert_eq!(kind(&three.q(&["HELLO", "3"])), Some(Resp3::Map));
    for i in 0..50 {
        let key = format!("r3:spread:{i}");
        assert_eq!(three.q(&["GET", &key]), Value::bulk("v"));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while connections() <= resp2_only && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let both = connections();
    assert!(
        both > resp2_only && both <= 2.0 * resp2_only,
        "RESP3 connections are added, as many as the RESP2 ones at most: {resp2_only} -> {both}"
    );
}

#[test]
fn the_cluster_facade_answers_resp3_clients_in_resp3() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--cluster-facade"]);
    let mut c = typed(&redcar);
    let hello = c.q(&["HELLO", "3"]);
    assert_eq!(field(&hello, "mode"), Some(&Value::bulk("cluster")));
    let shards = c.q(&["CLUSTER", "SHARDS"]);
    let shard = &shards.as_array().unwrap_or_else(|| panic!("{shards:?}"))[0];
    assert_eq!(kind(shard), Some(Resp3::Map), "{shards:?}");
    let nodes = field(shard, "nodes").and_then(Value::as_array);
    assert_eq!(nodes.map(|n| kind(&n[0])), Some(Some(Resp3::Map)));
    let text = c.q(&["CLUSTER", "NODES"]);
    assert_eq!(kind(&text), Some(Resp3::Verbatim), "{text:?}");
    let info = c.q(&["CLUSTER", "INFO"]);
    assert_eq!(kind(&info), Some(Resp3::Verbatim), "{info:?}");
    let slots = c.q(&["CLUSTER", "SLOTS"]);
    let node = slots
        .as_array()
        .and_then(|r| r[0].as_array())
        .map(|r| r[2].clone());
    let metadata = node
        .as_ref()
        .and_then(Value::as_array)
        .map(|n| n[3].clone());
    assert_eq!(
        metadata.as_ref().and_then(kind),
        Some(Resp3::Map),
        "{slots:?}"
    );
}

#[test]
fn subscribers_get_push_frames_and_may_run_data_commands_while_subscribed() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = typed(&redcar);
    assert_eq!(kind(&c.q(&["HELLO", "3"])), Some(Resp3::Map));
    let push =
        |items: &[Value]| Value::Typed(Resp3::Push, Box::new(Value::Array(Some(items.to_vec()))));
    assert_eq!(
        c.q(&["SUBSCRIBE", "r3:news"]),
        push(&[
            Value::bulk("subscribe"),
            Value::bulk("r3:news"),
            Value::Int(1)
        ])
    );
    assert_eq!(
        c.q(&["SSUBSCRIBE", "{r3}shard"]),
        push(&[
            Value::bulk("ssubscribe"),
            Value::bulk("{r3}shard"),
            Value::Int(1)
        ])
    );
    let mut publisher = redcar.client();
    publisher.q(&["PUBLISH", "r3:news", "hello"]);
    assert_eq!(
        publisher.q(&["SPUBLISH", "{r3}shard", "sharded"]),
        Value::Int(1)
    );
    let mut messages = vec![
        c.read_reply().expect("a message"),
        c.read_reply().expect("a message"),
    ];
    messages.sort_by_key(|m| format!("{m:?}"));
    assert_eq!(
        messages,
        [
            push(&[
                Value::bulk("message"),
                Value::bulk("r3:news"),
                Value::bulk("hello")
            ]),
            push(&[
                Value::bulk("smessage"),
                Value::bulk("{r3}shard"),
                Value::bulk("sharded")
            ]),
        ]
    );
    // RESP3 allows other commands while subscribed; their replies are ordinary ones.
    assert_eq!(c.q(&["SET", "r3:sub:k", "v"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "r3:sub:k"]), Value::bulk("v"));
    assert_eq!(kind(&c.q(&["GET", "r3:sub:none"])), Some(Resp3::Null));
    assert_eq!(c.q(&["PING"]), Value::simple("PONG"));
    let mget = c.q(&["MGET", "r3:sub:k", "r3:sub:none"]);
    assert_eq!(
        mget.as_array().map(|items| items.len()),
        Some(2),
        "{mget:?}"
    );
    let refused = c.q(&["MULTI"]);
    assert!(
        refused
            .error()
            .is_some_and(|e| e.starts_with("ERR redcar: 'multi' cannot run in subscribe mode")),
        "{refused:?}"
    );
    assert_eq!(
        c.q(&["UNSUBSCRIBE"]),
        push(&[
            Value::bulk("unsubscribe"),
            Value::bulk("r3:news"),
            Value::Int(0)
        ])
    );
    assert_eq!(
        c.q(&["SUNSUBSCRIBE"]),
        push(&[
            Value::bulk("sunsubscribe"),
            Value::bulk("{r3}shard"),
            Value::Int(0)
        ])
    );
    let none = c.q(&["UNSUBSCRIBE"]);
    assert_eq!(
        none,
        push(&[
            Value::bulk("unsubscribe"),
            Value::Typed(Resp3::Null, Box::new(Value::Bulk(None))),
            Value::Int(0)
        ]),
        "nothing left to unsubscribe from: a nil name, as Redis sends"
    );
    assert_eq!(
        c.q(&["MULTI"]),
        Value::simple("OK"),
        "out of subscribe mode"
    );
    assert_eq!(c.q(&["DISCARD"]), Value::simple("OK"));
}
