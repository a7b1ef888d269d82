//! Turns counters into rates for the status page: once a second it reads each node's request,
//! error and latency-bucket counters and each command's call counter, and keeps the last few
//! samples. Rates are differences between samples, computed here (server side) so every viewer
//! sees the same numbers and the page never parses Prometheus text.
//!
//! Runs on the admin side only: the hot path just bumps the counters it already bumps.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::departed::Departed;
use crate::cluster::ClusterState;
use crate::metrics::{quantile_us, BucketCounts, Metrics};
use crate::upstream::UpstreamMetrics;

/// How often counters are read.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Samples kept: rates use the newest two, latency percentiles the whole span (~5 s), so a quiet
/// second does not blank them.
const KEPT: usize = 6;
/// Commands listed by rate.
const TOP_COMMANDS: usize = 10;
/// Seconds of total command rate kept for the page's sparkline.
const RATE_HISTORY: usize = 120;

/// The recent samples.
#[derive(Default)]
pub(crate) struct Sampler {
    /// The samples kept, oldest first: as many as the latency window needs.
    history: Mutex<VecDeque<CounterSample>>,
    /// Client commands per second, one entry per sample, oldest first.
    rate_history: Mutex<VecDeque<f64>>,
    /// Nodes that left the map recently.
    pub(crate) departed: Departed,
}

/// What one sample read: cumulative counters, whose differences become rates.
struct CounterSample {
    /// When it was taken.
    at: Instant,
    /// Each used node's counters and latency buckets.
    nodes: HashMap<String, NodeSample>,
    /// Calls so far per command (empty with command stats off).
    commands: HashMap<&'static str, u64>,
}

/// One node's cumulative figures at a sample.
#[derive(Clone, Copy)]
struct NodeSample {
    /// Commands sent so far.
    requests: u64,
    /// Failures so far.
    errors: u64,
    /// Latency histogram counts so far.
    buckets: BucketCounts,
}

/// One node's recent rates; `None` until two samples exist (or no replies in the window).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct NodeRates {
    /// Commands sent per second over the window.
    pub(crate) requests_per_s: Option<f64>,
    /// Failures per second over the window.
    pub(crate) errors_per_s: Option<f64>,
    /// Median write-to-reply time over the window, microseconds.
    pub(crate) p50_us: Option<u64>,
    /// 99th percentile over the window, microseconds.
    pub(crate) p99_us: Option<u64>,
}

