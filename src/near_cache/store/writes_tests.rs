//! Which write-through stores its value: the last one queued on one lane, with nothing
//! unordered, invalidated or flushed in between.

use bytes::Bytes;

use super::super::tests::{get, get_variant, heard, key, read};
use super::super::{LaneId, Store};
use crate::protocol::Protocol;

fn lane(addr: &str, protocol: Protocol) -> Option<LaneId> {
    Some(LaneId {
        addr: addr.into(),
        protocol,
    })
}

fn near(addr: &str) -> Option<LaneId> {
    lane(addr, Protocol::Resp2)
}

/// A write-through `token` of `k` begun and queued on `on`.
fn send(store: &Store, k: &Bytes, token: u64, on: Option<LaneId>) {
    store.begin_write(k, Some(token));
    queue(store, k, token, on);
}

/// Queues the write-through `token` (begun already) on `on`, as `Through::send` does.
fn queue(store: &Store, k: &Bytes, token: u64, on: Option<LaneId>) {
    let _order = store.order(k);
    store.sending(k, token);
    store.sent(k, token, on);
}

/// The `+OK` of write-through `token`, which wrote `value`: whether its value was stored.
fn ok(store: &Store, k: &Bytes, token: u64, value: &str, now: u64) -> bool {
    let reply = format!("${}\r\n{value}\r\n", value.len());
    let variant = get_variant(&reply, 10_000, &heard(now));
    store.end_through(k, token, variant, now).stored
}

fn value(store: &Store, k: &str, now: u64) -> Option<String> {
    get(store, k, now).map(|r| String::from_utf8_lossy(&r).into_owned())
}

#[test]
fn a_write_through_alone_stores_its_value_and_keeps_it_when_it_ends() {
    let store = Store::new(1 << 20);
    let k = key("k");
    send(&store, &k, 1, near("n:1"));
    assert!(ok(&store, &k, 1, "one", 10));
    assert!(!store.end_write(&k, Some(1), 10));
    assert_eq!(value(&store, "k", 20).as_deref(), Some("$3\r\none\r\n"));
}

#[test]
fn of_two_overlapping_writes_the_later_ones_value_is_served_never_the_earlier() {
    let store = Store::new(1 << 20);
    let k = key("k");
    // Queued 1 then 2 on one lane: the node runs and answers them in that order.
    send(&store, &k, 1, near("n:1"));
    send(&store, &k, 2, near("n:1"));
    assert!(
        !ok(&store, &k, 1, "old", 10),
        "the earlier one stores nothing"
    );
    assert_eq!(value(&store, "k", 10), None);
    store.end_write(&k, Some(1), 10);
    assert!(ok(&store, &k, 2, "new", 10));
    store.end_write(&k, Some(2), 10);
    assert_eq!(value(&store, "k", 20).as_deref(), Some("$3\r\nnew\r\n"));

    // Begun in one order, queued in the other: the last queued (3) is the one.
    store.begin_write(&k, Some(4));
    store.begin_write(&k, Some(3));
    queue(&store, &k, 4, near("n:1"));
    queue(&store, &k, 3, near("n:1"));
    assert!(!ok(&store, &k, 4, "four", 20));
    assert!(ok(&store, &k, 3, "three", 20));
    // The earlier write's end, handled after the later one stored: it ran first (same lane,
    // its own first attempt), so the later value stays.
    assert!(!store.end_write(&k, Some(4), 20));
    let idle = read(&store, "k", 20, true);
    assert_eq!(idle.as_deref(), Some(&b"$5\r\nthree\r\n"[..]));
    store.end_write(&k, Some(3), 20);
    assert_eq!(value(&store, "k", 20).as_deref(), Some("$5\r\nthree\r\n"));
    // Both end before the later one's store is handled: the same.
    send(&store, &k, 5, near("n:1"));
    send(&store, &k, 6, near("n:1"));
    assert!(!ok(&store, &k, 5, "five", 20));
    store.end_write(&k, Some(5), 20);
    assert_eq!(value(&store, "k", 20), None, "never the earlier's value");
    assert!(ok(&store, &k, 6, "six", 20));
    store.end_write(&k, Some(6), 20);
    assert_eq!(value(&store, "k", 20).as_deref(), Some("$3\r\nsix\r\n"));
    store.forget(&k, 20);
    assert_eq!(store.usage(), (0, 0), "nothing left behind");
}

