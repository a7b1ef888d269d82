//! The fingerprints against what real redis-server 7.0 nodes answered (fixtures captured from a
//! 3+3 cluster: `CLUSTER NODES` and the digest script pipelined, so both saw the same moment).

use super::*;
use crate::protocol::{reply_frame_len, Frame, Limits};

/// The `CLUSTER NODES` text and the script's digest from one fixture.
fn nodes_and_digest(fixture: &[u8]) -> (Bytes, String) {
    let limits = Limits::default();
    let bytes = Bytes::copy_from_slice(fixture);
    let first = reply_frame_len(&bytes, &limits)
        .ok()
        .flatten()
        .expect("a whole first reply");
    let nodes = Frame::from_bytes(bytes.slice(..first), &limits).expect("nodes");
    let digest = Frame::from_bytes(bytes.slice(first..), &limits).expect("digest");
    let text = nodes.as_bytes().expect("bulk").clone();
    let Answer::Print(digest) = Probe::Digest.answer(&digest) else {
        panic!("not a digest: {digest:?}")
    };
    (text, digest)
}

#[test]
fn the_local_digest_is_the_one_redis_computes() {
    for fixture in [
        &include_bytes!("fixtures/redis7-nodes-and-digest-primary.resp")[..],
        &include_bytes!("fixtures/redis7-nodes-and-digest-replica.resp")[..],
    ] {
        let (text, digest) = nodes_and_digest(fixture);
        assert_eq!(local_digest(&text), digest);
    }
}

#[test]
fn the_script_sha_is_the_scripts() {
    assert_eq!(crate::values::sha1_hex(SCRIPT), SCRIPT_SHA);
}

#[test]
fn pings_and_pongs_do_not_change_the_digest_but_everything_else_does() {
    let line = |ping: &str, pong: &str, rest: &str| {
        format!(
            "07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30001@40001 master - {ping} {pong} {rest}\n"
        )
    };
    let base = local_digest(line("0", "1426238316000", "1 connected 0-5460").as_bytes());
    let later =
        local_digest(line("1426238317000", "1426238318232", "1 connected 0-5460").as_bytes());
    assert_eq!(base, later, "volatile fields only");
    for rest in [
        "2 connected 0-5460",
        "1 disconnected 0-5460",
        "1 connected 0-5461",
        "1 connected 0-5460 [5461-<-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]",
    ] {
        let changed = local_digest(line("0", "1426238316000", rest).as_bytes());
        assert_ne!(base, changed, "{rest}");
    }
    let moved = local_digest(
        b"07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.2:30001@40001 master - 0 1 1 connected 0-5460\n",
    );
    assert_ne!(base, moved, "an address");
}

#[test]
fn lines_that_do_not_match_the_pattern_are_hashed_whole() {
    // What Lua's gsub leaves alone: not hex first, a non-number where a number should be, a
    // tab instead of a space.
    for line in [
        "xyz 127.0.0.1:1@2 master - 0 0 1 connected",
        "ab 127.0.0.1:1@2 master - x 0 1 connected",
        "ab 127.0.0.1:1@2 master\t- 0 0 1 connected",
        "ab 127.0.0.1:1@2",
        "",
    ] {
        assert_eq!(volatile(line.as_bytes()), None, "{line:?}");
    }
    let line = b"ab 127.0.0.1:1@2 master - 12 345 1 connected";
    assert_eq!(volatile(line), Some((25, 32)));
    assert_eq!(&line[25..32], b" 12 345");
}

#[test]
fn info_keeps_the_topology_fields_only() {
    let info = b"cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n\
cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:6\r\ncluster_size:3\r\n\
cluster_current_epoch:7\r\ncluster_my_epoch:3\r\ncluster_stats_messages_ping_sent:682\r\n";
    let print = info_print(info).expect("a cluster's info");
    assert_eq!(
        print,
        "cluster_state:ok cluster_slots_assigned:16384 cluster_slots_ok:16384 \
         cluster_slots_pfail:0 cluster_slots_fail:0 cluster_known_nodes:6 cluster_size:3 \
         cluster_current_epoch:7 cluster_my_epoch:3"
    );
    let busier = [&info[..], b"cluster_stats_messages_pong_sent:99\r\n"].concat();
    assert_eq!(info_print(&busier).as_deref(), Some(print.as_str()));
    assert_eq!(info_print(b"redis_version:7.0.15\r\n"), None);
}

#[test]
fn answers_are_read_by_kind() {
    let bulk = |s: &str| Frame::Bulk(Bytes::from(s.to_string()));
    let error = |s: &'static str| Frame::Error(Bytes::from_static(s.as_bytes()));
    assert_eq!(
        Probe::Digest.answer(&error("NOSCRIPT No matching script. Please use EVAL.")),
        Answer::NoScript
    );
    assert!(matches!(
        Probe::Digest.answer(&error(
            "NOPERM this user has no permissions to run the 'evalsha' command"
        )),
        Answer::Refused(_)
    ));
    assert!(matches!(
        Probe::Digest.answer(&bulk("short")),
        Answer::Refused(_)
    ));
    let digest = "f95035829136bd83d2bb5093c3c6c419cefbfa95";
    assert_eq!(
        Probe::Digest.answer(&bulk(digest)),
        Answer::Print(digest.to_string())
    );
    assert!(matches!(
        Probe::Info.answer(&Frame::Integer(1)),
        Answer::Refused(_)
    ));
}

#[test]
fn requests_are_well_formed_commands() {
    let limits = Limits::default();
    for (probe, whole) in [
        (Probe::Digest, false),
        (Probe::Digest, true),
        (Probe::Info, false),
    ] {
        let bytes = probe.request(whole);
        let frame = Frame::from_bytes(bytes.clone(), &limits).expect("one frame");
        assert_eq!(frame.to_bytes(), bytes);
    }
}