/// What the status page shows as "live".
#[derive(Debug, Default)]
pub(crate) struct Rates {
    /// Seconds the latency percentiles cover.
    pub(crate) latency_window_s: f64,
    /// By node address.
    pub(crate) nodes: HashMap<String, NodeRates>,
    /// Client commands per second, busiest first (empty when `metrics.command_stats` is off).
    pub(crate) commands: Vec<(&'static str, f64)>,
    /// All client commands per second over the window; `None` until two samples exist.
    pub(crate) commands_per_s: Option<f64>,
}

// === impl Sampler ===

impl Sampler {
    /// Samples every second until `shutdown` fires.
    pub(crate) async fn run(
        self: Arc<Self>,
        cluster: Arc<ClusterState>,
        metrics: Arc<Metrics>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(SAMPLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.sample(&cluster, &metrics),
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Reads the counters of every node in the current map, and every command's.
    pub(crate) fn sample(&self, cluster: &ClusterState, metrics: &Metrics) {
        let mut nodes = HashMap::new();
        if let Some(topology) = cluster.topology() {
            self.departed.observe_map(&topology);
            let upstream = metrics.group::<UpstreamMetrics>();
            // Nodes never used have no series and no sample (their rates are unknown, as
            // before their first sample): a 1,000-node map's idle nodes cost nothing here.
            for addr in topology.addrs() {
                let Some((requests, errors, buckets)) = upstream.sample(addr) else {
                    continue;
                };
                let sample = NodeSample {
                    requests,
                    errors,
                    buckets,
                };
                nodes.insert(addr.to_string(), sample);
            }
        }
        let commands = metrics.command_calls().into_iter().collect();
        self.push(CounterSample {
            at: Instant::now(),
            nodes,
            commands,
        });
    }

    fn push(&self, sample: CounterSample) {
        let mut history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = history.back() {
            let rate = command_rates(previous, &sample, &mut Vec::new());
            let mut rates = self.rate_history.lock().unwrap_or_else(|e| e.into_inner());
            if rates.len() >= RATE_HISTORY {
                rates.pop_front();
            }
            rates.push_back(rate.unwrap_or(0.0));
        }
        if history.len() >= KEPT {
            history.pop_front();
        }
        history.push_back(sample);
    }

    /// Client commands per second over the last two minutes, oldest first.
    pub(crate) fn rate_history(&self) -> Vec<f64> {
        let rates = self.rate_history.lock().unwrap_or_else(|e| e.into_inner());
        rates.iter().copied().collect()
    }

    /// The rates between the kept samples.
    pub(crate) fn rates(&self) -> Rates {
        let history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let (Some(newest), Some(oldest)) = (history.back(), history.front()) else {
            return Rates::default();
        };
        let previous = history.len().checked_sub(2).and_then(|i| history.get(i));
        let mut rates = Rates {
            latency_window_s: newest.at.duration_since(oldest.at).as_secs_f64(),
            ..Rates::default()
        };
        for (addr, now) in &newest.nodes {
            let before = previous.and_then(|p| Some((p.nodes.get(addr)?, secs(p, newest)?)));
            let per_s = |f: fn(&NodeSample) -> u64| {
                before.map(|(b, s)| f(now).saturating_sub(f(b)) as f64 / s)
            };
            let window = delta(&now.buckets, oldest.nodes.get(addr).map(|o| &o.buckets));
            let node = NodeRates {
                requests_per_s: per_s(|n| n.requests),
                errors_per_s: per_s(|n| n.errors),
                p50_us: quantile_us(&window, 0.5),
                p99_us: quantile_us(&window, 0.99),
            };
            rates.nodes.insert(addr.clone(), node);
        }
        if let Some(previous) = previous {
            rates.commands_per_s = command_rates(previous, newest, &mut rates.commands);
        }
        rates
    }
}

/// Seconds from `a` to `b`, if positive.
fn secs(a: &CounterSample, b: &CounterSample) -> Option<f64> {
    let s = b.at.duration_since(a.at).as_secs_f64();
    (s > 0.0).then_some(s)
}

/// Bucket counts gained since `before` (all of them when the node is new).
fn delta(now: &BucketCounts, before: Option<&BucketCounts>) -> BucketCounts {
    let mut out = *now;
    if let Some(before) = before {
        for (o, b) in out.iter_mut().zip(before) {
            *o = o.saturating_sub(*b);
        }
    }
    out
}

/// Fills `out` with the busiest commands' rates; returns the total rate.
fn command_rates(
    previous: &CounterSample,
    newest: &CounterSample,
    out: &mut Vec<(&'static str, f64)>,
) -> Option<f64> {
    let s = secs(previous, newest)?;
    let mut total = 0.0;
    for (name, calls) in &newest.commands {
        let before = previous.commands.get(name).copied().unwrap_or(0);
        let rate = calls.saturating_sub(before) as f64 / s;
        total += rate;
        if rate > 0.0 {
            out.push((name, rate));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    out.truncate(TOP_COMMANDS);
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::LATENCY_BUCKETS;

    /// The bucket a latency of `seconds` is counted in.
    fn bucket_of(seconds: f64) -> usize {
        LATENCY_BUCKETS.partition_point(|&bound| bound < seconds)
    }

    fn sample(at: Instant, requests: u64, fast: u64, slow: u64, gets: u64) -> CounterSample {
        let mut buckets: BucketCounts = [0; LATENCY_BUCKETS.len() + 1];
        buckets[bucket_of(0.0001)] = fast; // about 100µs
        buckets[bucket_of(0.005)] = slow; // about 5ms
        let node = NodeSample {
            requests,
            errors: 0,
            buckets,
        };
        CounterSample {
            at,
            nodes: HashMap::from([("n:1".to_string(), node)]),
            commands: HashMap::from([("get", gets)]),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn rates_are_differences_between_samples() {
        let sampler = Sampler::default();
        assert_eq!(sampler.rates().commands_per_s, None, "no samples yet");
        let t0 = Instant::now();
        sampler.push(sample(t0, 100, 1000, 0, 50));
        let first = sampler.rates();
        assert_eq!(
            first.nodes["n:1"].requests_per_s, None,
            "one sample: no rate"
        );
        sampler.push(sample(t0 + Duration::from_secs(2), 300, 1090, 10, 250));
        let rates = sampler.rates();
        let node = rates.nodes["n:1"];
        assert_eq!(node.requests_per_s, Some(100.0));
        assert_eq!(node.errors_per_s, Some(0.0));
        // The window saw 90 fast and 10 slow replies: the median is fast, p99 slow.
        let near = |shown: Option<u64>, true_us: u64| {
            shown.is_some_and(|us| us.abs_diff(true_us) * 10 <= true_us)
        };
        assert!(near(node.p50_us, 100), "p50 {:?} for 100µs", node.p50_us);
        assert!(near(node.p99_us, 5000), "p99 {:?} for 5ms", node.p99_us);
        assert_eq!(rates.commands, vec![("get", 100.0)]);
        assert_eq!(rates.commands_per_s, Some(100.0));
        assert_eq!(rates.latency_window_s, 2.0);
        assert_eq!(sampler.rate_history(), vec![100.0]);
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_last_samples_are_kept() {
        let sampler = Sampler::default();
        let t0 = Instant::now();
        for i in 0..10u64 {
            sampler.push(sample(t0 + Duration::from_secs(i), i, i, 0, i));
        }
        let rates = sampler.rates();
        assert_eq!(rates.latency_window_s, (KEPT - 1) as f64);
        assert_eq!(rates.nodes["n:1"].requests_per_s, Some(1.0));
    }
}
