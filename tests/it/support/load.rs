//! A load driver for resilience tests: one writer and some readers talking to redcar as plain
//! clients, recording every acknowledged write, every error (with its time) and every stale read,
//! so a test can check "no client errors" and "no lost acknowledged writes" after a failure.
//!
//! Keys are written once, each with its own value, so any read that returns a different value
//! is wrong (not merely stale), and after the load every acknowledged key must still hold its
//! value. Both loops are paced (about one command per millisecond per thread) so the load never
//! starves the cluster nodes of CPU on a small machine, which could itself cause failovers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::resp_client::{RespClient, Value};

/// Error messages kept per kind for failure messages (all error *times* are kept).
const SAMPLES: usize = 5;
/// Client-side read timeout: far above redcar's op_timeout, so a timeout here means redcar hung.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Keys verified per pipeline after the load.
const VERIFY_BATCH: usize = 200;

/// How the load is shaped.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// redcar's RESP address.
    pub addr: String,
    /// Reader threads.
    pub readers: usize,
    /// Every `focus_every`-th key carries this hash tag (so it lands in the tag's slot); the
    /// others spread over all slots. Use it to put a good share of keys on the shard under test.
    pub focus_tag: Option<String>,
    pub focus_every: u64,
    /// Readers only read keys acknowledged at least this long ago: replicas may lag a little,
    /// and a read that races its own write proves nothing about failures.
    pub read_delay: Duration,
    /// Pause between two commands of one thread.
    pub pace: Duration,
    /// When set, every SET is followed by `WAIT 1 100`, and a write counts as acknowledged only
    /// when WAIT reports at least one replica. Redis replicates asynchronously: a write a primary
    /// acknowledged just before it died may never reach the replica that replaces it, and no
    /// proxy can change that. With WAIT, "acknowledged" means "on two nodes", which is what a
    /// failover can be expected to preserve. The map gives each slot a group (its shard at the
    /// start); each group gets its own connection, because Redis (and redcar) answer WAIT for
    /// every primary the connection wrote to, so one dead shard would otherwise make every
    /// write look unconfirmed.
    pub wait_groups: Option<Arc<Vec<u16>>>,
}

impl LoadOptions {
    pub fn new(addr: impl Into<String>) -> LoadOptions {
        LoadOptions {
            addr: addr.into(),
            readers: 2,
            focus_tag: None,
            focus_every: 2,
            read_delay: Duration::from_millis(200),
            pace: Duration::from_millis(1),
            wait_groups: None,
        }
    }

    pub fn focus(mut self, tag: impl Into<String>) -> LoadOptions {
        self.focus_tag = Some(tag.into());
        self
    }

    pub fn wait_for_replica(mut self, groups: Vec<u16>) -> LoadOptions {
        self.wait_groups = Some(Arc::new(groups));
        self
    }
}

/// One error a client saw, with when it saw it.
#[derive(Clone, Debug)]
pub struct ErrorEvent {
    pub at: Instant,
    pub what: String,
}

/// A key and the value written to it.
#[derive(Clone, Debug)]
pub struct Written {
    pub key: String,
    pub value: String,
    pub at: Instant,
}

/// Shared between the writer and the readers: acknowledged writes in acknowledgement order.
#[derive(Default)]
struct Shared {
    acked: Mutex<Vec<Written>>,
}

#[derive(Default)]
struct ReaderStats {
    ok: u64,
    stale: u64,
    stale_samples: Vec<String>,
    errors: Vec<ErrorEvent>,
    longest_gap: Duration,
}

#[derive(Default)]
struct WriterStats {
    /// SETs answered OK (acknowledged or not by a replica).
    ok: u64,
    ok_times: Vec<(Instant, String)>,
    errors: Vec<ErrorEvent>,
    /// SET answered OK but WAIT saw no replica (or failed): not counted as acknowledged.
    unconfirmed: Vec<Written>,
}

/// Running load; [`stop`](Load::stop) ends it and returns the report.
pub struct Load {
    started: Instant,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    writer: JoinHandle<WriterStats>,
    readers: Vec<JoinHandle<ReaderStats>>,
}

