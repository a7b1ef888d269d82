//! A redirect met on a dedicated connection (WATCH, blocking commands) tells redcar what one on the
//! shared connections does: an `-ASK` marks its slot migrating, so that the slot's reads go to its
//! primary until the migration ends. Before, only the shared connections' ASKs marked the slot, and
//! `prefer-replica` reads went on to the source's replica.

use crate::redirects::{slot_and_another_owner, write_config};
use crate::support::{Redcar, RedisCluster, Value};

/// The slots redcar's `/topology` says are migrating.
fn migrating_slots(redcar: &Redcar) -> Vec<u64> {
    let (_, body) = redcar.http_get("/topology").expect("GET /topology");
    let json: serde_json::Value = serde_json::from_str(&body).expect("/topology is JSON");
    json["migrating_slots"]
        .as_array()
        .map(|slots| slots.iter().filter_map(|s| s.as_u64()).collect())
        .unwrap_or_default()
}

#[test]
fn an_ask_on_a_dedicated_connection_marks_the_slot_migrating() {
    let cluster = RedisCluster::start(3, 1);
    // No periodic refresh: only redirects can teach redcar the migrations.
    let quiet = write_config("cluster:\n  refresh_interval: 1h\n  refresh_min_gap: 10ms\n");
    let args = [
        "--read-policy",
        "prefer-replica",
        "--config",
        quiet.path_str(),
    ];
    let redcar = Redcar::start_with(&cluster.seeds(), &args);
    let mut c = redcar.client();
    // One slot for a blocking command, one for WATCH; each with a key that moves and one that
    // stays on the source.
    let cases = ["{ded-blocking}", "{ded-watch}"];
    let mut slots = Vec::new();
    for tag in cases {
        let (moved, stays) = (format!("{tag}moved"), format!("{tag}stays"));
        assert_eq!(c.q(&["RPUSH", &moved, "a"]), Value::Int(1));
        assert_eq!(c.q(&["SET", &stays, "here"]), Value::simple("OK"));
        let (slot, from, to) = slot_and_another_owner(&cluster, &moved);
        let migration = cluster.start_migration(slot, from, to);
        cluster.migrate_keys(&migration, &[moved.as_bytes()]);
        slots.push((slot, from, moved, stays));
    }
    assert_eq!(c.q(&["WAIT", "1", "2000"]), Value::Int(1));
    assert!(migrating_slots(&redcar).is_empty(), "nothing seen yet");

    // A blocking command on the moved list: the source answers -ASK on the dedicated
    // connection, the target the element.
    let (blocking_slot, _, moved, _) = &slots[0];
    assert_eq!(
        c.q(&["BLPOP", moved, "1"]),
        Value::Array(Some(vec![Value::bulk(moved), Value::bulk("a")]))
    );
    assert_eq!(migrating_slots(&redcar), vec![u64::from(*blocking_slot)]);

    // WATCH of the moved key: -ASK on its dedicated connection too.
    let (watch_slot, _, moved, _) = &slots[1];
    assert_eq!(c.q(&["WATCH", moved]), Value::simple("OK"));
    assert_eq!(c.q(&["UNWATCH"]), Value::simple("OK"));
    let mut marked = migrating_slots(&redcar);
    marked.sort_unstable();
    let mut expected = vec![u64::from(*blocking_slot), u64::from(*watch_slot)];
    expected.sort_unstable();
    assert_eq!(marked, expected);

    // So reads of those slots go to their primaries, not to the sources' replicas.
    for (_, from, _, stays) in &slots {
        let replica = cluster.replicas_of(*from)[0].port();
        let replica_gets = || {
            let info = cluster.node_by_port(replica).cmd(&["INFO", "commandstats"]);
            crate::support::resp_client::command_calls(&info.to_text(), "get")
        };
        let before = replica_gets();
        for _ in 0..20 {
            assert_eq!(c.q(&["GET", stays]), Value::bulk("here"));
        }
        assert_eq!(
            replica_gets(),
            before,
            "no read of {stays} went to the replica"
        );
    }
}