#[test]
fn an_invalidation_or_a_flush_between_send_and_reply_stores_nothing() {
    let store = Store::new(1 << 20);
    let k = key("k");
    send(&store, &k, 1, near("n:1"));
    store.forget(&k, 10);
    assert!(!ok(&store, &k, 1, "a", 10));
    store.end_write(&k, Some(1), 10);
    assert_eq!(value(&store, "k", 10), None);
    // Read between registering and queueing (the write may have run already).
    store.begin_write(&k, Some(2));
    {
        let _order = store.order(&k);
        store.sending(&k, 2);
        store.forget(&k, 10);
        store.sent(&k, 2, near("n:1"));
    }
    assert!(!ok(&store, &k, 2, "b", 10));
    store.end_write(&k, Some(2), 10);
    // Two in flight, an invalidation before the later one's reply.
    send(&store, &k, 3, near("n:1"));
    send(&store, &k, 4, near("n:1"));
    store.clear();
    assert!(!ok(&store, &k, 3, "c", 10) && !ok(&store, &k, 4, "d", 10));
    store.end_write(&k, Some(3), 10);
    store.end_write(&k, Some(4), 10);
    assert_eq!(value(&store, "k", 10), None);
    assert_eq!(store.usage(), (0, 0), "nothing left behind");
}

#[test]
fn an_unordered_write_overlapping_a_write_through_keeps_it_out() {
    let store = Store::new(1 << 20);
    let k = key("k");
    // In flight when the write-through is queued (a DEL, an MSET split, another connection).
    store.begin_write(&k, None);
    send(&store, &k, 1, near("n:1"));
    store.end_write(&k, None, 10);
    assert!(!ok(&store, &k, 1, "a", 10));
    store.end_write(&k, Some(1), 10);
    // Begun after it was queued, answered before its reply.
    send(&store, &k, 2, near("n:1"));
    store.begin_write(&k, None);
    store.end_write(&k, None, 10);
    assert!(!ok(&store, &k, 2, "b", 10));
    store.end_write(&k, Some(2), 10);
    // A write-through that went the usual way after all.
    send(&store, &k, 3, near("n:1"));
    store.begin_write(&k, Some(4));
    store.unsent(&k, 4);
    assert!(!ok(&store, &k, 3, "c", 10));
    store.end_write(&k, Some(3), 10);
    store.end_write(&k, Some(4), 10);
    // Not queued now (no slot owner): unordered.
    send(&store, &k, 5, None);
    assert!(!ok(&store, &k, 5, "e", 10));
    store.end_write(&k, Some(5), 10);
    assert_eq!(value(&store, "k", 10), None);
    // Once they are all done, a write-through alone stores again.
    send(&store, &k, 6, near("n:1"));
    assert!(ok(&store, &k, 6, "f", 10));
    store.end_write(&k, Some(6), 10);
    assert!(value(&store, "k", 10).is_some());
}

#[test]
fn write_throughs_of_a_key_on_different_lanes_have_no_order_and_store_nothing() {
    let store = Store::new(1 << 20);
    let k = key("k");
    // Another protocol's near lane, then another node (a new owner): no order between them.
    for other in [lane("n:1", Protocol::Resp3), near("n:2")] {
        send(&store, &k, 1, near("n:1"));
        send(&store, &k, 2, other);
        assert!(!ok(&store, &k, 1, "a", 10));
        assert!(!ok(&store, &k, 2, "b", 10));
        store.end_write(&k, Some(1), 10);
        store.end_write(&k, Some(2), 10);
        assert_eq!(value(&store, "k", 10), None);
    }
    // The first ended before the second was queued: ordered by time.
    send(&store, &k, 3, near("n:1"));
    store.end_write(&k, Some(3), 10);
    send(&store, &k, 4, lane("n:1", Protocol::Resp3));
    assert!(ok(&store, &k, 4, "d", 10));
    store.end_write(&k, Some(4), 10);
    assert!(value(&store, "k", 10).is_some());
}

#[test]
fn an_earlier_write_answered_after_a_retry_keeps_the_later_one_out() {
    let store = Store::new(1 << 20);
    let k = key("k");
    // 1 queued first, redirected and retried: its retry may run after 2.
    send(&store, &k, 1, near("n:1"));
    send(&store, &k, 2, near("n:1"));
    store.answered_out_of_order(&k, 1);
    store.end_write(&k, Some(1), 10);
    assert!(!ok(&store, &k, 2, "b", 10));
    store.end_write(&k, Some(2), 10);
    // Handled after 2 stored: its end drops the value.
    send(&store, &k, 3, near("n:1"));
    send(&store, &k, 4, near("n:1"));
    assert!(ok(&store, &k, 4, "d", 10));
    store.answered_out_of_order(&k, 3);
    assert!(store.end_write(&k, Some(3), 10));
    store.end_write(&k, Some(4), 10);
    assert_eq!(value(&store, "k", 10), None);
}