impl Load {
    pub fn start(options: LoadOptions) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared::default());
        let started = Instant::now();
        let writer = {
            let (o, stop, shared) = (options.clone(), stop.clone(), shared.clone());
            thread::spawn(move || write_loop(&o, &stop, &shared))
        };
        let readers = (0..options.readers)
            .map(|n| {
                let (o, stop, shared) = (options.clone(), stop.clone(), shared.clone());
                thread::spawn(move || read_loop(&o, &stop, &shared, n as u64))
            })
            .collect();
        Load {
            started,
            stop,
            shared,
            writer,
            readers,
        }
    }

    /// Acknowledged writes so far.
    pub fn acked(&self) -> usize {
        self.shared.acked.lock().map(|a| a.len()).unwrap_or(0)
    }

    /// Keys acknowledged so far (for picking keys to migrate, say).
    pub fn acked_keys(&self) -> Vec<String> {
        self.shared
            .acked
            .lock()
            .map(|a| a.iter().map(|w| w.key.clone()).collect())
            .unwrap_or_default()
    }

    /// Stops all threads and gathers what they saw.
    pub fn stop(self) -> LoadReport {
        self.stop.store(true, Ordering::SeqCst);
        let stopped = Instant::now();
        let w = self.writer.join().expect("writer thread panicked");
        let mut report = LoadReport {
            started: self.started,
            stopped,
            reads_ok: 0,
            read_errors: Vec::new(),
            stale_reads: 0,
            stale_samples: Vec::new(),
            longest_read_gap: Duration::ZERO,
            writes_ok: w.ok,
            write_ok_times: w.ok_times,
            write_errors: w.errors,
            acked: std::mem::take(&mut *self.shared.acked.lock().expect("acked lock")),
            unconfirmed: w.unconfirmed,
        };
        for r in self.readers {
            let r = r.join().expect("reader thread panicked");
            report.reads_ok += r.ok;
            report.read_errors.extend(r.errors);
            report.stale_reads += r.stale;
            report.stale_samples.extend(r.stale_samples);
            report.longest_read_gap = report.longest_read_gap.max(r.longest_gap);
        }
        report.read_errors.sort_by_key(|e| e.at);
        report.stale_samples.truncate(SAMPLES);
        report
    }
}

/// What the load saw.
pub struct LoadReport {
    pub started: Instant,
    pub stopped: Instant,
    /// GETs that returned the acknowledged value.
    pub reads_ok: u64,
    /// Error replies, dropped connections, timeouts and wrong values, in time order.
    pub read_errors: Vec<ErrorEvent>,
    /// GETs that returned nil for an acknowledged key (a replica behind, or restarted empty).
    pub stale_reads: u64,
    pub stale_samples: Vec<String>,
    /// The longest time any reader went without an answer that was not an error (a value or
    /// nil), including from its last answer to the end of the load.
    pub longest_read_gap: Duration,
    pub writes_ok: u64,
    /// When each SET was answered OK, and its key.
    pub write_ok_times: Vec<(Instant, String)>,
    pub write_errors: Vec<ErrorEvent>,
    /// Acknowledged writes (with `wait_groups`: confirmed by WAIT on a replica).
    pub acked: Vec<Written>,
    /// With `wait_groups`: SET OK, but WAIT did not confirm a replica.
    pub unconfirmed: Vec<Written>,
}

impl LoadReport {
    /// All errors, reads and writes, in time order.
    pub fn errors(&self) -> Vec<&ErrorEvent> {
        let mut all: Vec<&ErrorEvent> = self.read_errors.iter().chain(&self.write_errors).collect();
        all.sort_by_key(|e| e.at);
        all
    }

    /// First and last error, if any.
    pub fn error_span(&self) -> Option<(Instant, Instant)> {
        let all = self.errors();
        Some((all.first()?.at, all.last()?.at))
    }

    /// First and last error as milliseconds after `since` (negative: before it).
    pub fn error_span_ms(&self, since: Instant) -> Option<(i64, i64)> {
        let (a, b) = self.error_span()?;
        Some((ms_after(since, a), ms_after(since, b)))
    }

    /// The first few error messages of each kind, with their times after `since`.
    pub fn error_samples(&self, since: Instant) -> String {
        let show = |name: &str, errors: &[ErrorEvent]| {
            let lines: Vec<String> = errors
                .iter()
                .take(SAMPLES)
                .map(|e| format!("    {:+}ms {}", ms_after(since, e.at), e.what))
                .collect();
            format!("  {name} ({}):\n{}", errors.len(), lines.join("\n"))
        };
        format!(
            "{}\n{}\n  stale samples: {:?}",
            show("read errors", &self.read_errors),
            show("write errors", &self.write_errors),
            self.stale_samples
        )
    }

