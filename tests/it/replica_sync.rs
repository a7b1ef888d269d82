//! A replica not in sync with its primary serves no reads: with `prefer-replica`, reads through
//! redcar never see what a replica waiting for its full sync answers (Redis serves it:
//! `replica-serve-stale-data yes`) — nil for keys that exist when it restarted empty, old values
//! when it restarted with an old dataset and redcar meets it for the first time in that state.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::redirects::{write_config, TempConfig};
use crate::support::resp_client::command_calls;
use crate::support::{Redcar, RedisCluster, RedisServer, Value};

const KEYS: usize = 2000;

/// `GET` calls a node has served since it started (INFO commandstats).
fn get_calls(node: &RedisServer) -> u64 {
    command_calls(&node.cli(&["INFO", "commandstats"]), "get")
}

/// A 3+1 cluster whose first primary holds [`KEYS`] keys its replica has too, and which waits
/// `delay_s` seconds before it streams the RDB to a replica asking for a full sync: a replica
/// restarted empty stays empty (and answering) that long. Values are `v1-<key>`. Returns the
/// primary's and the replica's ports and the keys.
fn cluster_with_keys(delay_s: &str) -> (RedisCluster, u16, u16, Arc<Vec<String>>) {
    let cluster = RedisCluster::start(3, 1);
    let primary_port = cluster.primary_ports()[0];
    let replica_port = cluster.replicas_of(primary_port)[0].port();
    // One hash tag: every key on this primary (and its replica).
    let tag = cluster.key_on_node("sync", primary_port);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("{{{tag}}}:{i}")).collect();
    let primary = cluster.node_by_port(primary_port);
    let sets: Vec<Vec<String>> = keys
        .iter()
        .map(|k| vec!["SET".to_string(), k.clone(), format!("v1-{k}")])
        .collect();
    let replies = primary.client().pipeline(&sets).expect("write the keys");
    assert!(replies.iter().all(|r| *r == Value::simple("OK")));
    for (name, value) in [
        ("repl-diskless-sync", "yes"),
        ("repl-diskless-sync-delay", delay_s),
    ] {
        assert_eq!(
            primary.cmd(&["CONFIG", "SET", name, value]),
            Value::simple("OK")
        );
    }
    cluster.wait_until(Duration::from_secs(10), "the replica has every key", |c| {
        c.node_by_port(replica_port).cmd(&["DBSIZE"]).as_int() == Some(KEYS as i64)
    });
    (cluster, primary_port, replica_port, Arc::new(keys))
}

/// `prefer-replica`, with ejections short and checked often, so a node that answers `PING` is
/// back within ~0.2 s: without the sync check, an empty replica would be read at once.
fn redcar_config() -> TempConfig {
    write_config(
        "router:\n  read_policy: prefer-replica\n\
         upstream:\n  outlier:\n    consecutive_failures: 2\n    base_ejection_time: 100ms\n    \
         max_ejection_time: 200ms\n    health_check_interval: 50ms\n",
    )
}

/// SIGKILL, then start again empty. The harness runs without persistence, but a replica keeps
/// the RDB of its last full sync on disk (`rdb-del-sync-files no`): removed, so nothing is loaded.
fn restart_empty(cluster: &mut RedisCluster, port: u16, down_for: Duration) -> Instant {
    let replica = cluster.node_by_port_mut(port);
    replica.kill();
    for file in ["dump.rdb", "appendonly.aof"] {
        let _ = std::fs::remove_file(replica.dir().join(file));
    }
    thread::sleep(down_for);
    replica.restart();
    Instant::now()
}

