//! Memory per known node, compared between builds (docs/scale.md, "Memory per known node"): not
//! run by `cargo test` (it takes a minute a round and needs the binaries to compare). Run as
//!
//! ```text
//! BIGMAP_BINS=/tmp/a/redcar,/tmp/b/redcar BIGMAP_ROUNDS=4 \
//!     cargo test --test it known_node_memory_of_builds -- --ignored --nocapture
//! ```
//!
//! Each round, for each binary in turn: one redcar in front of the 1,000-node map (three
//! responder seeds) and one in front of the six real nodes only, started the same way
//! (`refresh_interval: 1s`, `refresh_jitter: 200ms`, two workers), 20 SET + GET through each on
//! keys of the real shards, then VmRSS after 8 s idle. Per known node = (big − small) / 994,
//! of the whole resident set and of its anonymous part (`RssAnon`: the heap and stacks, without
//! the binary's and libraries' pages, which move by a few hundred KiB between two runs of the
//! same binary).

use std::thread;
use std::time::{Duration, Instant};

use crate::bigmap::{anon_kib, keys_in, rss_kib, BigMap, A_SLOTS, B_SLOTS, C_SLOTS};
use crate::redirects::write_config;
use crate::support::{Redcar, RedisServer, RespClient, Value};

/// SET and GET each key through `redcar`, once it answers (a map of only the six real nodes
/// covers a few slots: such a redcar serves them but never reports ready).
fn traffic(redcar: &Redcar, keys: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let answered = || {
        RespClient::connect(redcar.addr())
            .ok()
            .and_then(|mut c| c.cmd(&["SET", &keys[0], &keys[0]]).ok())
            == Some(Value::simple("OK"))
    };
    while !answered() {
        assert!(
            Instant::now() < deadline,
            "redcar never served:\n{}",
            redcar.log()
        );
        thread::sleep(Duration::from_millis(50));
    }
    let mut client = redcar.client();
    for key in keys {
        assert_eq!(client.q(&["SET", key, key]), Value::simple("OK"));
        assert_eq!(client.q(&["GET", key]), Value::bulk(key));
    }
}

#[test]
#[ignore = "a measurement of given builds: BIGMAP_BINS, see the module's doc"]
fn known_node_memory_of_builds() {
    let bins: Vec<std::path::PathBuf> = std::env::var("BIGMAP_BINS")
        .expect("BIGMAP_BINS: comma-separated redcar binaries")
        .split(',')
        .map(Into::into)
        .collect();
    let rounds: usize = std::env::var("BIGMAP_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    let big = BigMap::start();
    let config = write_config("cluster:\n  refresh_interval: 1s\n  refresh_jitter: 200ms\n");
    let args = ["--config", config.path_str()];
    let seeds: Vec<String> = big.real.iter().map(RedisServer::addr).collect();
    let keys = keys_in(&[A_SLOTS[0], A_SLOTS[1], B_SLOTS[0], C_SLOTS[0]], 20);
    for round in 1..=rounds {
        for bin in &bins {
            let mut large = Redcar::spawn_bin(bin, &big.responder.seeds(3), &args);
            large.wait_ready(Duration::from_secs(20));
            let small = Redcar::spawn_bin(bin, &seeds.join(","), &args);
            traffic(&large, &keys);
            traffic(&small, &keys);
            thread::sleep(Duration::from_secs(8));
            let (rss_big, rss_small) = (rss_kib(&large), rss_kib(&small));
            let (anon_big, anon_small) = (anon_kib(&large), anon_kib(&small));
            eprintln!(
                "known-node memory: round {round} {}: RSS {rss_big} KiB with 1,000 nodes, {rss_small} KiB with 6: {:.0} bytes per known node; anonymous {anon_big} and {anon_small} KiB: {:.0} bytes",
                bin.display(),
                (rss_big as f64 - rss_small as f64) * 1024.0 / 994.0,
                (anon_big as f64 - anon_small as f64) * 1024.0 / 994.0
            );
        }
    }
}