    /// Errors per `bucket` from `since` on (reads/writes), and each kind of error message with
    /// its count (keys and numbers blanked), for diagnosing what failed when.
    pub fn error_timeline(&self, since: Instant, bucket: Duration) -> String {
        let mut buckets: std::collections::BTreeMap<i64, (u64, u64)> = Default::default();
        let step = i64::try_from(bucket.as_millis()).unwrap_or(1).max(1);
        for (errors, write) in [(&self.read_errors, false), (&self.write_errors, true)] {
            for e in errors {
                let b = buckets
                    .entry(ms_after(since, e.at).div_euclid(step) * step)
                    .or_default();
                if write {
                    b.1 += 1;
                } else {
                    b.0 += 1;
                }
            }
        }
        let mut kinds: std::collections::BTreeMap<String, u64> = Default::default();
        for e in self.errors() {
            *kinds.entry(error_kind(&e.what)).or_default() += 1;
        }
        let buckets: Vec<String> = buckets
            .iter()
            .map(|(at, (r, w))| format!("{at:+}ms: {r} read / {w} write"))
            .collect();
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n:6} x {k}")).collect();
        format!(
            "  errors per {step}ms:\n    {}\n  kinds:\n    {}",
            buckets.join("\n    "),
            kinds.join("\n    ")
        )
    }

    /// One summary line for the test output.
    pub fn summary(&self, scenario: &str, lost: usize, window: &str) -> String {
        format!(
            "RESILIENCE {scenario}: reads_ok={} read_errors={} writes_ok={} write_errors={} \
             acked={} unconfirmed={} stale_reads={} longest_read_gap_ms={} lost_writes={lost} \
             error_window={window} load_ms={}",
            self.reads_ok,
            self.read_errors.len(),
            self.writes_ok,
            self.write_errors.len(),
            self.acked.len(),
            self.unconfirmed.len(),
            self.stale_reads,
            self.longest_read_gap.as_millis(),
            self.stopped.duration_since(self.started).as_millis(),
        )
    }
}

/// An error message with its key and numbers blanked, so alike errors count together.
fn error_kind(what: &str) -> String {
    let mut words = what.split(' ');
    let command = words.next().unwrap_or_default();
    let _key = words.next();
    let mut rest = String::new();
    for c in words.collect::<Vec<_>>().join(" ").chars() {
        if !c.is_ascii_digit() {
            rest.push(c);
        } else if !rest.ends_with('N') {
            rest.push('N');
        }
    }
    format!("{command} <key> {rest}")
}

