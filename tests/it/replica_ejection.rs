//! A replica ejected again and again while its primary then freezes: each ejection of a replica
//! soon after the last doubles its length, so one ejected three times lately is out for seconds —
//! and if its primary freezes in that time, the shard's reads have nowhere to go. While a shard's
//! primary is ejected or failing, its replicas are now health-checked every `health_check_interval`
//! and come back at their first good answer, whatever their earlier ejections.

use std::thread;
use std::time::Duration;

use crate::chaos_topology::wait_for;
use crate::redirects::write_config;
use crate::support::{signal, Redcar, RedisCluster, RespClient, Resume, Value};

/// The health `/topology` shows for the node at `addr`: (ejected, ms left, ejections).
fn health(redcar: &Redcar, addr: &str) -> Option<(bool, u64, u64)> {
    let (_, body) = redcar.http_get("/topology").ok()?;
    let json: serde_json::Value = serde_json::from_str(&body).ok()?;
    let ranges = json["ranges"].as_array()?;
    let nodes = ranges.iter().flat_map(|range| {
        let replicas = range["replicas"].as_array().cloned().unwrap_or_default();
        std::iter::once(range["primary"].clone()).chain(replicas)
    });
    for node in nodes {
        if node["addr"] == addr {
            let h = &node["health"];
            return Some((
                h["ejected"].as_bool()?,
                h["ejected_for_ms"].as_u64()?,
                h["ejections"].as_u64()?,
            ));
        }
    }
    None
}

/// Reads `key` until `done` holds (each read may time out on a frozen node).
fn read_until(client: &mut RespClient, key: &str, what: &str, mut done: impl FnMut() -> bool) {
    wait_for(Duration::from_secs(60), what, || {
        let _ = client.cmd(&["GET", key]);
        done()
    });
}

#[test]
fn a_replica_ejected_again_and_again_comes_back_at_once_when_its_primary_freezes() {
    // A node timeout above the freezes: the cluster fails nobody over.
    let cluster = RedisCluster::start_with(3, 1, 5000);
    let config = write_config(
        "upstream:\n  outlier:\n    consecutive_failures: 2\n    base_ejection_time: 1s\n    \
         max_ejection_time: 60s\n    health_check_interval: 100ms\n",
    );
    let args = [
        "--config",
        config.path_str(),
        "--read-policy",
        "prefer-replica",
        "--op-timeout",
        "300ms",
    ];
    let redcar = Redcar::start_with(&cluster.seeds(), &args);
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0].port();
    let (primary_addr, replica_addr) = (
        format!("127.0.0.1:{primary}"),
        format!("127.0.0.1:{replica}"),
    );
    let key = cluster.key_on_node("rej:key:", primary);
    let mut client = redcar.client();
    assert_eq!(client.q(&["SET", &key, "v"]), Value::simple("OK"));
    assert_eq!(client.q(&["WAIT", "1", "2000"]), Value::Int(1));
    let replica_pid = cluster.node_by_port(replica).pid().expect("replica runs");
    let primary_pid = cluster.node_by_port(primary).pid().expect("primary runs");

    // Three ejections of the replica, each soon after the last: 1 s, 2 s, then 4 s.
    for round in 1..=3u64 {
        signal(replica_pid, "-STOP");
        let resume = Resume(replica_pid);
        read_until(&mut client, &key, "the frozen replica is ejected", || {
            health(&redcar, &replica_addr).is_some_and(|(ejected, _, n)| ejected && n == round)
        });
        drop(resume);
        if round < 3 {
            wait_for(Duration::from_secs(30), "the replica is back", || {
                health(&redcar, &replica_addr).is_some_and(|(ejected, _, _)| !ejected)
            });
        }
    }
    let (_, left, ejections) = health(&redcar, &replica_addr).expect("the replica's health");
    assert_eq!(ejections, 3);

    // Now its primary freezes, with the replica answering again but out for seconds more.
    signal(primary_pid, "-STOP");
    let resume = Resume(primary_pid);
    let mut last_left = left;
    read_until(
        &mut client,
        &key,
        "the replica is back while its primary is frozen",
        || match health(&redcar, &replica_addr) {
            Some((true, left, _)) => {
                last_left = left;
                false
            }
            Some((false, _, _)) => true,
            None => false,
        },
    );
    // A read of the shard is answered by the replica while the primary is still frozen.
    let mut answered = None;
    for _ in 0..50 {
        match client.cmd(&["GET", &key]) {
            Ok(v) if v == Value::bulk("v") => {
                answered = Some(v);
                break;
            }
            _ => thread::sleep(Duration::from_millis(20)),
        }
    }
    let primary_health = health(&redcar, &primary_addr);
    drop(resume);
    eprintln!(
        "replica_ejection: the replica came back with {last_left} ms of its 4 s ejection left \
         (primary: {primary_health:?})"
    );
    assert!(
        last_left > 0,
        "the replica came back only when its ejection time was over\n{}",
        redcar.log()
    );
    assert_eq!(answered, Some(Value::bulk("v")), "read from the replica");
}
