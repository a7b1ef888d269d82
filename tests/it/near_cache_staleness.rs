//! The near cache's staleness bound, measured rather than assumed: for [`DURATION`], one writer
//! straight on the cluster's primaries and [`READERS`] readers through redcar (near cache on for
//! the keys) write and read the same [`KEYS`] keys. Every value is a per-key counter that only goes
//! up, so "older" is checkable: a read that began more than `max_silence` + [`MARGIN`] after a
//! write was acknowledged must return that write or a later one. The cache must also have served
//! hits (`redcar_near_cache_hits_total` > 0), or the test proves nothing. And a client that writes
//! through redcar reads its own write back at once, even when the key was cached just before.
//!
//! Needs a redcar that accepts the `near_cache` section; without it both tests fail at once,
//! saying so.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::{write_config, TempConfig};
use crate::support::redcar::redcar_bin;
use crate::support::{Redcar, RedisCluster, Value};

/// How long the writer and the readers run.
const DURATION: Duration = Duration::from_secs(30);
/// `near_cache.max_silence`: the bound, but for [`MARGIN`].
const MAX_SILENCE: Duration = Duration::from_millis(200);
/// Scheduling slack on a loaded 2-core test machine (the promised bound is max_silence + 5 ms on
/// an idle one; bench/nearcache.sh measures that).
const MARGIN: Duration = Duration::from_millis(50);
const KEYS: usize = 20;
const READERS: usize = 4;
/// The writer's pause between writes: each key is written about every KEYS ms, and read many
/// times in between, so the cache has something to serve.
const WRITE_GAP: Duration = Duration::from_millis(1);
const PREFIX: &str = "ncs:";

fn near_cache_config() -> TempConfig {
    let yaml = format!(
        "near_cache:\n  enabled: true\n  max_bytes: 16mb\n  max_ttl: 30s\n  max_silence: {}ms\n  \
         keys:\n    - prefix: \"{PREFIX}\"\n",
        MAX_SILENCE.as_millis()
    );
    let config = write_config(&yaml);
    let out = Command::new(redcar_bin())
        .args(["--listen", "127.0.0.1:1", "--cluster", "127.0.0.1:7000"])
        .args(["--config", config.path_str(), "--check-config"])
        .output()
        .expect("run redcar --check-config");
    assert!(
        out.status.success(),
        "this redcar does not accept the near_cache config (has the near cache landed?):\n{yaml}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    config
}

fn start(cluster: &RedisCluster) -> (Redcar, TempConfig) {
    let config = near_cache_config();
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    (redcar, config)
}

fn counter_of(v: &Value) -> Option<u64> {
    v.as_str()?.parse().ok()
}

#[test]
fn near_cache_serves_no_stale_read_after_the_bound() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("{PREFIX}{i}")).collect();
    // acks[k][n]: when write n of key k (value n) was acknowledged; value 0 is the first.
    let acks: Arc<Vec<Mutex<Vec<Instant>>>> =
        Arc::new((0..KEYS).map(|_| Mutex::new(Vec::new())).collect());
    let mut writers: Vec<_> = keys
        .iter()
        .map(|k| cluster.primary_for_key(k).client())
        .collect();
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(writers[i].q(&["SET", k, "0"]), Value::simple("OK"));
        acks[i].lock().expect("lock").push(Instant::now());
    }

    let bound = MAX_SILENCE + MARGIN;
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    // Reads that broke the bound, described.
    let stale: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut readers = Vec::new();
    for r in 0..READERS {
        let (acks, stop, reads, stale) = (acks.clone(), stop.clone(), reads.clone(), stale.clone());
        let keys = keys.clone();
        let mut c = redcar.client();
        readers.push(thread::spawn(move || {
            let mut i = r;
            while !stop.load(Ordering::Relaxed) {
                i = (i + 1) % KEYS;
                let start = Instant::now();
                let reply = c.q(&["GET", &keys[i]]);
                let got = counter_of(&reply);
                assert!(got.is_some(), "GET {} through redcar: {reply:?}", keys[i]);
                reads.fetch_add(1, Ordering::Relaxed);
                let acks = acks[i].lock().expect("lock");
                let due = acks.partition_point(|a| *a + bound < start);
                if due > 0 && got < Some(due as u64 - 1) {
                    stale.lock().expect("lock").push(format!(
                        "GET {} began {:?} after write {} was acknowledged and returned {got:?}",
                        keys[i],
                        start.duration_since(acks[due - 1]),
                        due - 1
                    ));
                }
            }
        }));
    }

    // The writer: straight on the key's primary, a new value every WRITE_GAP, keys in turn.
    let t0 = Instant::now();
    let mut writes = 0u64;
    let mut next = [1u64; KEYS];
    while t0.elapsed() < DURATION {
        let i = writes as usize % KEYS;
        let v = next[i].to_string();
        assert_eq!(
            writers[i].q(&["SET", &keys[i], &v]),
            Value::simple("OK"),
            "SET {} straight on its primary",
            keys[i]
        );
        acks[i].lock().expect("lock").push(Instant::now());
        next[i] += 1;
        writes += 1;
        thread::sleep(WRITE_GAP);
    }
    // Reads past the bound after the last writes are checked too.
    thread::sleep(bound + Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().expect("reader thread");
    }

    let hits = redcar.metric_sum("redcar_near_cache_hits_total");
    let misses = redcar.metric_sum("redcar_near_cache_misses_total");
    let reads = reads.load(Ordering::Relaxed);
    let stale = stale.lock().expect("lock");
    eprintln!(
        "near cache staleness: {writes} writes, {reads} reads through redcar in {DURATION:?}; \
         hits {hits}, misses {misses}; stale reads after {bound:?}: {}",
        stale.len()
    );
    assert!(
        stale.is_empty(),
        "{} reads through redcar returned a value older than a write acknowledged more than \
         {bound:?} before they began; the first: {:?}",
        stale.len(),
        &stale[..stale.len().min(5)]
    );
    assert!(reads > 0 && writes > 0, "reads {reads}, writes {writes}");
    assert!(
        hits > 0.0,
        "the near cache served no hits (redcar_near_cache_hits_total = {hits}, misses {misses}): \
         the reads all went to the nodes, so this proves nothing about the cache"
    );
}

#[test]
fn near_cache_reads_your_own_writes_through_redcar() {
    let cluster = RedisCluster::start(3, 0);
    let (redcar, _config) = start(&cluster);
    let mut c = redcar.client();
    for i in 0..1000u32 {
        let key = format!("{PREFIX}ryw:{}", i % 20);
        // Read first, so the key is cached when the write goes through.
        c.q(&["GET", &key]);
        let v = i.to_string();
        assert_eq!(c.q(&["SET", &key, &v]), Value::simple("OK"));
        assert_eq!(
            c.q(&["GET", &key]),
            Value::bulk(&v),
            "write {i}: GET {key} right after SET through redcar"
        );
    }
}
