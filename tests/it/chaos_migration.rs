//! Slot migrations under client traffic, as the chaos soak found them: transactions on a hashtag
//! whose keys are split between source and target, and reads with `prefer-replica` of keys that
//! already moved, and of a slot just moved to a primary that freezes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::{slot_and_another_owner, write_config};
use crate::support::{Redcar, RedisCluster, Value};

/// The value of `key` on `port`, asked with ASKING (the key may be on an importing target).
fn value_on(cluster: &RedisCluster, port: u16, key: &str) -> Value {
    let mut c = cluster.node_by_port(port).client();
    assert_eq!(c.q(&["ASKING"]), Value::simple("OK"));
    c.q(&["GET", key])
}

/// The slots redcar's `/topology` says are migrating.
fn migrating_slots(redcar: &Redcar) -> Vec<u64> {
    let (_, body) = redcar.http_get("/topology").expect("GET /topology");
    let json: serde_json::Value = serde_json::from_str(&body).expect("/topology is JSON");
    json["migrating_slots"]
        .as_array()
        .map(|slots| slots.iter().filter_map(|s| s.as_u64()).collect())
        .unwrap_or_default()
}

/// Redis refuses a transaction whose keys are split between the two nodes of a migration as a
/// whole, at EXEC (`-TRYAGAIN`, or `-ASK` for a key moved after it was queued): nothing ran, so
/// redcar sends the unit again until the keys are together, within `op_timeout`. Before, EXEC's
/// own `-TRYAGAIN` reached the client.
#[test]
fn transactions_on_a_migrating_hashtag_apply_once_and_never_fail() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--read-policy", "prefer-replica", "--op-timeout", "5s"],
    );
    let keys = ["{chaos-tx}a", "{chaos-tx}b", "{chaos-tx}c"];
    let (slot, from, to) = slot_and_another_owner(&cluster, keys[0]);
    let mut c = redcar.client();
    for key in keys {
        assert_eq!(c.q(&["SET", key, "0"]), Value::simple("OK"));
    }

    // Exactly the soak's case: one key already on the target, EXEC sent, the rest moved later.
    let migration = cluster.start_migration(slot, from, to);
    cluster.migrate_keys(&migration, &[keys[0].as_bytes()]);
    let sent = Instant::now();
    let exec = thread::spawn(move || {
        let mut tx = Vec::new();
        for cmd in [
            vec!["MULTI"],
            vec!["INCR", keys[0]],
            vec!["INCR", keys[1]],
            vec!["INCR", keys[2]],
            vec!["EXEC"],
        ] {
            tx.push(c.q(&cmd));
        }
        (tx, c)
    });
    thread::sleep(Duration::from_millis(300));
    cluster.migrate_keys(&migration, &[keys[1].as_bytes(), keys[2].as_bytes()]);
    let (replies, mut c) = exec.join().expect("transaction thread");
    let ones = Value::Array(Some(vec![Value::Int(1); 3]));
    assert_eq!(
        replies[4], ones,
        "EXEC while the keys were split: {replies:?}"
    );
    assert!(
        sent.elapsed() >= Duration::from_millis(300),
        "it waited for the keys"
    );

    // Then transactions back to back while the keys move back in steps and the slot is handed
    // over: every EXEC succeeds, and each applied exactly once.
    cluster.finish_migration(migration);
    let stop = Arc::new(AtomicBool::new(false));
    let client = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut applied = 0i64;
            let mut failures = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let replies = c
                    .pipeline(&[
                        vec!["MULTI"],
                        vec!["INCR", keys[0]],
                        vec!["INCR", keys[1]],
                        vec!["INCR", keys[2]],
                        vec!["EXEC"],
                    ])
                    .expect("pipeline");
                match &replies[4] {
                    Value::Array(Some(items)) if items.len() == 3 => applied += 1,
                    other => failures.push(format!("{replies:?} (EXEC: {other:?})")),
                }
            }
            (applied, failures)
        })
    };
    let back = cluster.start_migration(slot, to, from);
    for key in keys {
        thread::sleep(Duration::from_millis(250));
        cluster.migrate_keys(&back, &[key.as_bytes()]);
    }
    thread::sleep(Duration::from_millis(250));
    cluster.finish_migration(back);
    thread::sleep(Duration::from_millis(250));
    stop.store(true, Ordering::Relaxed);
    let (applied, failures) = client.join().expect("client thread");
    assert!(
        failures.is_empty(),
        "{} failed: {failures:?}",
        failures.len()
    );
    assert!(applied > 5, "only {applied} transactions ran");
    let expected = Value::bulk((applied + 1).to_string());
    for key in keys {
        assert_eq!(
            value_on(&cluster, from, key),
            expected,
            "{key} applied once each"
        );
    }
    assert!(
        redcar.metric_sum("redcar_retries_total") >= 1.0,
        "the split keys made redcar re-send a transaction"
    );
}

