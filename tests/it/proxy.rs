//! redcar in front of a real 3+3 cluster, driven by a plain (non-cluster) client: single-key
//! commands land on the owning node, pipelines come back in order, local commands and refusals.

use crate::support::resp_client::encode_command;
use crate::support::{Redcar, RedisCluster, Value};

fn strs(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn single_key_commands_of_every_type_reach_the_owning_node() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let cases: &[(&[&str], Value)] = &[
        (&["SET", "str", "v1"], Value::simple("OK")),
        (&["GET", "str"], Value::bulk("v1")),
        (&["APPEND", "str", "x"], Value::Int(3)),
        (&["INCRBY", "counter", "5"], Value::Int(5)),
        (&["HSET", "hash", "f1", "a", "f2", "b"], Value::Int(2)),
        (&["HGET", "hash", "f2"], Value::bulk("b")),
        (&["RPUSH", "list", "a", "b", "c"], Value::Int(3)),
        (
            &["LRANGE", "list", "0", "-1"],
            Value::Array(Some(vec![
                Value::bulk("a"),
                Value::bulk("b"),
                Value::bulk("c"),
            ])),
        ),
        (&["SADD", "set", "m1", "m2"], Value::Int(2)),
        (&["SISMEMBER", "set", "m2"], Value::Int(1)),
        (&["ZADD", "zset", "1", "one", "2", "two"], Value::Int(2)),
        (&["ZSCORE", "zset", "two"], Value::bulk("2")),
        (&["PFADD", "hll", "a", "b", "c"], Value::Int(1)),
        (&["PFCOUNT", "hll"], Value::Int(3)),
        (&["SETBIT", "bits", "7", "1"], Value::Int(0)),
        (&["BITCOUNT", "bits"], Value::Int(1)),
        (
            &["GEOADD", "geo", "13.361389", "38.115556", "Palermo"],
            Value::Int(1),
        ),
        (&["EXPIRE", "str", "100"], Value::Int(1)),
        (&["EXISTS", "str"], Value::Int(1)),
        (&["DEL", "counter"], Value::Int(1)),
        (&["GET", "missing"], Value::Bulk(None)),
    ];
    for (command, expected) in cases {
        assert_eq!(&c.q(command), expected, "{command:?}");
    }
    let id = c.q(&["XADD", "stream", "*", "field", "value"]);
    assert!(
        id.as_str().is_some_and(|s| s.contains('-')),
        "XADD id: {id:?}"
    );
    assert_eq!(c.q(&["XLEN", "stream"]), Value::Int(1));
    let ttl = c.q(&["TTL", "str"]).as_int().expect("TTL integer");
    assert!((1..=100).contains(&ttl), "ttl {ttl}");

    // Each key is stored on the primary that owns its slot, not anywhere else.
    for key in [
        "str", "hash", "list", "set", "zset", "hll", "bits", "geo", "stream",
    ] {
        let owner = cluster.primary_for_key(key);
        assert_eq!(
            owner.cmd(&["EXISTS", key]),
            Value::Int(1),
            "{key} on its owner {}",
            owner.port()
        );
    }
}

#[test]
fn a_pipeline_spanning_all_nodes_is_answered_in_order() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let mut pipeline = Vec::new();
    for i in 0..500 {
        pipeline.push(strs(&["SET", &format!("key:{i}"), &format!("value-{i}")]));
        pipeline.push(strs(&["GET", &format!("key:{i}")]));
        pipeline.push(strs(&["PING"]));
    }
    let replies = c.pipeline(&pipeline).expect("pipeline");
    for i in 0..500 {
        assert_eq!(replies[3 * i], Value::simple("OK"), "SET {i}");
        assert_eq!(
            replies[3 * i + 1],
            Value::bulk(format!("value-{i}")),
            "GET {i}"
        );
        assert_eq!(replies[3 * i + 2], Value::simple("PONG"), "PING {i}");
    }
    // The keys really are spread over every primary.
    for port in cluster.primary_ports() {
        let size = cluster
            .node_by_port(port)
            .cmd(&["DBSIZE"])
            .as_int()
            .unwrap_or(0);
        assert!(size > 100, "primary {port} holds {size} keys");
    }
}

/// Redis answers everything it read from a client in one write; so does redcar, even when the
/// replies come from three nodes at different moments: the client is woken once per pipeline.
#[test]
fn the_replies_to_one_read_arrive_in_one_write() {
    use std::io::{Read, Write};
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    for i in 0..30 {
        let reply = c.cmd(&["SET", &format!("k{i}"), "v"]).expect("SET");
        assert_eq!(reply, Value::simple("OK"));
    }
    let request: Vec<u8> = (0..30)
        .flat_map(|i| encode_command(&["GET", &format!("k{i}")]))
        .collect();
    let expected = b"$1\r\nv\r\n".repeat(30);
    let mut raw = std::net::TcpStream::connect(redcar.addr()).expect("connect");
    let mut buffer = vec![0u8; 64 * 1024];
    for round in 0..20 {
        raw.write_all(&request).expect("write the pipeline");
        // One read: whatever the first write from redcar carried.
        let n = raw.read(&mut buffer).expect("read");
        assert_eq!(
            &buffer[..n],
            &expected[..],
            "round {round}: the first read returned {n} of {} bytes",
            expected.len()
        );
    }
}

