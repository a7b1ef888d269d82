//! Multi-key commands whose keys span slots (split per slot and merged), partial failures, and
//! stream reads without BLOCK.

use crate::support::{Redcar, RedisCluster, Value};

fn bulk_strs(items: &[Option<String>]) -> Value {
    Value::Array(Some(
        items
            .iter()
            .map(|v| v.as_ref().map_or(Value::Bulk(None), Value::bulk))
            .collect(),
    ))
}

fn cmd(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn error_of(v: &Value) -> String {
    v.error()
        .map(str::to_string)
        .unwrap_or_else(|| panic!("expected an error, got {v:?}"))
}

#[test]
fn multi_key_commands_across_slots_are_split_and_merged_in_order() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let keys: Vec<String> = (0..50).map(|i| format!("mk:{i}")).collect();
    let slots: std::collections::HashSet<u16> = keys.iter().map(|k| cluster.key_slot(k)).collect();
    assert!(slots.len() > 40, "keys must span many slots");

    // MSET every key whose index is not a multiple of 5.
    let mut mset = vec!["MSET".to_string()];
    let mut expected = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        if i % 5 == 0 {
            expected.push(None);
        } else {
            mset.push(key.clone());
            mset.push(format!("v{i}"));
            expected.push(Some(format!("v{i}")));
        }
    }
    let mset_refs: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(c.q(&mset_refs), Value::simple("OK"));
    for (key, value) in keys.iter().zip(&expected) {
        let on_owner = cluster.primary_for_key(key).cmd(&["GET", key]);
        let want = value.as_ref().map_or(Value::Bulk(None), Value::bulk);
        assert_eq!(on_owner, want, "{key} on its owning primary");
    }

    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    assert_eq!(c.q(&mget), bulk_strs(&expected));

    // Counts: 40 keys exist; a key named twice counts twice, as in Redis.
    let mut exists = vec!["EXISTS", "mk:1"];
    exists.extend(keys.iter().map(String::as_str));
    assert_eq!(c.q(&exists), Value::Int(41));
    let mut touch = vec!["TOUCH"];
    touch.extend(keys.iter().map(String::as_str));
    assert_eq!(c.q(&touch), Value::Int(40));
    let mut del = vec!["DEL"];
    del.extend(keys[..20].iter().map(String::as_str));
    assert_eq!(c.q(&del), Value::Int(16));
    let mut unlink = vec!["UNLINK"];
    unlink.extend(keys[15..30].iter().map(String::as_str));
    assert_eq!(c.q(&unlink), Value::Int(8));
    for key in &keys[..30] {
        assert_eq!(
            cluster.primary_for_key(key).cmd(&["EXISTS", key]),
            Value::Int(0)
        );
    }
    assert_eq!(c.q(&exists), Value::Int(16));

    // Atomic multi-key commands across slots stay refused.
    for refused in [
        &["MSETNX", "a", "1", "b", "2"][..],
        &["RENAME", "a", "b"],
        &["SINTERSTORE", "a", "b", "c"],
    ] {
        let e = error_of(&c.q(refused));
        assert!(e.starts_with("CROSSSLOT ") && e.contains("hash tag"), "{e}");
    }
    // Same slot: one forward, unchanged.
    assert_eq!(
        c.q(&["MSET", "{t}a", "1", "{t}b", "2"]),
        Value::simple("OK")
    );
    assert_eq!(
        c.q(&["MGET", "{t}a", "{t}b", "{t}c"]),
        bulk_strs(&[Some("1".into()), Some("2".into()), None])
    );
    let odd = error_of(&c.q(&["MSET", "a", "1", "b"]));
    assert_eq!(odd, "ERR wrong number of arguments for 'mset' command");

    // A pipeline mixing split and single-key commands is answered in order.
    let replies = c
        .pipeline(&[
            cmd(&["SET", "p:a", "1"]),
            cmd(&["MSET", "p:b", "2", "p:c", "3", "p:a", "10"]),
            cmd(&["INCR", "p:a"]),
            cmd(&["MGET", "p:a", "p:b", "p:c", "p:d"]),
            cmd(&["DEL", "p:a", "p:b", "p:d"]),
            cmd(&["GET", "p:a"]),
            cmd(&["EXISTS", "p:a", "p:b", "p:c"]),
        ])
        .expect("pipeline");
    assert_eq!(
        replies,
        vec![
            Value::simple("OK"),
            Value::simple("OK"),
            Value::Int(11),
            bulk_strs(&[Some("11".into()), Some("2".into()), Some("3".into()), None]),
            Value::Int(2),
            Value::Bulk(None),
            Value::Int(1),
        ]
    );

    streams_are_read_without_block(&redcar);
}

