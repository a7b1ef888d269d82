//! The near cache's write-through (`near_cache.write_through`, on by default for `prefix`
//! rules) on a real cluster: a `SET` through redcar is served to the next readers without a
//! read at the node, and whoever writes the key next (a client straight on the node, another
//! redcar) is heard through the nodes' BCAST registrations, as are writes whose client left before
//! their replies.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::near_cache::calls;
use crate::redirects::{write_config, TempConfig};
use crate::support::resp_client::encode_command;
use crate::support::{Redcar, RedisCluster, RedisServer, RespClient, Value};

const CONFIG: &str = "near_cache:
  enabled: true
  max_silence: 200ms
  keys:
    - prefix: \"nc:\"
";

fn start(cluster: &RedisCluster, yaml: &str) -> (Redcar, TempConfig) {
    let config = write_config(yaml);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    (redcar, config)
}

/// Reads of the key's value at the node: `GET` and the `PTTL` a fill sends with it.
fn reads(node: &RedisServer) -> u64 {
    calls(node, "get") + calls(node, "pttl")
}

/// Polls `GET key` through `redcar` until it returns `want`.
fn until_served(redcar: &Redcar, key: &str, want: &str) {
    let mut c = redcar.client();
    let start = Instant::now();
    while c.q(&["GET", key]) != Value::bulk(want) {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{key} never became {want:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_set_through_redcar_is_served_to_the_next_readers_without_a_read_at_the_node() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster, CONFIG);
    let node = cluster.primary_for_key("nc:w");
    let mut writer = redcar.client();
    let mut reader = redcar.client();
    let before = reads(node);
    for i in 0..50 {
        let value = format!("v{i}");
        assert_eq!(writer.q(&["SET", "nc:w", &value]), Value::simple("OK"));
        assert_eq!(
            writer.q(&["GET", "nc:w"]),
            Value::bulk(&value),
            "the writer, {i}"
        );
        for _ in 0..5 {
            assert_eq!(
                reader.q(&["GET", "nc:w"]),
                Value::bulk(&value),
                "a reader, {i}"
            );
        }
    }
    let read_back = reads(node) - before;
    assert_eq!(read_back, 0, "{read_back} reads reached the node");
    assert!(redcar.metric_sum("redcar_near_cache_hits_total") >= 300.0);
    // The near lanes are named on the node, beside the invalidation connection.
    let Value::Bulk(Some(list)) = node.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST");
    };
    let list = String::from_utf8_lossy(&list);
    assert!(list.contains("name=redcar-near"), "{list}");
    assert!(list.contains("name=redcar-invalidations"), "{list}");

    // A SET with an option the cache does not model is not written through: read back.
    assert_eq!(writer.q(&["SET", "nc:w", "nx", "XX"]), Value::simple("OK"));
    let before = calls(node, "get");
    assert_eq!(reader.q(&["GET", "nc:w"]), Value::bulk("nx"));
    assert_eq!(
        calls(node, "get") - before,
        1,
        "read back from the node once"
    );
}

#[test]
fn a_write_by_anyone_else_after_a_write_through_is_heard() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster, CONFIG);
    let (other, _other_config) = start(&cluster, CONFIG);
    let node = cluster.primary_for_key("nc:shared");
    let mut c = redcar.client();
    let mut d = other.client();
    for i in 0..30 {
        // Written through by redcar, then straight on the node.
        let mine = format!("mine{i}");
        assert_eq!(c.q(&["SET", "nc:shared", &mine]), Value::simple("OK"));
        assert_eq!(c.q(&["GET", "nc:shared"]), Value::bulk(&mine));
        let direct = format!("direct{i}");
        assert_eq!(
            node.cmd(&["SET", "nc:shared", &direct]),
            Value::simple("OK")
        );
        until_served(&redcar, "nc:shared", &direct);
        // Cached by the other redcar, then written through this one.
        until_served(&other, "nc:shared", &direct);
        assert_eq!(d.q(&["GET", "nc:shared"]), Value::bulk(&direct));
        let again = format!("again{i}");
        assert_eq!(c.q(&["SET", "nc:shared", &again]), Value::simple("OK"));
        until_served(&other, "nc:shared", &again);
    }
    assert!(other.metric_sum("redcar_near_cache_invalidations_total") >= 30.0);
}

