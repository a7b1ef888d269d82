//! `CLUSTER SHARDS` against what a real redis-server 7.0 node answered (fixtures captured from a
//! 3+3 cluster at one moment: `CLUSTER SHARDS` and `CLUSTER SLOTS` from the same node), and
//! hand-built replies for what that cluster did not show (failed and syncing replicas, fragments,
//! TLS ports, unknown endpoints).

use bytes::Bytes;

use super::*;
use crate::cluster::parse::parse_cluster_slots;
use crate::protocol::Limits;

fn fixture(bytes: &[u8]) -> Frame {
    Frame::from_bytes(Bytes::copy_from_slice(bytes), &Limits::default()).expect("one reply")
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(Bytes::from(s.to_string()))
}

/// A node entry as Redis 7.0 writes it (`tls`: the port is `tls-port`).
fn node(id: &str, port: i64, role: &str, health: &str, endpoint: &str) -> Frame {
    Frame::Array(vec![
        bulk("id"),
        bulk(id),
        bulk("port"),
        Frame::Integer(port),
        bulk("ip"),
        bulk("127.0.0.1"),
        bulk("endpoint"),
        bulk(endpoint),
        bulk("role"),
        bulk(role),
        bulk("replication-offset"),
        Frame::Integer(if health == "loading" { 0 } else { 938 }),
        bulk("health"),
        bulk(health),
    ])
}

fn shard(slots: &[i64], nodes: Vec<Frame>) -> Frame {
    Frame::Array(vec![
        bulk("slots"),
        Frame::Array(slots.iter().map(|&s| Frame::Integer(s)).collect()),
        bulk("nodes"),
        Frame::Array(nodes),
    ])
}

#[test]
fn a_real_nodes_shards_give_the_ranges_its_slots_give() {
    let shards = fixture(include_bytes!("fixtures/redis7-shards.resp"));
    let slots = fixture(include_bytes!("fixtures/redis7-slots.resp"));
    let from_shards = parse_cluster_shards(&shards, "127.0.0.1:29103", false).expect("shards");
    let mut from_slots = parse_cluster_slots(&slots, "127.0.0.1:29103").expect("slots");
    from_slots.sort_unstable_by_key(|r| r.start);
    assert_eq!(from_shards.len(), 3);
    assert_eq!(from_shards, from_slots);
}

#[test]
fn fragments_failed_and_syncing_replicas_and_empty_shards() {
    let (p, r1, r2, r3) = (
        "a".repeat(40),
        "b".repeat(40),
        "c".repeat(40),
        "d".repeat(40),
    );
    let reply = Frame::Array(vec![
        shard(
            &[100, 199, 0, 9, 5000, 5000],
            vec![
                node(&p, 7000, "master", "online", "127.0.0.1"),
                node(&r1, 7001, "replica", "online", "127.0.0.1"),
                node(&r2, 7002, "replica", "fail", "127.0.0.1"),
                node(&r3, 7003, "replica", "loading", "127.0.0.1"),
            ],
        ),
        // A primary that lost all its slots: no range.
        shard(
            &[],
            vec![node(&"e".repeat(40), 7004, "master", "online", "")],
        ),
    ]);
    let ranges = parse_cluster_shards(&reply, "10.0.0.1:7000", false).expect("valid");
    let bounds: Vec<(u16, u16)> = ranges.iter().map(|r| (r.start, r.end)).collect();
    assert_eq!(bounds, vec![(0, 9), (100, 199), (5000, 5000)]);
    for range in &ranges {
        let primary = range.primary.as_ref().expect("a primary");
        assert_eq!(primary.addr, "127.0.0.1:7000");
        assert_eq!(primary.id.as_deref(), Some(p.as_str()));
        let replicas: Vec<&str> = range.replicas.iter().map(|n| n.addr.as_str()).collect();
        assert_eq!(replicas, vec!["127.0.0.1:7001"], "only the online replica");
    }
}

#[test]
fn endpoints_ports_and_tls() {
    let id = "a".repeat(40);
    let mut fields = match node(&id, 7000, "master", "online", "") {
        Frame::Array(fields) => fields,
        _ => unreachable!(),
    };
    fields.extend([bulk("tls-port"), Frame::Integer(8000)]);
    let reply = Frame::Array(vec![shard(&[0, 16383], vec![Frame::Array(fields)])]);
    let plain = parse_cluster_shards(&reply, "10.0.0.1:7000", false).expect("valid");
    let primary = plain[0].primary.as_ref().map(|n| n.addr.as_str());
    assert_eq!(
        primary,
        Some("10.0.0.1:7000"),
        "empty endpoint: the node asked"
    );
    let tls = parse_cluster_shards(&reply, "10.0.0.1:8000", true).expect("valid");
    let primary = tls[0].primary.as_ref().map(|n| n.addr.as_str());
    assert_eq!(primary, Some("10.0.0.1:8000"), "the TLS port over TLS");
    let unknown = Frame::Array(vec![shard(
        &[0, 16383],
        vec![node(&id, 7000, "master", "online", "?")],
    )]);
    let ranges = parse_cluster_shards(&unknown, "10.0.0.1:7000", false).expect("valid");
    assert_eq!(
        ranges[0].primary, None,
        "an unknown endpoint leaves the range unowned"
    );
}

#[test]
fn malformed_replies_are_errors_not_skipped() {
    let id = "a".repeat(40);
    let good = || node(&id, 7000, "master", "online", "127.0.0.1");
    let bad = [
        Frame::Array(vec![shard(&[0], vec![good()])]),
        Frame::Array(vec![shard(&[10, 5], vec![good()])]),
        Frame::Array(vec![shard(&[0, 16384], vec![good()])]),
        Frame::Array(vec![shard(&[0, 1], vec![good(), good()])]),
        Frame::Array(vec![shard(
            &[0, 1],
            vec![node(&id, 7000, "leader", "online", "127.0.0.1")],
        )]),
        Frame::Array(vec![shard(
            &[0, 1],
            vec![node(&id, 70000, "master", "online", "127.0.0.1")],
        )]),
        Frame::Array(vec![shard(
            &[0, 1],
            vec![node("", 7000, "master", "online", "x")],
        )]),
        Frame::Array(vec![Frame::Array(vec![bulk("slots")])]),
        Frame::Integer(3),
    ];
    for reply in bad {
        assert!(
            parse_cluster_shards(&reply, "x:1", false).is_err(),
            "accepted {reply:?}"
        );
    }
    let error = Frame::Error(Bytes::from_static(
        b"ERR Unknown subcommand or wrong number of arguments for 'SHARDS'. Try CLUSTER HELP.",
    ));
    let message = parse_cluster_shards(&error, "x:1", false).expect_err("error reply");
    assert!(message.contains("Unknown subcommand"), "{message}");
}
