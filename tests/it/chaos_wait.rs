//! WAIT under faults: during a manual failover WAIT answers a count, never Redis's errors from the
//! demoted primary; and WAIT asks only the primaries of the writes since the client's previous
//! WAIT, so a frozen shard the client no longer writes to does not hold it up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{signal, Redcar, RedisCluster, Resume, SlotRange, Value};

/// Slots per group of redcar's WAIT bookkeeping (`router/stateful/wait_written.rs`).
const GROUP: u16 = 16;

/// A key (`{prefix}N`) whose slot's whole bookkeeping group belongs to `primary`, so WAIT after
/// writing it asks that primary only.
fn key_inside(map: &[SlotRange], prefix: &str, primary: u16) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}{i}"))
        .find(|key| {
            let group = redcar::cluster::key_slot(key.as_bytes()) / GROUP * GROUP;
            map.iter()
                .any(|r| r.primary == primary && r.start <= group && group + GROUP - 1 <= r.end)
        })
        .unwrap_or_else(|| panic!("no key with prefix {prefix} inside node {primary}'s slots"))
}

/// Clients write and WAIT in a loop while `CLUSTER FAILOVER` moves their shard to its
/// replica. Every WAIT answers a count (the old primary's `-ERR WAIT cannot be used with
/// replica instances`, `-UNBLOCKED …` and closed connections are followed to the new primary),
/// and once the old primary has synced as the new one's replica WAIT answers 1 again.
#[test]
fn wait_follows_a_manual_failover_without_errors() {
    let cluster = RedisCluster::start(3, 1);
    // One connection per node: the clients' WAITs share it, as they do under load, so one
    // WAIT released by the demotion closes the connection under the others.
    let redcar = Redcar::start_with(&cluster.seeds(), &["--connections-per-node", "1"]);
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0].port();
    let map = cluster.slot_map();
    let keys: Vec<String> = (0..4)
        .map(|i| key_inside(&map, &format!("wf{i}-"), primary))
        .collect();
    let mut c = redcar.client();
    for key in &keys {
        assert_eq!(c.q(&["SET", key, "v0"]), Value::simple("OK"));
    }
    assert_eq!(c.q(&["WAIT", "1", "2000"]), Value::Int(1));

    let done = AtomicBool::new(false);
    let (waits, wait_errors, write_errors) = thread::scope(|s| {
        let failover = s.spawn(|| {
            cluster.failover(replica);
            // A little more of the same once every node agrees: redcar's map catches up.
            thread::sleep(Duration::from_millis(300));
            done.store(true, Ordering::Relaxed);
        });
        let clients: Vec<_> = keys
            .iter()
            .map(|key| {
                let (redcar, done) = (&redcar, &done);
                s.spawn(move || {
                    let mut c = redcar.client();
                    let (mut waits, mut wait_errors, mut write_errors) =
                        (0, Vec::new(), Vec::new());
                    let mut n = 0;
                    while !done.load(Ordering::Relaxed) {
                        n += 1;
                        let set = c.q(&["SET", key, &format!("v{n}")]);
                        if set != Value::simple("OK") {
                            write_errors.push(format!("SET {key}: {set:?}"));
                        }
                        for _ in 0..3 {
                            waits += 1;
                            match c.q(&["WAIT", "1", "100"]) {
                                Value::Int(count) if count >= 0 => {}
                                other => {
                                    wait_errors.push(format!("WAIT after SET {key}: {other:?}"))
                                }
                            }
                        }
                    }
                    (waits, wait_errors, write_errors)
                })
            })
            .collect();
        failover.join().expect("failover");
        let mut all = (0, Vec::new(), Vec::new());
        for client in clients {
            let (waits, wait_errors, write_errors) = client.join().expect("client");
            all.0 += waits;
            all.1.extend(wait_errors);
            all.2.extend(write_errors);
        }
        all
    });
    println!(
        "CHAOS_WAIT failover: {waits} WAITs, {} WAIT errors, {} SET errors{}",
        wait_errors.len(),
        write_errors.len(),
        write_errors
            .iter()
            .take(5)
            .map(|e| format!("\n  {e}"))
            .collect::<String>()
    );
    assert!(
        wait_errors.is_empty(),
        "WAIT failed during the failover:\n{}",
        wait_errors.join("\n")
    );

    // The old primary syncs as the new primary's replica: the writes are on two nodes again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = Value::Int(0);
    while Instant::now() < deadline {
        assert_eq!(c.q(&["SET", &keys[0], "after"]), Value::simple("OK"));
        last = c.q(&["WAIT", "1", "500"]);
        if last.as_int().is_some_and(|count| count >= 1) {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        last,
        Value::Int(1),
        "WAIT after the failover: the new replica never acknowledged"
    );
}