/// XREAD / XREADGROUP are served, with and without BLOCK.
fn streams_are_read_without_block(redcar: &Redcar) {
    let mut c = redcar.client();
    for i in 0..3 {
        let id = c.q(&["XADD", "st:1", "*", "n", &i.to_string()]);
        assert!(id.as_str().is_some_and(|s| s.contains('-')), "{id:?}");
    }
    let read = c.q(&["XREAD", "COUNT", "2", "STREAMS", "st:1", "0"]);
    let streams = read.as_array().expect("XREAD array");
    assert_eq!(streams.len(), 1, "{read:?}");
    let entries = streams[0].as_array().expect("stream")[1]
        .as_array()
        .expect("entries")
        .len();
    assert_eq!(entries, 2, "{read:?}");
    assert_eq!(
        c.q(&["XGROUP", "CREATE", "st:1", "g", "0"]),
        Value::simple("OK")
    );
    let group = c.q(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "COUNT",
        "10",
        "STREAMS",
        "st:1",
        ">",
    ]);
    let entries = group.as_array().expect("XREADGROUP array")[0]
        .as_array()
        .expect("stream")[1]
        .as_array()
        .expect("entries")
        .len();
    assert_eq!(entries, 3, "{group:?}");
    let cross = error_of(&c.q(&["XREAD", "STREAMS", "st:1", "st:2", "0", "0"]));
    assert!(cross.starts_with("CROSSSLOT "), "{cross}");
    // With BLOCK they run on a dedicated connection (tests/it/blocking.rs): nothing new here.
    assert_eq!(
        c.q(&["XREAD", "BLOCK", "10", "STREAMS", "st:1", "$"]),
        Value::Array(None)
    );
    let group = c.q(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c1",
        "BLOCK",
        "10",
        "STREAMS",
        "st:1",
        ">",
    ]);
    assert_eq!(
        group,
        Value::Array(None),
        "every entry was delivered already"
    );
    assert_eq!(c.q(&["XLEN", "st:1"]), Value::Int(3));
}

#[test]
fn a_split_command_touching_a_dead_primary_fails_instead_of_answering_short() {
    let mut cluster = RedisCluster::start(3, 0);
    // The live primaries keep serving their slots once the victim is marked failed.
    for node in cluster.nodes() {
        let set = node.cmd(&["CONFIG", "SET", "cluster-require-full-coverage", "no"]);
        assert_eq!(set, Value::simple("OK"));
    }
    let redcar = Redcar::start_with(&cluster.seeds(), &["--op-timeout", "300ms"]);
    let mut c = redcar.client();
    let ports = cluster.primary_ports();
    let keys: Vec<String> = ports
        .iter()
        .map(|&p| cluster.key_on_node("dead:", p))
        .collect();
    for key in &keys {
        assert_eq!(c.q(&["SET", key, "x"]), Value::simple("OK"));
    }
    let victim = ports[1];
    cluster.node_by_port_mut(victim).kill();

    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let e = error_of(&c.q(&mget));
    assert!(
        e.starts_with("ERR redcar: MGET failed for the keys in slot"),
        "{e}"
    );
    assert!(
        e.contains(&format!(":{victim}")),
        "names the dead node: {e}"
    );

    let mset = vec!["MSET", &keys[0], "y", &keys[1], "y", &keys[2], "y"];
    let e = error_of(&c.q(&mset));
    assert!(e.starts_with("ERR redcar: MSET failed"), "{e}");
    assert!(e.ends_with("some keys may have been written"), "{e}");
    let e = error_of(&c.q(&["EXISTS", &keys[0], &keys[1]]));
    assert!(e.starts_with("ERR redcar: EXISTS failed"), "{e}");

    // The connection stays usable, and keys on live primaries are served.
    assert_eq!(
        c.q(&["MGET", &keys[0], &keys[2]]),
        bulk_strs(&[Some("y".into()), Some("y".into())])
    );
}
