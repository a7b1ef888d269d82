//! Tests of reading the nodes' INFO, CONFIG and CLUSTER replies.

use bytes::Bytes;

use super::*;
use redcar_protocol::protocol::Frame;

fn bulk(s: &str) -> Frame {
    Frame::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

fn arr(items: Vec<Frame>) -> Frame {
    Frame::Array(items)
}

#[test]
fn info_text_becomes_a_flat_map() {
    let info = parse_info(
        "# Server\r\nredis_version:7.0.15\r\n\r\n# Commandstats\r\ncmdstat_get:calls=3,usec=9\r\n",
    );
    assert_eq!(info["redis_version"], "7.0.15");
    assert_eq!(parse_fields(&info["cmdstat_get"])["calls"], "3");
}

#[test]
fn cluster_nodes_lines_give_roles_slots_and_addresses() {
    let text = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 7000
b2 127.0.0.1:7001@17001,host-b slave a1 0 0 1 connected
c3 :7002@17002 master,fail - 0 0 2 disconnected 5461-6000 [6001->-d4]
d4 127.0.0.1:7003@17003 handshake - 0 0 0 connected
";
    let nodes = parse_cluster_nodes(text, "10.0.0.1");
    assert_eq!(nodes.len(), 3, "the handshake node is skipped");
    assert_eq!(nodes[0].slots, 5462);
    assert_eq!(nodes[0].role, Role::Primary);
    assert_eq!(nodes[1].addr, "127.0.0.1:7001");
    assert_eq!(nodes[1].primary_id.as_deref(), Some("a1"));
    assert_eq!(nodes[1].role, Role::Replica);
    assert_eq!(nodes[2].addr, "10.0.0.1:7002");
    assert!(nodes[2].failed);
    assert_eq!(nodes[2].slots, 540);
}

#[test]
fn cluster_slots_resolve_empty_and_unknown_hosts() {
    let node = |host: &str, port: i64| arr(vec![bulk(host), Frame::Integer(port), bulk("id")]);
    let reply = arr(vec![
        arr(vec![
            Frame::Integer(100),
            Frame::Integer(200),
            node("", 7001),
        ]),
        arr(vec![
            Frame::Integer(0),
            Frame::Integer(99),
            node("127.0.0.1", 7000),
        ]),
        arr(vec![
            Frame::Integer(201),
            Frame::Integer(300),
            node("?", 7002),
        ]),
    ]);
    let owners = parse_cluster_slots(&reply, "10.0.0.9:7001").expect("well formed");
    assert_eq!(owners.len(), 2);
    assert_eq!(owners[0].primary, "127.0.0.1:7000");
    assert_eq!(owners[1].primary, "10.0.0.9:7001");
    assert_eq!(parse_cluster_slots(&bulk("x"), "a:1"), None);
}

#[test]
fn slowlog_and_latency_entries_are_read() {
    let slow = arr(vec![arr(vec![
        Frame::Integer(1),
        Frame::Integer(1700000000),
        Frame::Integer(25000),
        arr(vec![bulk("keys"), bulk("*")]),
        bulk("127.0.0.1:5000"),
        bulk(""),
    ])]);
    assert_eq!(
        parse_slowlog(&slow),
        vec![NodeSlowEntry {
            command: "KEYS".into(),
            micros: 25000
        }]
    );
    let latency = arr(vec![arr(vec![
        bulk("aof-fsync-always"),
        Frame::Integer(1700000000),
        Frame::Integer(7),
        Frame::Integer(12),
    ])]);
    assert_eq!(
        parse_latency(&latency),
        vec![LatencyEvent {
            event: "aof-fsync-always".into(),
            latest_ms: 7,
            max_ms: 12
        }]
    );
}

#[test]
fn config_get_reply_gives_the_value() {
    let reply = arr(vec![bulk("appendfsync"), bulk("always")]);
    assert_eq!(parse_config_value(&reply).as_deref(), Some("always"));
    assert_eq!(parse_config_value(&arr(vec![])), None);
}