#[test]
fn a_written_through_key_keeps_its_ttl_and_its_writer_reads_it_back() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster, CONFIG);
    let mut c = redcar.client();
    assert_eq!(
        c.q(&["SET", "nc:ttl", "short", "PX", "300"]),
        Value::simple("OK")
    );
    assert_eq!(c.q(&["GET", "nc:ttl"]), Value::bulk("short"));
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        c.q(&["GET", "nc:ttl"]),
        Value::Bulk(None),
        "expired with the key"
    );
    // Pipelined: each GET sees the SET before it.
    for i in 0..100 {
        let a = format!("a{i}");
        let b = format!("b{i}");
        let replies = c
            .pipeline(&[
                vec!["SET", "nc:p", a.as_str()],
                vec!["GET", "nc:p"],
                vec!["SET", "nc:p", b.as_str()],
                vec!["GET", "nc:p"],
            ])
            .expect("pipeline");
        assert_eq!(replies[1], Value::bulk(&a), "{i}: {replies:?}");
        assert_eq!(replies[3], Value::bulk(&b), "{i}: {replies:?}");
    }
}

#[test]
fn with_write_through_off_a_set_only_drops_the_key() {
    let cluster = RedisCluster::start(3, 0);
    let yaml = format!("{CONFIG}  write_through: false\n");
    let (redcar, _config) = start(&cluster, &yaml);
    let node = cluster.primary_for_key("nc:off");
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "nc:off", "1"]), Value::simple("OK"));
    let before = calls(node, "get");
    assert_eq!(c.q(&["GET", "nc:off"]), Value::bulk("1"));
    assert_eq!(c.q(&["GET", "nc:off"]), Value::bulk("1"));
    assert_eq!(
        calls(node, "get") - before,
        1,
        "read back once, then cached"
    );
    let Value::Bulk(Some(list)) = node.cmd(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST");
    };
    assert!(
        !String::from_utf8_lossy(&list).contains("name=redcar-near"),
        "no near lane"
    );
}

#[test]
fn the_near_lanes_follow_a_new_invalidation_connection_and_writes_are_heard_again() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster, CONFIG);
    let node = cluster.primary_for_key("nc:re");
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "nc:re", "1"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "nc:re"]), Value::bulk("1"));
    let list = node.cli(&["CLIENT", "LIST"]);
    let id = list
        .lines()
        .find(|line| line.contains("name=redcar-invalidations "))
        .and_then(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
        .expect("an invalidation connection")
        .to_string();
    node.cmd(&["CLIENT", "KILL", "ID", &id]);
    // Until it is back (and the near lane re-registered, `CLIENT TRACKING off` then on), reads
    // go to the node; after, a write straight on the node is heard again.
    for round in 0..20 {
        let value = format!("direct{round}");
        assert_eq!(node.cmd(&["SET", "nc:re", &value]), Value::simple("OK"));
        until_served(&redcar, "nc:re", &value);
        std::thread::sleep(Duration::from_millis(50));
    }
    let flushed = redcar.metric_sum("redcar_near_cache_flushes_total");
    assert!(flushed >= 1.0, "the lost connection flushed the cache");
    let list = node.cli(&["CLIENT", "LIST"]);
    assert_eq!(list.matches("name=redcar-near ").count(), 1, "{list}");
    assert_eq!(
        list.matches("name=redcar-invalidations ").count(),
        1,
        "{list}"
    );
    // Served from memory again, and still invalidated by the node.
    let hits = redcar.metric_sum("redcar_near_cache_hits_total");
    for _ in 0..10 {
        assert_eq!(c.q(&["GET", "nc:re"]), Value::bulk("direct19"));
    }
    assert!(redcar.metric_sum("redcar_near_cache_hits_total") >= hits + 9.0);
    assert_eq!(node.cmd(&["SET", "nc:re", "last"]), Value::simple("OK"));
    until_served(&redcar, "nc:re", "last");
}