/// A client wrote to shards A and B and WAITed; since then it wrote to B only. With
/// A's primary frozen (SIGSTOP), its next WAIT asks B alone and answers at once, instead of
/// waiting on A for its whole timeout (or failing).
#[test]
fn wait_asks_only_the_shards_written_since_the_previous_wait() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let map = cluster.slot_map();
    let primaries = cluster.primary_ports();
    let (a, b) = (primaries[0], primaries[1]);
    let key_a = key_inside(&map, "wa-", a);
    let key_b = key_inside(&map, "wb-", b);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", &key_a, "1"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", &key_b, "1"]), Value::simple("OK"));
    assert_eq!(c.q(&["WAIT", "1", "2000"]), Value::Int(1));
    assert_eq!(c.q(&["SET", &key_b, "2"]), Value::simple("OK"));

    let pid = cluster
        .node_by_port(a)
        .pid()
        .expect("shard A's primary runs");
    signal(pid, "-STOP");
    let resume = Resume(pid);
    let started = Instant::now();
    let reply = c.q(&["WAIT", "1", "500"]);
    let took = started.elapsed();
    // Nothing written since: Redis would count the replicas in sync with the last write, so
    // redcar asks B again, still not the frozen A.
    let again = c.q(&["WAIT", "1", "500"]);
    let took_again = started.elapsed() - took;
    drop(resume);
    println!(
        "CHAOS_WAIT frozen shard: WAIT {reply:?} in {took:?}, again {again:?} in {took_again:?}"
    );
    assert!(
        reply.as_int().is_some_and(|count| count >= 1),
        "WAIT for writes to B only: {reply:?}"
    );
    assert!(
        took < Duration::from_millis(450),
        "WAIT waited {took:?} although only healthy B was written since the last WAIT"
    );
    assert!(
        again.as_int().is_some_and(|count| count >= 1),
        "WAIT with nothing new: {again:?}"
    );
    assert!(took_again < Duration::from_millis(450), "{took_again:?}");
}

/// A WAIT whose writes include one to a shard whose primary is dead (killed: a write that
/// failed there is still covered) or frozen answers a count, 0 for that shard, at the client's
/// timeout, never an error: no replica of it could be confirmed, and the other shards' counts
/// are not overclaimed.
#[test]
fn wait_counts_a_dead_or_frozen_primary_as_zero_replicas() {
    let mut cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let map = cluster.slot_map();
    let primaries = cluster.primary_ports();
    let (a, b, f) = (primaries[0], primaries[1], primaries[2]);
    let key_a = key_inside(&map, "za-", a);
    let key_b = key_inside(&map, "zb-", b);
    let key_f = key_inside(&map, "zf-", f);
    let mut c = redcar.client();
    for key in [&key_a, &key_b, &key_f] {
        assert_eq!(c.q(&["SET", key, "1"]), Value::simple("OK"));
    }
    assert_eq!(c.q(&["WAIT", "1", "2000"]), Value::Int(1));

    // Frozen: F's primary holds the WAIT until the client's timeout, then counts 0.
    let pid = cluster
        .node_by_port(f)
        .pid()
        .expect("shard F's primary runs");
    assert_eq!(c.q(&["SET", &key_b, "2"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", &key_f, "2"]), Value::simple("OK"));
    signal(pid, "-STOP");
    let resume = Resume(pid);
    let started = Instant::now();
    let frozen = c.q(&["WAIT", "1", "300"]);
    let took = started.elapsed();
    drop(resume);
    println!("CHAOS_WAIT frozen covered primary: {frozen:?} in {took:?}");
    assert_eq!(frozen, Value::Int(0), "WAIT covering the frozen shard");
    assert!(
        took >= Duration::from_millis(290),
        "answered before its timeout: {took:?}"
    );

    // Dead: A's primary killed; the write to A fails (or may have been sent), the write to B
    // works; WAIT covers both and answers 0 rather than `cannot reach …`.
    assert_eq!(c.q(&["WAIT", "1", "2000"]), Value::Int(1), "F is back");
    cluster.node_by_port_mut(a).kill();
    let _ = c.q(&["SET", &key_a, "3"]);
    assert_eq!(c.q(&["SET", &key_b, "3"]), Value::simple("OK"));
    let dead = c.q(&["WAIT", "1", "300"]);
    println!("CHAOS_WAIT dead covered primary: {dead:?}");
    assert_eq!(dead, Value::Int(0), "WAIT covering the killed shard");
}
