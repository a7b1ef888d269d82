use super::*;

const MAX_SILENCE: u64 = 200;

pub(super) fn key(k: &str) -> Bytes {
    Bytes::copy_from_slice(k.as_bytes())
}

/// A node whose invalidation connection answered a heartbeat sent at `at`.
pub(super) fn heard(at: u64) -> Arc<ProvenAt> {
    let heard = Arc::new(ProvenAt::default());
    heard.answered_for_tests(at);
    heard
}

pub(super) fn get_variant(reply: &str, expires: u64, heard: &Arc<ProvenAt>) -> Variant {
    Variant {
        command: "get",
        protocol: Protocol::Resp2,
        args: Box::new([]),
        reply: Bytes::copy_from_slice(reply.as_bytes()),
        expires,
        heard: heard.clone(),
    }
}

/// Starts a GET fill: `Some(token)` when this read fills, `None` when it may not (or joins).
fn begin(store: &Store, k: &Bytes, token: u64, now: u64) -> Option<u64> {
    match store.begin_fill(k, token, ("get", Protocol::Resp2, &[]), now) {
        Begin::Fill(_) => Some(token),
        Begin::Join(_) | Begin::No => None,
    }
}

pub(super) fn get(store: &Store, k: &str, now: u64) -> Option<Bytes> {
    read(store, k, now, false)
}

/// A GET by a reader with (`idle` false) or without commands in flight.
pub(super) fn read(store: &Store, k: &str, now: u64, idle: bool) -> Option<Bytes> {
    match store.get(
        k.as_bytes(),
        ("get", Protocol::Resp2, &[]),
        now,
        MAX_SILENCE,
        idle,
    ) {
        CacheLookup::Hit(reply) => Some(reply),
        CacheLookup::Miss => None,
    }
}

fn fill(store: &Store, k: &str, token: u64, reply: &str, node: &Arc<ProvenAt>) -> bool {
    let k = key(k);
    assert_eq!(begin(store, &k, token, 10), Some(token));
    store
        .end_fill(&k, token, Some(get_variant(reply, 10_000, node)), 10)
        .stored
}

#[test]
fn a_fill_is_served_until_its_key_is_invalidated() {
    let store = Store::new(1 << 20);
    let node = heard(10);
    assert!(get(&store, "k", 10).is_none());
    assert!(fill(&store, "k", 1, "$1\r\nv\r\n", &node));
    assert_eq!(get(&store, "k", 20).as_deref(), Some(&b"$1\r\nv\r\n"[..]));
    // Another command, or the other protocol, is another read.
    let hget = store.get(b"k", ("hget", Protocol::Resp2, &[]), 20, MAX_SILENCE, true);
    assert!(matches!(hget, CacheLookup::Miss));
    let resp3 = store.get(b"k", ("get", Protocol::Resp3, &[]), 20, MAX_SILENCE, true);
    assert!(matches!(resp3, CacheLookup::Miss));
    assert!(store.forget(b"k", 20));
    assert!(get(&store, "k", 20).is_none());
    assert!(!store.forget(b"k", 20), "nothing left to drop");
}

#[test]
fn an_invalidation_during_a_fill_keeps_its_reply_out() {
    let store = Store::new(1 << 20);
    let node = heard(10);
    let k = key("k");
    assert_eq!(begin(&store, &k, 7, 10), Some(7));
    assert_eq!(begin(&store, &k, 8, 10), None, "one fill at a time");
    // The node changed the key while the read was on its way back.
    store.forget(&k, 10);
    let late = store.end_fill(&k, 7, Some(get_variant("$3\r\nold\r\n", 10_000, &node)), 10);
    assert!(!late.stored);
    assert!(get(&store, "k", 20).is_none());
    assert_eq!(store.usage(), (0, 0), "nothing left behind");
}