/// Milliseconds from `since` to `t`, negative when `t` is earlier.
pub fn ms_after(since: Instant, t: Instant) -> i64 {
    match t.checked_duration_since(since) {
        Some(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        None => -i64::try_from(since.duration_since(t).as_millis()).unwrap_or(i64::MAX),
    }
}

/// Reads every written key through `addr` (pipelined) and returns those that do not hold
/// their value: `(key, expected, what was read)`.
pub fn verify(addr: &str, written: &[Written]) -> Vec<(String, String, String)> {
    let mut client = connect(addr).expect("connect for verification");
    let mut lost = Vec::new();
    for batch in written.chunks(VERIFY_BATCH) {
        let cmds: Vec<Vec<&str>> = batch.iter().map(|w| vec!["GET", w.key.as_str()]).collect();
        let replies = client.pipeline(&cmds).expect("verification pipeline");
        for (w, reply) in batch.iter().zip(replies) {
            if reply.as_str() != Some(w.value.as_str()) {
                lost.push((w.key.clone(), w.value.clone(), format!("{reply:?}")));
            }
        }
    }
    lost
}

fn connect(addr: &str) -> std::io::Result<RespClient> {
    let c = RespClient::connect(addr)?;
    c.set_timeout(CLIENT_TIMEOUT)?;
    Ok(c)
}

/// The `n`-th key: focus keys carry the tag, the rest spread over all slots.
fn key_for(options: &LoadOptions, n: u64) -> String {
    match &options.focus_tag {
        Some(tag) if n.is_multiple_of(options.focus_every.max(1)) => format!("{{{tag}}}:w{n}"),
        _ => format!("load:w{n}"),
    }
}

fn push_error(errors: &mut Vec<ErrorEvent>, what: String) {
    errors.push(ErrorEvent {
        at: Instant::now(),
        what,
    });
}

fn write_loop(options: &LoadOptions, stop: &AtomicBool, shared: &Shared) -> WriterStats {
    let mut stats = WriterStats::default();
    // One connection per WAIT group (a single group 0 without WAIT).
    let mut conns: HashMap<u16, RespClient> = HashMap::new();
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let key = key_for(options, n);
        let value = format!("v{n}");
        n += 1;
        let group = match &options.wait_groups {
            Some(groups) => groups[usize::from(redcar::cluster::key_slot(key.as_bytes()))],
            None => 0,
        };
        let client = match conns.get_mut(&group) {
            Some(c) => c,
            None => match connect(&options.addr) {
                Ok(c) => conns.entry(group).or_insert(c),
                Err(e) => {
                    push_error(&mut stats.errors, format!("connect: {e}"));
                    thread::sleep(options.pace.max(Duration::from_millis(10)));
                    continue;
                }
            },
        };
        match client.cmd(&["SET", key.as_str(), value.as_str()]) {
            Ok(Value::Simple(s)) if s == "OK" => {
                let now = Instant::now();
                stats.ok += 1;
                stats.ok_times.push((now, key.clone()));
                let written = Written {
                    key,
                    value,
                    at: now,
                };
                if options.wait_groups.is_none() {
                    shared.acked.lock().expect("acked lock").push(written);
                } else {
                    match client.cmd(&["WAIT", "1", "100"]) {
                        Ok(Value::Int(r)) if r >= 1 => {
                            let written = Written {
                                at: Instant::now(),
                                ..written
                            };
                            shared.acked.lock().expect("acked lock").push(written);
                        }
                        Ok(Value::Int(_)) => stats.unconfirmed.push(written),
                        Ok(other) => {
                            push_error(
                                &mut stats.errors,
                                format!("WAIT {}: {other:?}", written.key),
                            );
                            stats.unconfirmed.push(written);
                        }
                        Err(e) => {
                            push_error(&mut stats.errors, format!("WAIT {}: io: {e}", written.key));
                            stats.unconfirmed.push(written);
                            conns.remove(&group);
                        }
                    }
                }
            }
            Ok(other) => push_error(&mut stats.errors, format!("SET {key}: {other:?}")),
            Err(e) => {
                // The write's fate is unknown: it is neither acknowledged nor counted as lost.
                push_error(&mut stats.errors, format!("SET {key}: io: {e}"));
                conns.remove(&group);
            }
        }
        thread::sleep(options.pace);
    }
    stats
}

fn read_loop(options: &LoadOptions, stop: &AtomicBool, shared: &Shared, seed: u64) -> ReaderStats {
    let mut stats = ReaderStats::default();
    let mut client: Option<RespClient> = None;
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut last_answer: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        thread::sleep(options.pace);
        // A random key acknowledged at least `read_delay` ago (the list is in ack order).
        let target = {
            let acked = shared.acked.lock().expect("acked lock");
            let cutoff = Instant::now().checked_sub(options.read_delay);
            let eligible = match cutoff {
                Some(cutoff) => acked.partition_point(|w| w.at <= cutoff),
                None => 0,
            };
            if eligible == 0 {
                None
            } else {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let w = &acked[(rng % eligible as u64) as usize];
                Some((w.key.clone(), w.value.clone()))
            }
        };
        let Some((key, value)) = target else {
            continue;
        };
        if client.is_none() {
            match connect(&options.addr) {
                Ok(c) => client = Some(c),
                Err(e) => {
                    push_error(&mut stats.errors, format!("connect: {e}"));
                    continue;
                }
            }
        }
        let Some(c) = client.as_mut() else {
            continue;
        };
        let answered = match c.cmd(&["GET", key.as_str()]) {
            Ok(Value::Bulk(Some(got))) if got == value.as_bytes() => {
                stats.ok += 1;
                true
            }
            Ok(Value::Bulk(None)) => {
                stats.stale += 1;
                if stats.stale_samples.len() < SAMPLES {
                    stats.stale_samples.push(key);
                }
                true
            }
            Ok(other) => {
                push_error(&mut stats.errors, format!("GET {key}: {other:?}"));
                false
            }
            Err(e) => {
                push_error(&mut stats.errors, format!("GET {key}: io: {e}"));
                client = None;
                false
            }
        };
        if answered {
            let now = Instant::now();
            if let Some(last) = last_answer {
                stats.longest_gap = stats.longest_gap.max(now - last);
            }
            last_answer = Some(now);
        }
    }
    if let Some(last) = last_answer {
        stats.longest_gap = stats.longest_gap.max(last.elapsed());
    }
    stats
}
