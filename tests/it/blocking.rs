//! Blocking commands on dedicated connections: they never stall the shared connections, the
//! pool is bounded with an explicit exhausted policy, and a client leaving unblocks the node.

use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, Value};

#[test]
fn a_blocked_client_never_stalls_others_on_shared_connections() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--connections-per-node", "1"]);
    let mut blocked = redcar.client();
    let waiter = thread::spawn(move || blocked.q(&["BLPOP", "{q}jobs", "0"]));
    thread::sleep(Duration::from_millis(200));

    // Same node, same (only) shared connection: still answered at once.
    let mut other = redcar.client();
    let started = Instant::now();
    for i in 0..100 {
        assert_eq!(
            other.q(&["SET", "{q}other", &i.to_string()]),
            Value::simple("OK")
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "other clients must not wait for the blocked one"
    );
    assert_eq!(other.q(&["RPUSH", "{q}jobs", "job-1"]), Value::Int(1));
    let popped = waiter.join().expect("waiter");
    assert_eq!(
        popped,
        Value::Array(Some(vec![Value::bulk("{q}jobs"), Value::bulk("job-1")]))
    );

    // With a timeout and no data: nil after the timeout; XREAD BLOCK likewise.
    let mut c = redcar.client();
    assert_eq!(c.q(&["BRPOP", "{q}empty", "0.2"]), Value::Array(None));
    assert_eq!(
        c.q(&["XREAD", "BLOCK", "100", "STREAMS", "{q}s", "$"]),
        Value::Array(None)
    );
    assert_eq!(c.q(&["XADD", "{q}s", "1-1", "f", "v"]), Value::bulk("1-1"));
    let read = c.q(&["XREAD", "BLOCK", "100", "STREAMS", "{q}s", "0"]);
    assert!(read.to_text().contains("1-1"), "{read:?}");
}

#[test]
fn an_exhausted_pool_fails_fast_or_waits_as_configured() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config("upstream:\n  dedicated:\n    max: 1\n    exhausted: fail\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut first = redcar.client();
    let holder = thread::spawn(move || first.q(&["BLPOP", "{p}a", "2"]));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !redcar
        .http_get("/metrics")
        .is_ok_and(|(_, m)| m.contains("redcar_dedicated_connections_busy 1"))
    {
        assert!(
            Instant::now() < deadline,
            "the first BLPOP never took its connection"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let refused = redcar.client().q(&["BLPOP", "{p}b", "1"]);
    let error = refused
        .error()
        .unwrap_or_else(|| panic!("expected an error, got {refused:?}"));
    assert!(
        error.starts_with("ERR redcar:") && error.contains("upstream.dedicated.max"),
        "{error}"
    );
    assert_eq!(holder.join().expect("holder"), Value::Array(None));

    let config = write_config(
        "upstream:\n  dedicated:\n    max: 1\n    exhausted: wait\n    wait_timeout: 3s\n",
    );
    let waiting = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut first = waiting.client();
    let holder = thread::spawn(move || first.q(&["BLPOP", "{p}c", "0.5"]));
    thread::sleep(Duration::from_millis(100));
    // Waits for the first to finish, then runs.
    assert_eq!(
        waiting.client().q(&["BLPOP", "{p}d", "0.1"]),
        Value::Array(None)
    );
    assert_eq!(holder.join().expect("holder"), Value::Array(None));
    let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
    assert!(
        metrics.contains("redcar_dedicated_exhausted_total 1"),
        "{metrics}"
    );
}

#[test]
fn a_client_leaving_while_blocked_frees_the_node_connection() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let owner = cluster.primary_for_key("{gone}q");
    let blocked_on_node = || {
        let list = owner.cli(&["CLIENT", "LIST"]);
        list.lines().filter(|l| l.contains("cmd=blpop")).count()
    };
    let mut c = redcar.client();
    c.send(&["BLPOP", "{gone}q", "0"]).expect("send");
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked_on_node() == 0 {
        assert!(Instant::now() < deadline, "BLPOP never reached the node");
        thread::sleep(Duration::from_millis(20));
    }
    drop(c);
    while blocked_on_node() > 0 {
        assert!(
            Instant::now() < deadline,
            "the node still has a blocked client after the client left"
        );
        thread::sleep(Duration::from_millis(20));
    }
    // Nothing was popped on behalf of the departed client.
    assert_eq!(redcar.cmd(&["RPUSH", "{gone}q", "x"]), Value::Int(1));
    assert_eq!(redcar.cmd(&["LLEN", "{gone}q"]), Value::Int(1));
}

#[test]
fn wait_counts_the_replicas_that_acknowledged_the_clients_writes() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--connections-per-node", "1"]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "{wait}k", "v"]), Value::simple("OK"));
    // One replica per primary: WAIT 1 is satisfied (and quickly: the primary asks its replica).
    assert_eq!(c.q(&["WAIT", "1", "5000"]), Value::Int(1));

    // WAIT for more replicas than exist gives up at its timeout with the count reached, and
    // meanwhile other clients on the same shared connection are still answered.
    let mut waiter = redcar.client();
    let started = Instant::now();
    let pending = thread::spawn(move || waiter.q(&["WAIT", "3", "3000"]));
    thread::sleep(Duration::from_millis(50));
    let mut other = redcar.client();
    for _ in 0..20 {
        assert_eq!(other.q(&["GET", "{wait}k"]), Value::bulk("v"));
    }
    assert!(
        !pending.is_finished(),
        "other clients waited for the WAIT to end"
    );
    assert_eq!(pending.join().expect("waiter"), Value::Int(1));
    assert!(started.elapsed() >= Duration::from_millis(3000));

    let bad = c.q(&["WAIT", "1", "-1"]);
    assert!(bad.error().is_some(), "{bad:?}");
}