#[test]
fn a_write_through_redcar_cancels_fills_and_hits_for_a_while() {
    let store = Store::new(1 << 20);
    let node = heard(10);
    assert!(fill(&store, "k", 1, "$1\r\nv\r\n", &node));
    let k = key("k");
    assert_eq!(begin(&store, &k, 2, 10), Some(2));
    assert!(store.written(&k, 300));
    let cancelled = store.end_fill(&k, 2, Some(get_variant("$1\r\nv\r\n", 10_000, &node)), 20);
    assert!(!cancelled.stored, "the read may have run before the write");
    assert!(get(&store, "k", 100).is_none());
    assert_eq!(begin(&store, &k, 3, 100), None, "no fill while dirty");
    assert_eq!(begin(&store, &k, 4, 300), Some(4), "dirty ends");
}

#[test]
fn entries_end_at_their_ttl_and_when_their_node_goes_silent() {
    let store = Store::new(1 << 20);
    let node = heard(1_000);
    let k = key("k");
    begin(&store, &k, 1, 1_000);
    store.end_fill(&k, 1, Some(get_variant("$1\r\nv\r\n", 1_500, &node)), 1_000);
    assert!(get(&store, "k", 1_100).is_some());
    assert!(
        get(&store, "k", 1_201).is_none(),
        "no PING answered for 201 ms"
    );
    node.answered_for_tests(1_400);
    assert!(get(&store, "k", 1_450).is_some(), "heard again");
    assert!(get(&store, "k", 1_500).is_none(), "expired");
}

#[test]
fn the_least_recently_used_entries_go_first_and_bytes_stay_bounded() {
    // 16 shards of 4 KiB: each entry below costs about 1.2 KiB.
    let store = Store::new(16 * 4096);
    let node = heard(10);
    let value = format!("$1000\r\n{}\r\n", "x".repeat(1000));
    let mut evicted = 0;
    for n in 0..400 {
        let k = key(&format!("k{n}"));
        begin(&store, &k, n, 10);
        evicted += store
            .end_fill(&k, n, Some(get_variant(&value, 10_000, &node)), 10)
            .evicted;
        // Keep k0 in use: it must survive the others.
        assert!(get(&store, "k0", 10).is_some(), "k0 evicted at k{n}");
    }
    let (bytes, entries) = store.usage();
    assert!(bytes <= 16 * 4096, "{bytes} bytes");
    assert!(evicted > 300, "{evicted} evicted");
    assert_eq!(entries + evicted, 400);
    assert_eq!(store.clear(), entries);
    assert_eq!(store.usage(), (0, 0));
}

#[test]
fn a_write_in_flight_blocks_the_key_until_it_is_answered_and_survives_a_flush() {
    let store = Store::new(1 << 20);
    let node = heard(10);
    assert!(fill(&store, "k", 1, "$1\r\nv\r\n", &node));
    let k = key("k");
    assert_eq!(begin(&store, &k, 2, 10), Some(2));
    store.begin_write(&k, None);
    assert_eq!(
        read(&store, "k", 10, true).as_deref(),
        Some(&b"$1\r\nv\r\n"[..]),
        "a reader with nothing in flight may still get the value the write replaces"
    );
    assert_eq!(read(&store, "k", 10, false), None, "the writer may not");
    store.begin_write(&k, None);
    let late = store.end_fill(&k, 2, Some(get_variant("$1\r\nv\r\n", 10_000, &node)), 20);
    assert!(
        !late.stored,
        "a read sent before the write may have run before it"
    );
    assert_eq!(
        begin(&store, &k, 3, 20),
        None,
        "no fill while a write is in flight"
    );
    store.clear();
    assert_eq!(
        begin(&store, &k, 4, 20),
        None,
        "a flush keeps the write's hold"
    );
    assert!(
        !store.end_write(&k, None, 20),
        "the flush dropped it already"
    );
    assert_eq!(
        begin(&store, &k, 5, 20),
        None,
        "one of two writes still in flight"
    );
    store.end_write(&k, None, 20);
    assert_eq!(begin(&store, &k, 6, 20), Some(6), "both answered");
    store.end_fill(&k, 6, None, 20);
    assert_eq!(store.usage(), (0, 0), "nothing left behind");
}

