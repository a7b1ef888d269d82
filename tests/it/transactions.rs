//! MULTI/EXEC through redcar: queued like Redis, sent as one unit (atomic even on shared
//! connections), WATCH on a dedicated connection, and a transaction after its slot moved.

use std::thread;

use crate::redirects::{slot_and_another_owner, start_learning_from_redirects};
use crate::support::{Redcar, RedisCluster, Value};

fn ints(values: &[i64]) -> Value {
    Value::Array(Some(values.iter().map(|&n| Value::Int(n)).collect()))
}

#[test]
fn transactions_queue_like_redis_and_run_on_the_slot_owner() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "{tx}a", "1"]), Value::simple("QUEUED"));
    assert_eq!(c.q(&["INCRBY", "{tx}a", "41"]), Value::simple("QUEUED"));
    assert_eq!(c.q(&["PING"]), Value::simple("QUEUED"));
    assert_eq!(
        c.q(&["EXEC"]),
        Value::Array(Some(vec![
            Value::simple("OK"),
            Value::Int(42),
            Value::simple("PONG")
        ]))
    );
    assert_eq!(
        cluster.primary_for_key("{tx}a").cmd(&["GET", "{tx}a"]),
        Value::bulk("42")
    );

    // Queue-time errors abort EXEC (EXECABORT), as in Redis; nothing runs.
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "{tx}a", "2"]), Value::simple("QUEUED"));
    let cross = c.q(&["SET", "other-slot", "x"]);
    assert!(
        cross.error().is_some_and(|e| e.starts_with("CROSSSLOT")),
        "{cross:?}"
    );
    let arity = c.q(&["GET"]);
    assert!(arity
        .error()
        .is_some_and(|e| e.contains("wrong number of arguments")));
    let exec = c.q(&["EXEC"]);
    assert!(
        exec.error().is_some_and(|e| e.starts_with("EXECABORT")),
        "{exec:?}"
    );
    assert_eq!(c.q(&["GET", "{tx}a"]), Value::bulk("42"));

    // Runtime errors are per command inside EXEC's reply.
    c.q(&["MULTI"]);
    c.q(&["LPUSH", "{tx}a", "x"]);
    c.q(&["INCR", "{tx}a"]);
    let exec = c.q(&["EXEC"]);
    let items = exec.as_array().expect("EXEC array").to_vec();
    assert!(items[0].error().is_some_and(|e| e.starts_with("WRONGTYPE")));
    assert_eq!(items[1], Value::Int(43));

    // Scripts and WAIT are queued like other commands; a split command across slots is not.
    c.q(&["MULTI"]);
    let script = "return redis.call('INCR', KEYS[1])";
    assert_eq!(
        c.q(&["EVAL", script, "1", "{tx}n"]),
        Value::simple("QUEUED")
    );
    assert_eq!(c.q(&["WAIT", "0", "0"]), Value::simple("QUEUED"));
    let exec = c.q(&["EXEC"]);
    let items = exec.as_array().expect("EXEC array").to_vec();
    assert_eq!(items[0], Value::Int(1));
    assert!(items[1].as_int().is_some(), "{exec:?}");
    // An EVALSHA inside MULTI for a script its node never saw (it ran on another node) cannot be
    // healed inside EXEC, so redcar queues it as EVAL of the body it knows.
    let ports = cluster.primary_ports();
    let here = cluster.key_on_node("sha-a:", ports[0]);
    let there = cluster.key_on_node("sha-b:", ports[1]);
    let body = "return redis.call('SET', KEYS[1], ARGV[1])";
    assert_eq!(c.q(&["EVAL", body, "1", &here, "x"]), Value::simple("OK"));
    let sha = cluster
        .node_by_port(ports[0])
        .cmd(&["SCRIPT", "LOAD", body]);
    let sha = sha.as_str().expect("sha").to_string();
    let missing = cluster
        .node_by_port(ports[1])
        .cmd(&["SCRIPT", "EXISTS", &sha]);
    assert_eq!(
        missing,
        Value::Array(Some(vec![Value::Int(0)])),
        "precondition"
    );
    c.q(&["MULTI"]);
    assert_eq!(
        c.q(&["EVALSHA", &sha, "1", &there, "y"]),
        Value::simple("QUEUED")
    );
    assert_eq!(
        c.q(&["EXEC"]),
        Value::Array(Some(vec![Value::simple("OK")]))
    );
    assert_eq!(c.q(&["GET", &there]), Value::bulk("y"));

    c.q(&["MULTI"]);
    let split = c.q(&["MGET", "a", "b"]);
    assert!(
        split.error().is_some_and(|e| e.starts_with("CROSSSLOT")),
        "{split:?}"
    );
    c.q(&["DISCARD"]);

    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    let nested = c.q(&["MULTI"]);
    assert_eq!(nested.error(), Some("ERR MULTI calls can not be nested"));
    assert_eq!(c.q(&["INCR", "{tx}a"]), Value::simple("QUEUED"));
    assert_eq!(c.q(&["DISCARD"]), Value::simple("OK"));
    assert_eq!(c.q(&["EXEC"]).error(), Some("ERR EXEC without MULTI"));
    assert_eq!(c.q(&["DISCARD"]).error(), Some("ERR DISCARD without MULTI"));
    assert_eq!(c.q(&["GET", "{tx}a"]), Value::bulk("43"));
}