#[test]
fn local_commands_are_answered_by_redcar() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    assert_eq!(c.q(&["PING"]), Value::simple("PONG"));
    assert_eq!(c.q(&["ping", "hello"]), Value::bulk("hello"));
    assert_eq!(c.q(&["ECHO", "a b"]), Value::bulk("a b"));
    assert_eq!(c.q(&["SELECT", "0"]), Value::simple("OK"));
    assert!(c
        .q(&["SELECT", "3"])
        .error()
        .is_some_and(|e| e.starts_with("ERR redcar: ")));
    assert_eq!(c.q(&["CLIENT", "GETNAME"]), Value::Bulk(None));
    assert_eq!(c.q(&["CLIENT", "SETNAME", "worker-7"]), Value::simple("OK"));
    assert_eq!(c.q(&["CLIENT", "GETNAME"]), Value::bulk("worker-7"));
    assert!(c.q(&["CLIENT", "ID"]).as_int().is_some());
    let hello = c.q(&["HELLO", "2"]);
    assert!(hello.as_array().is_some_and(|a| a.len() >= 14), "{hello:?}");
    assert!(c
        .q(&["HELLO", "4"])
        .error()
        .is_some_and(|e| e.starts_with("NOPROTO")));
    let count = c.q(&["COMMAND", "COUNT"]).as_int().expect("COMMAND COUNT");
    assert!(count > 200, "COMMAND COUNT {count}");
    assert!(c.q(&["TIME"]).as_array().is_some_and(|a| a.len() == 2));

    // Inline commands, as typed in telnet.
    c.send_raw(b"PING\r\n").expect("send");
    assert_eq!(c.read_reply().expect("reply"), Value::simple("PONG"));
    c.send_raw(b"SET \"inline key\" 'quoted value'\r\nGET \"inline key\"\n")
        .expect("send");
    assert_eq!(c.read_reply().expect("reply"), Value::simple("OK"));
    assert_eq!(c.read_reply().expect("reply"), Value::bulk("quoted value"));

    // QUIT answers, then closes.
    assert_eq!(c.q(&["QUIT"]), Value::simple("OK"));
    assert!(
        c.read_reply().is_err(),
        "connection must be closed after QUIT"
    );
}

#[test]
fn refusals_are_clear_errors_and_the_connection_stays_usable() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let error = |v: Value| {
        v.error()
            .map(str::to_string)
            .unwrap_or_else(|| panic!("expected an error, got {v:?}"))
    };

    // Plain multi-key commands are split per slot; atomic ones across slots are refused.
    assert_eq!(c.q(&["MSET", "a", "1", "b", "2"]), Value::simple("OK"));
    let cross = error(c.q(&["MSETNX", "a", "1", "b", "2"]));
    assert!(cross.starts_with("CROSSSLOT "), "{cross}");
    assert!(cross.contains("hash tag"), "{cross}");
    assert_eq!(
        c.q(&["MSET", "{u1}a", "1", "{u1}b", "2"]),
        Value::simple("OK")
    );
    assert_eq!(
        c.q(&["MGET", "{u1}a", "{u1}b"]),
        Value::Array(Some(vec![Value::bulk("1"), Value::bulk("2")]))
    );

    let admin = error(c.q(&["CONFIG", "SET", "maxmemory", "1"]));
    assert!(
        admin.starts_with("ERR redcar: CONFIG SET is not supported ("),
        "{admin}"
    );
    let monitor = error(c.q(&["MONITOR"]));
    assert!(
        monitor.starts_with("ERR redcar: MONITOR is not supported"),
        "{monitor}"
    );
    let unknown = error(c.q(&["NOSUCHCOMMAND", "x"]));
    assert!(
        unknown.starts_with("ERR redcar: unknown command 'NOSUCHCOMMAND'"),
        "{unknown}"
    );
    let arity = error(c.q(&["GET"]));
    assert_eq!(arity, "ERR wrong number of arguments for 'get' command");
    // Errors from the node itself pass through untouched.
    c.q(&["SET", "text", "abc"]);
    let wrongtype = error(c.q(&["LPUSH", "text", "x"]));
    assert!(wrongtype.starts_with("WRONGTYPE"), "{wrongtype}");
    assert_eq!(c.q(&["PING"]), Value::simple("PONG"));
}

#[test]
fn malformed_input_closes_only_that_client() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut good = redcar.client();
    assert_eq!(good.q(&["SET", "k", "v"]), Value::simple("OK"));
    for garbage in [
        &b"*1\r\n$abc\r\n"[..],
        b"*2\r\n:1\r\n",
        b"*1\r\n$999999999999\r\n",
        b"*1\r\n$-5\r\n",
    ] {
        let mut bad = redcar.client();
        bad.send_raw(garbage).expect("send");
        let reply = bad.read_reply().expect("an error reply before the close");
        let text = reply.error().unwrap_or_default().to_string();
        assert!(
            text.starts_with("ERR Protocol error: "),
            "{garbage:?} → {reply:?}"
        );
        assert!(
            bad.read_reply().is_err(),
            "{garbage:?}: client must be closed"
        );
        assert_eq!(
            good.q(&["GET", "k"]),
            Value::bulk("v"),
            "other clients are unaffected"
        );
    }
}

#[test]
fn many_clients_share_a_few_node_connections() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--connections-per-node", "2"]);
    let mut clients: Vec<_> = (0..40).map(|_| redcar.client()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        for j in 0..30 {
            let key = format!("c{i}:k{j}");
            assert_eq!(c.q(&["SET", &key, "1"]), Value::simple("OK"));
        }
    }
    for port in cluster.primary_ports() {
        let list = cluster.node_by_port(port).cli(&["CLIENT", "LIST"]);
        // Count normal clients, leaving out replicas (flags=S) and our own CLIENT LIST connection.
        let from_redcar = list
            .lines()
            .filter(|l| l.contains("flags=N") && !l.contains("cmd=client|list"))
            .count();
        assert!(
            from_redcar <= 2,
            "primary {port} has {from_redcar} connections from redcar:\n{list}"
        );
        assert!(from_redcar >= 1, "primary {port} was used");
    }
}