/// Waits for `master_link_status:up` on the replica; how long after `since` that was.
fn wait_synced(replica: &RedisServer, since: Instant) -> Duration {
    while replica
        .info_field("replication", "master_link_status")
        .as_deref()
        != Some("up")
    {
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "the replica never finished its sync"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let synced_after = since.elapsed();
    assert!(
        synced_after > Duration::from_secs(1),
        "the sync was too fast ({synced_after:?}) to show anything"
    );
    synced_after
}

/// Waits until the replica has served `more` further `GET`s; how long that took.
fn wait_serving(replica: &RedisServer, more: u64) -> Duration {
    let start = Instant::now();
    let calls = get_calls(replica);
    while get_calls(replica) < calls + more {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the replica never served reads"
        );
        thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

/// What the reader saw: nil or old values for keys that exist, errors, replies in all.
#[derive(Debug, Default)]
struct Seen {
    wrong: Vec<String>,
    errors: Vec<String>,
    reads: u64,
}

/// `GET`s of existing keys through redcar in a tight loop until `stop`; a value that does not
/// start with `current` (the version every key has) is wrong.
fn start_reader(
    redcar: &Redcar,
    keys: &Arc<Vec<String>>,
    current: &'static str,
    stop: &Arc<AtomicBool>,
) -> JoinHandle<Seen> {
    let (stop, keys, mut client) = (stop.clone(), keys.clone(), redcar.client());
    thread::spawn(move || {
        let mut seen = Seen::default();
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let key = &keys[i % keys.len()];
            i += 7;
            match client.cmd(&["GET", key]) {
                Ok(Value::Bulk(Some(v))) if v.starts_with(current.as_bytes()) => {}
                Ok(Value::Bulk(v)) => seen.wrong.push(format!(
                    "{key}: {:?}",
                    v.map(|v| String::from_utf8_lossy(&v[..v.len().min(20)]).into_owned())
                )),
                Ok(other) => seen.errors.push(format!("{key}: {other:?}")),
                Err(e) => {
                    seen.errors.push(format!("{key}: {e}"));
                    break;
                }
            }
            seen.reads += 1;
        }
        seen
    })
}

fn assert_no_wrong_reads(seen: &Seen) {
    assert!(
        seen.wrong.is_empty(),
        "{} of {} reads of existing keys answered nil or an old value (first: {:?})",
        seen.wrong.len(),
        seen.reads,
        seen.wrong.first()
    );
    assert!(
        seen.errors.is_empty(),
        "errors: {:?}",
        &seen.errors[..seen.errors.len().min(5)]
    );
}

#[test]
fn a_restarted_empty_replica_serves_no_reads_before_its_full_sync_is_over() {
    let (mut cluster, _, replica_port, keys) = cluster_with_keys("2");
    let config = redcar_config();
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = start_reader(&redcar, &keys, "v1-", &stop);
    wait_serving(cluster.node_by_port(replica_port), 100);

    let restarted = restart_empty(&mut cluster, replica_port, Duration::from_millis(300));
    let replica = cluster.node_by_port(replica_port);
    let synced_after = wait_synced(replica, restarted);
    // Back in rotation once synced.
    let back_after = wait_serving(replica, 10);
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let seen = reader.join().expect("reader thread");
    eprintln!(
        "replica synced {synced_after:?} after its restart, back in rotation {back_after:?} later; \
         {} reads, {} wrong, {} errors",
        seen.reads,
        seen.wrong.len(),
        seen.errors.len()
    );
    assert_no_wrong_reads(&seen);
}

#[test]
fn a_replica_restarted_with_old_data_is_not_read_when_first_met_during_its_full_sync() {
    let (mut cluster, primary_port, replica_port, keys) = cluster_with_keys("4");
    // The replica's dataset on disk, with its replication offset: it comes back with `v1-`.
    assert_eq!(
        cluster.node_by_port(replica_port).cmd(&["SAVE"]),
        Value::simple("OK")
    );
    cluster.node_by_port_mut(replica_port).kill();
    // `v2-` everywhere while it is down, more than the primary's 1 MB backlog: it must resync
    // in full, so it is listed (its offset is known) but stale until the RDB comes.
    let pad = "x".repeat(1024);
    let sets: Vec<Vec<String>> = keys
        .iter()
        .map(|k| vec!["SET".to_string(), k.clone(), format!("v2-{k}-{pad}")])
        .collect();
    let primary = cluster.node_by_port(primary_port);
    let replies = primary.client().pipeline(&sets).expect("update the keys");
    assert!(replies.iter().all(|r| *r == Value::simple("OK")));
    cluster.node_by_port_mut(replica_port).restart();
    let restarted = Instant::now();
    let replica = cluster.node_by_port(replica_port);
    assert_eq!(
        replica.cmd(&["DBSIZE"]).as_int(),
        Some(KEYS as i64),
        "restarted with its old dataset"
    );
    // redcar starts while the replica waits for its RDB: its first connections meet it stale.
    let config = redcar_config();
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let stop = Arc::new(AtomicBool::new(false));
    let reader = start_reader(&redcar, &keys, "v2-", &stop);
    assert_eq!(
        replica
            .info_field("replication", "master_link_status")
            .as_deref(),
        Some("down"),
        "redcar was slower to start than the sync: nothing tested"
    );
    let synced_after = wait_synced(replica, restarted);
    let back_after = wait_serving(replica, 10);
    thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let seen = reader.join().expect("reader thread");
    eprintln!(
        "replica synced {synced_after:?} after its restart, serving {back_after:?} later; \
         {} reads, {} wrong, {} errors",
        seen.reads,
        seen.wrong.len(),
        seen.errors.len()
    );
    assert_no_wrong_reads(&seen);
}