#[test]
fn transactions_stay_atomic_on_connections_shared_by_many_clients() {
    let cluster = RedisCluster::start(3, 1);
    // One connection per node: every client's transactions share it.
    let redcar = Redcar::start_with(&cluster.seeds(), &["--connections-per-node", "1"]);
    let workers: Vec<_> = (0..6)
        .map(|_| {
            let mut c = redcar.client();
            thread::spawn(move || {
                for _ in 0..150 {
                    // Pipelined, so other clients' commands are in flight at the same time.
                    let replies = c
                        .pipeline(&[
                            vec!["MULTI"],
                            vec!["INCR", "{atomic}n"],
                            vec!["INCR", "{atomic}n"],
                            vec!["EXEC"],
                        ])
                        .expect("pipeline");
                    let exec = replies.last().expect("EXEC reply");
                    let Some([Value::Int(first), Value::Int(second)]) = exec.as_array() else {
                        panic!("EXEC gave {exec:?}");
                    };
                    assert_eq!(
                        *second,
                        first + 1,
                        "another INCR ran inside the transaction"
                    );
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    assert_eq!(redcar.cmd(&["GET", "{atomic}n"]), Value::bulk("1800"));
}

#[test]
fn watch_aborts_when_a_watched_key_changes_and_runs_otherwise() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let mut other = redcar.client();
    c.q(&["SET", "{w}balance", "10"]);

    assert_eq!(c.q(&["WATCH", "{w}balance"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "{w}balance"]), Value::bulk("10"));
    assert_eq!(other.q(&["SET", "{w}balance", "99"]), Value::simple("OK"));
    c.q(&["MULTI"]);
    c.q(&["SET", "{w}balance", "11"]);
    assert_eq!(c.q(&["EXEC"]), Value::Array(None), "watched key changed");
    assert_eq!(c.q(&["GET", "{w}balance"]), Value::bulk("99"));

    assert_eq!(
        c.q(&["WATCH", "{w}balance", "{w}other"]),
        Value::simple("OK")
    );
    c.q(&["MULTI"]);
    c.q(&["INCR", "{w}balance"]);
    assert_eq!(c.q(&["EXEC"]), ints(&[100]));

    // Watched keys must share a slot; UNWATCH and DISCARD end the watch.
    let cross = c.q(&["WATCH", "a", "b"]);
    assert!(
        cross.error().is_some_and(|e| e.starts_with("CROSSSLOT")),
        "{cross:?}"
    );
    assert_eq!(c.q(&["WATCH", "{w}balance"]), Value::simple("OK"));
    assert_eq!(c.q(&["UNWATCH"]), Value::simple("OK"));
    other.q(&["SET", "{w}balance", "5"]);
    c.q(&["MULTI"]);
    c.q(&["INCR", "{w}balance"]);
    assert_eq!(c.q(&["EXEC"]), ints(&[6]), "no watch after UNWATCH");

    // The dedicated connection went back to the pool: none is lent any more.
    let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
    assert!(
        metrics.contains("redcar_dedicated_connections_busy 0"),
        "{metrics}"
    );
}

#[test]
fn a_transaction_follows_its_slot_to_a_new_owner() {
    let cluster = RedisCluster::start(3, 1);
    let (redcar, _config) = start_learning_from_redirects(&cluster);
    let mut c = redcar.client();
    c.q(&["SET", "{mv}k", "1"]);
    let (slot, from, to) = slot_and_another_owner(&cluster, "{mv}k");
    cluster.migrate_slot(slot, from, to);
    // redcar's map still names the old owner: the node refuses the queued command with MOVED,
    // EXEC aborts, and redcar sends the whole transaction to the new owner.
    let replies = c
        .pipeline(&[
            vec!["MULTI"],
            vec!["INCR", "{mv}k"],
            vec!["INCR", "{mv}k"],
            vec!["EXEC"],
        ])
        .expect("pipeline");
    assert_eq!(replies[3], ints(&[2, 3]));
    assert_eq!(
        cluster.node_by_port(to).cmd(&["GET", "{mv}k"]),
        Value::bulk("3")
    );
}
