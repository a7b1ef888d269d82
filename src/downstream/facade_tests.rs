use bytes::Bytes;

use super::super::facade_reply as reply;
use super::*;
use crate::protocol::{Frame, Limits, Protocol};

fn facade(announce: Option<&str>, tls: bool) -> Arc<Facade> {
    let config = FacadeConfig {
        enabled: true,
        announce: announce.map(str::to_string),
    };
    config
        .check("cluster_facade", ("listen", true))
        .expect("valid");
    Facade::new(&config, tls).expect("enabled")
}

fn local(addr: &str) -> Option<SocketAddr> {
    Some(addr.parse().expect("socket address"))
}

fn frame(bytes: Bytes) -> Frame {
    Frame::from_bytes(bytes, &Limits::default()).expect("one well-formed RESP frame")
}

fn int(n: i64) -> Frame {
    Frame::Integer(n)
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(Bytes::from(s.to_string()))
}

#[test]
fn the_local_address_is_announced_and_ipv4_mapped_addresses_are_unwrapped() {
    let f = facade(None, false);
    let node = f.endpoint(local("10.1.2.3:6380")).expect("endpoint");
    assert_eq!((node.host.as_str(), node.port), ("10.1.2.3", 6380));
    assert_eq!(node.ip, "10.1.2.3");
    assert_eq!(node.hostname, None);
    let mapped = f
        .endpoint(local("[::ffff:10.1.2.3]:6380"))
        .expect("endpoint");
    assert_eq!(mapped.host, "10.1.2.3");
    assert_eq!(mapped.id, node.id, "the id depends on the address only");
    assert!(f.endpoint(None).is_none());
}