/// Keeps a node busy for 150 ms, as a slow command does.
const BUSY_SCRIPT: &str = "local function us() local t = redis.call('TIME') \
    return t[1] * 1000000 + t[2] end \
    local start = us() while us() - start < 150000 do end return 1";

/// The node's value of `key` once it has not changed for `quiet`.
fn settled(node: &RedisServer, key: &str, quiet: Duration) -> Value {
    let mut last = node.cmd(&["GET", key]);
    let mut since = Instant::now();
    let start = Instant::now();
    while since.elapsed() < quiet {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{key} kept changing"
        );
        std::thread::sleep(Duration::from_millis(10));
        let now = node.cmd(&["GET", key]);
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    last
}

#[test]
fn writes_whose_client_left_before_their_replies_are_still_heard() {
    // A write through redcar holds its key (no fill, nothing cached kept) until its reply
    // reaches the client. When the client is found gone (its first reply cannot be written),
    // the writes still unanswered end their holds while the node may not have run them yet,
    // and readers fill the key meanwhile. What those fills read early is dropped by the
    // invalidations the writes cause: once the node's value has stood still for longer than
    // the bound (`max_silence`), redcar must serve exactly that value. (Checked to fail when
    // redcar ignores the invalidations of keys.)
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster, CONFIG);
    let node = cluster.primary_for_key("nc:gone");
    assert_eq!(node.cmd(&["SET", "nc:gone", "v"]), Value::simple("OK"));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (addr, stop) = (redcar.addr(), stop.clone());
            std::thread::spawn(move || {
                let mut c = RespClient::connect(addr).expect("a reader connects");
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    assert!(c.q(&["GET", "nc:gone"]).as_bytes().is_some());
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    // Longer than one read of the node's: it runs in pieces, between other clients' commands.
    let batch: Vec<u8> = (0..4000)
        .flat_map(|_| encode_command(&["APPEND", "nc:gone", "x"]))
        .collect();
    for round in 0..12 {
        let start = format!("v{round}");
        assert_eq!(node.cmd(&["SET", "nc:gone", &start]), Value::simple("OK"));
        let mut writer = redcar.client();
        let mut late = redcar.client();
        if round % 2 == 0 {
            // Its read moves it to the near lanes first (a fill or a hit).
            assert!(writer.q(&["GET", "nc:gone"]).as_bytes().is_some());
        }
        // The node busy for a while, so the writes wait there with the fills that follow
        // their client's leaving, in no set order.
        std::thread::scope(|s| {
            s.spawn(|| node.cmd(&["EVAL", BUSY_SCRIPT, "0"]));
            std::thread::sleep(Duration::from_millis(30));
            writer.send_raw(&batch).expect("send the writes");
            // Reset, not closed: redcar's first reply fails and the session ends at once.
            let socket = socket2::SockRef::from(writer.stream());
            socket.set_linger(Some(Duration::ZERO)).expect("SO_LINGER");
            drop(writer);
            // A read while the node is still busy: its fill may run before the writes.
            std::thread::sleep(Duration::from_millis(20));
            late.send(&["GET", "nc:gone"]).expect("send a late read");
        });
        assert!(late
            .read_reply()
            .expect("the late read")
            .as_bytes()
            .is_some());
        let last = settled(node, "nc:gone", Duration::from_millis(400));
        let mut c = redcar.client();
        for read in 0..20 {
            assert_eq!(
                c.q(&["GET", "nc:gone"]),
                last,
                "round {round}, read {read}: a value older than the node's"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().expect("a reader") > 0);
    }
    assert!(redcar.metric_sum("redcar_near_cache_hits_total") > 0.0);
}