#[test]
fn the_same_read_joins_a_fill_on_its_way_and_hears_its_reply() {
    let store = Store::new(1 << 20);
    let k = key("k");
    let Begin::Fill(tell) = store.begin_fill(&k, 1, ("hget", Protocol::Resp2, &[key("f")]), 10)
    else {
        panic!("the first read fills");
    };
    let Begin::Join(mut waiting) =
        store.begin_fill(&k, 2, ("hget", Protocol::Resp2, &[key("f")]), 10)
    else {
        panic!("the same read joins");
    };
    let other = store.begin_fill(&k, 3, ("hget", Protocol::Resp2, &[key("g")]), 10);
    assert!(matches!(other, Begin::No), "another field reads uncached");
    let resp3 = store.begin_fill(&k, 4, ("hget", Protocol::Resp3, &[key("f")]), 10);
    assert!(
        matches!(resp3, Begin::No),
        "another protocol reads uncached"
    );
    tell.send_replace(Some(key("$1\r\n1\r\n")));
    assert_eq!(
        waiting.borrow_and_update().as_deref(),
        Some(&b"$1\r\n1\r\n"[..])
    );
    assert!(!store.end_fill(&k, 1, None, 10).stored);
    assert_eq!(store.usage(), (0, 0), "nothing left behind");
}

#[test]
fn a_write_ends_by_dropping_what_was_cached_and_an_invalidation_keeps_its_hold() {
    let store = Store::new(1 << 20);
    let node = heard(10);
    assert!(fill(&store, "k", 1, "$1\r\nv\r\n", &node));
    let k = key("k");
    store.begin_write(&k, None);
    assert!(
        store.end_write(&k, None, 10),
        "the old value goes with the reply"
    );
    assert_eq!(read(&store, "k", 10, true), None);
    assert!(fill(&store, "k", 2, "$1\r\nw\r\n", &node));
    store.begin_write(&k, None);
    assert!(store.forget(&k, 10), "an invalidation drops the value");
    assert_eq!(begin(&store, &k, 3, 10), None, "but not the write's hold");
    store.end_write(&k, None, 10);
    assert_eq!(store.usage(), (0, 0), "nothing left behind");
}

#[test]
fn a_stored_write_through_is_dropped_by_a_later_write_and_replaces_other_reads() {
    let store = Store::new(1 << 20);
    let node = heard(10);
    let k = key("k");
    let Begin::Fill(_) = store.begin_fill(&k, 1, ("strlen", Protocol::Resp2, &[]), 10) else {
        panic!("fills");
    };
    let strlen = Variant {
        command: "strlen",
        ..get_variant(":1\r\n", 10_000, &node)
    };
    assert!(store.end_fill(&k, 1, Some(strlen), 10).stored);
    store.begin_write(&k, Some(2));
    store.sending(&k, 2);
    store.sent(
        &k,
        2,
        Some(super::LaneId {
            addr: "n:1".into(),
            protocol: Protocol::Resp2,
        }),
    );
    assert!(
        store
            .end_through(&k, 2, get_variant("$2\r\nab\r\n", 10_000, &node), 10)
            .stored
    );
    store.end_write(&k, Some(2), 10);
    let strlen = store.get(
        b"k",
        ("strlen", Protocol::Resp2, &[]),
        10,
        MAX_SILENCE,
        true,
    );
    assert!(
        matches!(strlen, CacheLookup::Miss),
        "the old STRLEN went with the write"
    );
    assert!(get(&store, "k", 10).is_some());
    store.begin_write(&k, None);
    assert!(store.end_write(&k, None, 10));
    assert_eq!(get(&store, "k", 10), None);
}