#[test]
fn the_id_is_40_hex_digits_stable_and_differs_per_address() {
    let f = facade(None, false);
    let a = f.endpoint(local("127.0.0.1:6380")).expect("endpoint");
    let again = facade(None, false)
        .endpoint(local("127.0.0.1:6380"))
        .expect("endpoint");
    let other = f.endpoint(local("127.0.0.1:6381")).expect("endpoint");
    assert_eq!(a.id.len(), 40);
    assert!(a
        .id
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    assert_eq!(a.id, again.id);
    assert_ne!(a.id, other.id);
}

#[test]
fn an_announce_address_wins_over_the_local_one() {
    let ip = facade(Some("192.0.2.7:7000"), false)
        .endpoint(local("172.17.0.2:6380"))
        .expect("endpoint");
    assert_eq!(
        (ip.host.as_str(), ip.ip.as_str(), ip.port),
        ("192.0.2.7", "192.0.2.7", 7000)
    );
    let name = facade(Some("redcar.svc:7000"), true)
        .endpoint(local("172.17.0.2:6380"))
        .expect("endpoint");
    assert_eq!(name.host, "redcar.svc");
    assert_eq!(name.ip, "172.17.0.2", "SHARDS' ip must be an IP");
    assert_eq!(name.hostname.as_deref(), Some("redcar.svc"));
    let v6 = facade(Some("[2001:db8::1]:7000"), false)
        .endpoint(None)
        .expect("an announce address needs no local one");
    assert_eq!(v6.host, "2001:db8::1");
}

#[test]
fn settings_are_checked_with_the_key_named() {
    let check = |enabled, announce: Option<&str>, configured| {
        FacadeConfig {
            enabled,
            announce: announce.map(str::to_string),
        }
        .check("tls.cluster_facade", ("tls.listen", configured))
    };
    assert_eq!(check(false, None, false), Ok(()));
    assert_eq!(check(true, Some("h:1"), true), Ok(()));
    let no_listener = check(true, None, false).expect_err("no listener");
    assert!(no_listener.contains("`tls.cluster_facade.enabled` needs `tls.listen`"));
    let dangling = check(false, Some("h:1"), true).expect_err("announce while off");
    assert!(dangling.contains("`tls.cluster_facade.announce` is set"));
    for bad in [
        "h",
        "h:0",
        "h:x",
        ":6380",
        "::1:6380",
        "[::1:6380",
        "a b:1",
        "a@b:1",
        "a,b:1",
    ] {
        let err = check(true, Some(bad), true).expect_err(bad);
        assert!(
            err.starts_with("`tls.cluster_facade.announce` is `"),
            "{err}"
        );
    }
}

#[test]
fn only_facade_commands_with_the_right_arity_are_answered() {
    let node = facade(None, false)
        .endpoint(local("127.0.0.1:6380"))
        .expect("endpoint");
    let args = |parts: &[&str]| crate::protocol::Request::from_args(parts);
    let answer =
        |name, parts: &[&str]| node.answer(name, args(parts).args(), || true, Protocol::Resp2);
    for name in ["readonly", "readwrite", "asking"] {
        assert_eq!(answer(name, &[name]).as_deref(), Some(&b"+OK\r\n"[..]));
    }
    assert!(answer("cluster|slots", &["CLUSTER", "SLOTS"]).is_some());
    assert!(answer("cluster|slots", &["CLUSTER", "SLOTS", "x"]).is_none());
    assert!(answer("cluster|keyslot", &["CLUSTER", "KEYSLOT", "k"]).is_none());
    assert!(answer("get", &["GET", "k"]).is_none());
    let mut asked = false;
    node.answer(
        "cluster|myid",
        args(&["CLUSTER", "MYID"]).args(),
        || {
            asked = true;
            true
        },
        Protocol::Resp2,
    );
    assert!(!asked, "readiness is looked up for CLUSTER INFO only");
}

#[test]
fn cluster_slots_is_one_range_owned_by_the_endpoint() {
    let node = facade(None, false)
        .endpoint(local("127.0.0.1:6380"))
        .expect("endpoint");
    let want = Frame::Array(vec![Frame::Array(vec![
        int(0),
        int(16383),
        Frame::Array(vec![
            bulk("127.0.0.1"),
            int(6380),
            bulk(&node.id),
            Frame::Array(vec![]),
        ]),
    ])]);
    assert_eq!(frame(reply::slots(&node, Protocol::Resp2)), want);
}

#[test]
fn cluster_shards_has_redis_7_fields_and_the_tls_port_on_tls() {
    let node = facade(Some("redcar.svc:6390"), true)
        .endpoint(local("10.0.0.9:6390"))
        .expect("endpoint");
    let Frame::Array(shards) = frame(reply::shards(&node, Protocol::Resp2)) else {
        panic!("not an array")
    };
    assert_eq!(shards.len(), 1);
    let want = Frame::Array(vec![
        bulk("slots"),
        Frame::Array(vec![int(0), int(16383)]),
        bulk("nodes"),
        Frame::Array(vec![Frame::Array(vec![
            bulk("id"),
            bulk(&node.id),
            bulk("tls-port"),
            int(6390),
            bulk("ip"),
            bulk("10.0.0.9"),
            bulk("endpoint"),
            bulk("redcar.svc"),
            bulk("hostname"),
            bulk("redcar.svc"),
            bulk("role"),
            bulk("master"),
            bulk("replication-offset"),
            int(0),
            bulk("health"),
            bulk("online"),
        ])]),
    ]);
    assert_eq!(shards[0], want);
    let plain = facade(None, false)
        .endpoint(local("127.0.0.1:6380"))
        .expect("endpoint");
    let text = String::from_utf8_lossy(&reply::shards(&plain, Protocol::Resp2)).into_owned();
    assert!(text.contains("$4\r\nport\r\n:6380\r\n") && !text.contains("hostname"));
}

#[test]
fn cluster_nodes_is_one_myself_master_line() {
    let node = facade(None, false)
        .endpoint(local("127.0.0.1:6380"))
        .expect("endpoint");
    let want = format!(
        "{} 127.0.0.1:6380@16380 myself,master - 0 0 1 connected 0-16383\n",
        node.id
    );
    assert_eq!(frame(reply::nodes(&node, Protocol::Resp2)), bulk(&want));
    let high = facade(Some("h:60000"), false)
        .endpoint(None)
        .expect("endpoint");
    assert!(String::from_utf8_lossy(&reply::nodes(&high, Protocol::Resp2)).contains(" h:60000@0 "));
}

#[test]
fn cluster_info_follows_readiness() {
    let Frame::Bulk(ok) = frame(reply::info(true, Protocol::Resp2)) else {
        panic!("not a bulk string")
    };
    let ok = String::from_utf8_lossy(&ok).into_owned();
    assert!(ok.starts_with("cluster_state:ok\r\n"), "{ok}");
    for line in [
        "cluster_slots_assigned:16384",
        "cluster_slots_ok:16384",
        "cluster_known_nodes:1",
        "cluster_size:1",
    ] {
        assert!(ok.contains(&format!("{line}\r\n")), "{line} missing: {ok}");
    }
    let Frame::Bulk(down) = frame(reply::info(false, Protocol::Resp2)) else {
        panic!("not a bulk string")
    };
    let down = String::from_utf8_lossy(&down).into_owned();
    assert!(down.starts_with("cluster_state:fail\r\n"));
    assert!(
        down.contains("cluster_slots_ok:0\r\n") && down.contains("cluster_slots_fail:16384\r\n")
    );
    assert_eq!(ok.lines().count(), down.lines().count());
}

#[test]
fn cluster_myid_is_the_id() {
    let node = facade(None, false)
        .endpoint(local("127.0.0.1:6380"))
        .expect("endpoint");
    assert_eq!(frame(reply::myid(&node)), bulk(&node.id));
}
