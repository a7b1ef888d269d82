//! Tests for merging fan-out replies.

use std::sync::Arc;

use super::*;

fn ok(addr: &str, bytes: &'static [u8]) -> NodeReply {
    NodeReply {
        addr: Arc::from(addr),
        reply: Ok(Bytes::from_static(bytes)),
    }
}

fn text(reply: Bytes) -> String {
    String::from_utf8_lossy(&reply).into_owned()
}

#[test]
fn dbsize_sums_and_keys_concatenate() {
    let sizes = [
        ok("a:1", b":2\r\n"),
        ok("b:1", b":0\r\n"),
        ok("c:1", b":5\r\n"),
    ];
    assert_eq!(&merge(FanOut::DbSize, "DBSIZE", &sizes)[..], b":7\r\n");
    let keys = [
        ok("a:1", b"*1\r\n$1\r\nx\r\n"),
        ok("b:1", b"*0\r\n"),
        ok("c:1", b"*2\r\n$1\r\ny\r\n$1\r\nz\r\n"),
    ];
    assert_eq!(
        &merge(FanOut::Keys, "KEYS", &keys)[..],
        b"*3\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nz\r\n"
    );
}

#[test]
fn a_failed_node_is_named() {
    let replies = [
        ok("a:1", b":2\r\n"),
        NodeReply {
            addr: Arc::from("b:1"),
            reply: Err("connection refused".to_string()),
        },
    ];
    assert_eq!(
        text(merge(FanOut::DbSize, "DBSIZE", &replies)),
        "-ERR redcar: DBSIZE failed on b:1: connection refused\r\n"
    );
    let flush = [ok("a:1", b"+OK\r\n"), ok("b:1", b"-READONLY no\r\n")];
    assert_eq!(
        text(merge(FanOut::Flush, "FLUSHALL", &flush)),
        "-ERR redcar: FLUSHALL failed on b:1: READONLY no; other primaries may have been flushed\r\n"
    );
    let bad = [ok("a:1", b"+OK\r\n")];
    assert!(text(merge(FanOut::DbSize, "DBSIZE", &bad)).contains("unexpected reply"));
}

#[test]
fn broadcasts_need_every_primary_to_agree() {
    let same = [ok("a:1", b"$2\r\nab\r\n"), ok("b:1", b"$2\r\nab\r\n")];
    assert_eq!(
        &merge(FanOut::ScriptLoad, "SCRIPT LOAD", &same)[..],
        b"$2\r\nab\r\n"
    );
    let differ = [ok("a:1", b"$2\r\nab\r\n"), ok("b:1", b"$2\r\ncd\r\n")];
    let error = text(merge(FanOut::Broadcast, "FUNCTION LOAD", &differ));
    assert!(error.contains("primaries replied differently"), "{error}");
    assert!(error.contains("b:1"), "{error}");
}

#[test]
fn script_exists_is_true_only_where_every_primary_has_it() {
    let replies = [
        ok("a:1", b"*3\r\n:1\r\n:1\r\n:0\r\n"),
        ok("b:1", b"*3\r\n:1\r\n:0\r\n:0\r\n"),
    ];
    assert_eq!(
        &merge(FanOut::ScriptExists, "SCRIPT EXISTS", &replies)[..],
        b"*3\r\n:1\r\n:0\r\n:0\r\n"
    );
}

#[test]
fn scan_replies_get_the_cluster_cursor() {
    let at = ScanCursor {
        shard: 1,
        check: 9,
        node: 0,
    };
    let part = ok("a:1", b"*2\r\n$2\r\n17\r\n*1\r\n$1\r\nk\r\n");
    let expected = at.next(17, 3).expect("fits");
    assert_eq!(
        text(scan_reply(at, 3, &part)),
        format!(
            "*2\r\n${}\r\n{expected}\r\n*1\r\n$1\r\nk\r\n",
            expected.to_string().len()
        )
    );
    let done = ok("a:1", b"*2\r\n$1\r\n0\r\n*0\r\n");
    // Shard 1 done: shard 2 from its start, check 9 → 9 << 10 | 2.
    assert_eq!(text(scan_reply(at, 3, &done)), "*2\r\n$4\r\n9218\r\n*0\r\n");
    let last = ScanCursor { shard: 2, ..at };
    assert_eq!(text(scan_reply(last, 3, &done)), "*2\r\n$1\r\n0\r\n*0\r\n");
    let error = ok("a:1", b"-ERR syntax error\r\n");
    assert_eq!(
        text(scan_reply(at, 3, &error)),
        "-ERR redcar: SCAN failed on a:1: ERR syntax error\r\n"
    );
}