/// A replica does not know its primary is migrating a slot, so it answers nil for a key that
/// already moved to the target. Once redcar has seen the migration — a refresh from the source
/// or target shows its marker, or any `-ASK` for the slot — reads of that slot go to the
/// primary, which answers `-ASK` (followed) for moved keys.
#[test]
fn reads_of_a_migrating_slot_are_never_nil_with_prefer_replica() {
    let cluster = RedisCluster::start(3, 1);
    // Learns from refreshes (every 100 ms, the whole map from a random node of six: the digest
    // check asks one node, whose CLUSTER NODES shows a migration only if it takes part).
    let config = write_config(
        "cluster:\n  refresh_interval: 100ms\n  refresh_min_gap: 10ms\n  change_check: off\n",
    );
    let by_refresh = Redcar::start_with(
        &cluster.seeds(),
        &[
            "--read-policy",
            "prefer-replica",
            "--config",
            config.path_str(),
        ],
    );
    // Learns from redirects only (no periodic refresh).
    let quiet = write_config("cluster:\n  refresh_interval: 1h\n  refresh_min_gap: 10ms\n");
    let by_ask = Redcar::start_with(
        &cluster.seeds(),
        &[
            "--read-policy",
            "prefer-replica",
            "--config",
            quiet.path_str(),
        ],
    );
    let keys: Vec<String> = (0..20).map(|i| format!("{{chaos-read}}k{i}")).collect();
    let (slot, from, to) = slot_and_another_owner(&cluster, &keys[0]);
    let mut c = by_refresh.client();
    for key in &keys {
        assert_eq!(c.q(&["SET", key, key]), Value::simple("OK"));
    }
    assert_eq!(
        c.q(&["WAIT", "1", "2000"]),
        Value::Int(1),
        "the replica has them"
    );

    let migration = cluster.start_migration(slot, from, to);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !migrating_slots(&by_refresh).contains(&u64::from(slot)) {
        assert!(
            Instant::now() < deadline,
            "no refresh showed slot {slot} migrating"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let moved: Vec<&[u8]> = keys[..10].iter().map(|k| k.as_bytes()).collect();
    cluster.migrate_keys(&migration, &moved);
    // A write to the slot: its -ASK teaches the second redcar.
    let mut w = by_ask.client();
    assert_eq!(w.q(&["SET", &keys[0], &keys[0]]), Value::simple("OK"));
    assert_eq!(migrating_slots(&by_ask), vec![u64::from(slot)]);

    let replica = cluster.replicas_of(from)[0].port();
    let replica_gets = || {
        let info = cluster.node_by_port(replica).cmd(&["INFO", "commandstats"]);
        crate::support::resp_client::command_calls(&info.to_text(), "get")
    };
    let before = replica_gets();
    let mut nils = Vec::new();
    for redcar in [&by_refresh, &by_ask] {
        let mut r = redcar.client();
        for round in 0..25 {
            for key in &keys {
                match r.q(&["GET", key]) {
                    Value::Bulk(Some(v)) if v == key.as_bytes() => {}
                    other => {
                        nils.push(format!("{}: {key} round {round}: {other:?}", redcar.port()))
                    }
                }
            }
        }
    }
    assert!(nils.is_empty(), "{} wrong reads: {nils:?}", nils.len());
    assert_eq!(
        replica_gets(),
        before,
        "no read of the slot went to its replica"
    );
    let asks = by_refresh.metric_sum("redcar_redirects_total{kind=\"ask\"");
    assert!(asks >= 250.0, "moved keys were read with ASK ({asks})");

    cluster.finish_migration(migration);
    for redcar in [&by_refresh, &by_ask] {
        let mut r = redcar.client();
        for key in &keys {
            assert_eq!(
                r.q(&["GET", key]),
                Value::bulk(key),
                "{key} after the migration"
            );
        }
    }
    assert_eq!(value_on(&cluster, to, &keys[19]), Value::bulk(&keys[19]));
}

/// A key moved before redcar has any sign of the migration (no refresh since, no `-ASK` seen):
/// the source's replica answers nil for it, and `router.replica_miss_check` (on by default)
/// asks the source primary again, which answers `-ASK` (followed) — so the read is right.
/// With the check off the same read gets the replica's nil, which is what the soak caught.
#[test]
fn a_replica_nil_is_confirmed_by_the_primary_before_any_sign_of_a_migration() {
    let cluster = RedisCluster::start(3, 1);
    let quiet = "cluster:\n  refresh_interval: 1h\n  refresh_min_gap: 10ms\n";
    let checked_config = write_config(quiet);
    let unchecked_config = write_config(&format!("{quiet}router:\n  replica_miss_check: false\n"));
    let start = |config: &crate::redirects::TempConfig| {
        Redcar::start_with(
            &cluster.seeds(),
            &[
                "--read-policy",
                "prefer-replica",
                "--config",
                config.path_str(),
            ],
        )
    };
    let (checked, unchecked) = (start(&checked_config), start(&unchecked_config));
    let keys: Vec<String> = (0..4).map(|i| format!("{{miss-check}}k{i}")).collect();
    let (slot, from, to) = slot_and_another_owner(&cluster, &keys[0]);
    let mut c = checked.client();
    for key in &keys {
        assert_eq!(c.q(&["SET", key, key]), Value::simple("OK"));
    }
    assert_eq!(
        c.q(&["WAIT", "1", "2000"]),
        Value::Int(1),
        "the replica has them"
    );
    let missing = "{miss-check}absent";

    let migration = cluster.start_migration(slot, from, to);
    cluster.migrate_keys(&migration, &[keys[0].as_bytes()]);
    let mut got = Vec::new();
    for redcar in [&checked, &unchecked] {
        let mut r = redcar.client();
        got.push((
            r.q(&["GET", &keys[0]]),
            r.q(&["GET", &keys[1]]),
            r.q(&["GET", missing]),
        ));
    }
    cluster.finish_migration(migration);
    let (moved, stayed, absent) = &got[0];
    assert_eq!(
        moved,
        &Value::bulk(&keys[0]),
        "the moved key, with the check"
    );
    assert_eq!(stayed, &Value::bulk(&keys[1]), "a key still on the source");
    assert_eq!(
        absent,
        &Value::Bulk(None),
        "a key nobody wrote is still nil"
    );
    assert_eq!(
        got[1].0,
        Value::Bulk(None),
        "without the check the source's replica answers nil for the moved key"
    );
    assert!(
        checked.metric_sum("redcar_redirects_total{kind=\"ask\"") >= 1.0,
        "the primary's -ASK was followed"
    );
}

/// Once redcar's map names a migrated slot's new owner, the slot is no longer marked migrating
/// and its reads go to the new owner's replica (the soak, seed 124416110: a slot moved to a
/// primary that was frozen 2.4 s later, while the mark still had its 5 s grace after the `-MOVED`,
/// so a `prefer-replica` read went to the frozen primary alone and timed out). Here the new owner
/// is frozen right after redcar adopts the map that names it: every read is answered by its
/// replica. Before, the first reads timed out until the frozen primary was ejected.
#[test]
fn a_slot_just_moved_is_read_from_the_new_owners_replica_while_the_new_owner_is_frozen() {
    // A node timeout above the freeze: the cluster does not fail the frozen primary over.
    let cluster = RedisCluster::start_with(3, 1, 5000);
    let quiet = write_config("cluster:\n  refresh_interval: 1h\n  refresh_min_gap: 10ms\n");
    let args = [
        "--read-policy",
        "prefer-replica",
        "--op-timeout",
        "300ms",
        "--config",
        quiet.path_str(),
    ];
    let redcar = Redcar::start_with(&cluster.seeds(), &args);
    let keys: Vec<String> = (0..20).map(|i| format!("{{chaos-handover}}k{i}")).collect();
    let (slot, from, to) = slot_and_another_owner(&cluster, &keys[0]);
    let mut c = redcar.client();
    for key in &keys {
        assert_eq!(c.q(&["SET", key, key]), Value::simple("OK"));
    }
    assert_eq!(c.q(&["WAIT", "1", "2000"]), Value::Int(1));

    let migration = cluster.start_migration(slot, from, to);
    cluster.migrate_keys(&migration, &[keys[0].as_bytes()]);
    assert_eq!(
        c.q(&["GET", &keys[0]]),
        Value::bulk(&keys[0]),
        "read by ASK"
    );
    assert_eq!(migrating_slots(&redcar), vec![u64::from(slot)]);
    cluster.finish_migration(migration);
    // The new owner's replica has every key (it replicates the MIGRATE's RESTOREs).
    let to_replica = cluster.replicas_of(to)[0].port();
    let mut direct = cluster.node_by_port(to_replica).client();
    assert_eq!(direct.q(&["READONLY"]), Value::simple("OK"));
    crate::chaos_topology::wait_for(
        Duration::from_secs(10),
        "the new owner's replica has the keys and serves the slot",
        || keys.iter().all(|k| direct.q(&["GET", k]) == Value::bulk(k)),
    );
    // The source's -MOVED teaches redcar the new owner.
    assert_eq!(c.q(&["GET", &keys[1]]), Value::bulk(&keys[1]));
    let owner = format!("127.0.0.1:{to}");
    crate::chaos_topology::wait_for(
        Duration::from_secs(5),
        "redcar's map names the new owner",
        || crate::chaos_topology::shard_of(&redcar, slot).0 == owner,
    );
    let marked = migrating_slots(&redcar);

    let pid = cluster.node_by_port(to).pid().expect("the new owner runs");
    let (reads, failures) = crate::support::freeze::read_own_names_while_frozen(
        pid,
        Duration::from_millis(1500),
        &keys,
        &mut c,
    );
    eprintln!(
        "chaos_migration handover: marked after the map named the new owner: {marked:?}; \
         reads={reads} failures={}",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "reads failed while the new owner was frozen (slots marked migrating: {marked:?}): {:?}",
        &failures[..failures.len().min(5)]
    );
    assert!(marked.is_empty(), "the new map ended the mark: {marked:?}");
    assert!(reads > 0);
}
