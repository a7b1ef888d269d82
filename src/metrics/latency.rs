//! A lock-free latency histogram with fixed buckets that Prometheus can encode and the status
//! page can read back (per-node p50/p99).
//!
//! `prometheus_client`'s `Histogram` takes a mutex per observation and offers no way to read its
//! buckets; this one costs three relaxed atomic adds per observation and can be snapshotted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bounds (seconds) of the finite buckets: 50µs to 2.5s, dense where a proxy hop lives.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 2.5,
];

/// Finite buckets plus the overflow (`+Inf`) bucket.
const SLOTS: usize = LATENCY_BUCKETS.len() + 1;

/// Observations per bucket (not cumulative), in the order of `LATENCY_BUCKETS` then `+Inf`.
pub type BucketCounts = [u64; SLOTS];

/// A cheap clone shares the counts (like every `prometheus_client` metric).
#[derive(Clone, Debug, Default)]
pub struct LatencyHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    buckets: [AtomicU64; SLOTS],
    /// Sum of observations in nanoseconds (an `f64` sum would need a CAS loop).
    sum_ns: AtomicU64,
}

// === impl LatencyHistogram ===

impl LatencyHistogram {
    /// Records one observation in seconds (same call as `Histogram::observe`).
    pub fn observe(&self, seconds: f64) {
        self.inner.buckets[slot_of(seconds)].fetch_add(1, Ordering::Relaxed);
        self.inner
            .sum_ns
            .fetch_add(nanos(seconds), Ordering::Relaxed);
    }

    /// The counts per bucket right now (each bucket read once; not a consistent cut, which
    /// percentiles over a second of traffic do not need).
    pub fn buckets(&self) -> BucketCounts {
        let mut counts = [0; SLOTS];
        for (count, bucket) in counts.iter_mut().zip(&self.inner.buckets) {
            *count = bucket.load(Ordering::Relaxed);
        }
        counts
    }
}

/// The bucket an observation of `seconds` falls in: the first whose bound holds it.
fn slot_of(seconds: f64) -> usize {
    LATENCY_BUCKETS
        .iter()
        .position(|&bound| seconds <= bound)
        .unwrap_or(SLOTS - 1)
}

/// `seconds` in nanoseconds; `as` saturates for out-of-range floats, and NaN becomes 0.
fn nanos(seconds: f64) -> u64 {
    (seconds * 1e9) as u64
}

/// Observations gathered by one task and added to a shared [`LatencyHistogram`] in one go.
/// Every worker writes the shared histogram's cache lines, so two atomic adds per observation
/// cost more than the observation itself under load; a batch costs one add per bucket it
/// touched, plus one.
#[derive(Debug, Default)]
pub struct LocalLatency {
    buckets: [u64; SLOTS],
    sum_ns: u64,
    count: u64,
}

impl LocalLatency {
    /// Records one observation in seconds, in this task only.
    pub fn observe(&mut self, seconds: f64) {
        self.buckets[slot_of(seconds)] += 1;
        self.sum_ns = self.sum_ns.saturating_add(nanos(seconds));
        self.count += 1;
    }

    /// Observations not yet added to a shared histogram.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds everything gathered so far to `shared` and starts again from nothing.
    pub fn flush_into(&mut self, shared: &LatencyHistogram) {
        if self.count == 0 {
            return;
        }
        for (local, bucket) in self.buckets.iter_mut().zip(&shared.inner.buckets) {
            if *local > 0 {
                bucket.fetch_add(*local, Ordering::Relaxed);
                *local = 0;
            }
        }
        shared
            .inner
            .sum_ns
            .fetch_add(self.sum_ns, Ordering::Relaxed);
        self.sum_ns = 0;
        self.count = 0;
    }
}

/// The `q`-quantile (0..=1) of the observations in `counts`, in microseconds, as the upper bound
/// of the bucket it falls in (the usual bucketed estimate: an upper bound, never an under-
/// statement). `None` when there are no observations; the overflow bucket reports the last
/// finite bound.
pub fn quantile_us(counts: &BucketCounts, q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, count) in counts.iter().enumerate() {
        seen += count;
        if seen >= rank {
            let bound = LATENCY_BUCKETS[i.min(LATENCY_BUCKETS.len() - 1)];
            return Some((bound * 1e6).round() as u64);
        }
    }
    None
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.buckets();
        let buckets: Vec<(f64, u64)> = LATENCY_BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(counts)
            .collect();
        let sum = self.inner.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let count = counts.iter().sum();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_batch_adds_up_to_the_same_histogram_as_single_observations() {
        let observations = [0.00004, 0.0001, 0.0001, 0.003, 3.0];
        let direct = LatencyHistogram::default();
        let batched = LatencyHistogram::default();
        let mut local = LocalLatency::default();
        for seconds in observations {
            direct.observe(seconds);
            local.observe(seconds);
        }
        assert_eq!(
            batched.buckets(),
            [0; SLOTS],
            "nothing shared before the flush"
        );
        assert_eq!(local.count(), 5);
        local.flush_into(&batched);
        assert_eq!(batched.buckets(), direct.buckets());
        assert_eq!(
            batched.inner.sum_ns.load(Ordering::Relaxed),
            direct.inner.sum_ns.load(Ordering::Relaxed)
        );
        // Flushed means emptied: a second flush adds nothing.
        assert_eq!(local.count(), 0);
        local.flush_into(&batched);
        assert_eq!(batched.buckets(), direct.buckets());
    }

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = LatencyHistogram::default();
        h.observe(0.00004); // ≤ 50µs
        h.observe(0.0001); // exactly on a bound: that bucket
        h.observe(3.0); // overflow
        let counts = h.buckets();
        assert_eq!(counts[0], 1);
        assert_eq!(counts[1], 1);
        assert_eq!(counts[SLOTS - 1], 1);
        assert_eq!(counts.iter().sum::<u64>(), 3);
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let mut counts = [0; SLOTS];
        assert_eq!(quantile_us(&counts, 0.5), None);
        counts[1] = 90; // ≤ 100µs
        counts[5] = 9; // ≤ 2.5ms
        counts[SLOTS - 1] = 1; // > 2.5s
        assert_eq!(quantile_us(&counts, 0.5), Some(100));
        assert_eq!(quantile_us(&counts, 0.9), Some(100));
        assert_eq!(quantile_us(&counts, 0.99), Some(2500));
        assert_eq!(
            quantile_us(&counts, 1.0),
            Some(2_500_000),
            "overflow: last bound"
        );
    }

    #[test]
    fn the_exposition_is_a_cumulative_prometheus_histogram() {
        let mut registry = prometheus_client::registry::Registry::default();
        let h = LatencyHistogram::default();
        registry.register("lat_seconds", "test", h.clone());
        h.observe(0.00007);
        h.observe(0.0002);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        for expected in [
            "# TYPE lat_seconds histogram",
            "lat_seconds_count 2",
            "lat_seconds_bucket{le=\"0.0001\"} 1",
            "lat_seconds_bucket{le=\"0.00025\"} 2",
            "lat_seconds_bucket{le=\"+Inf\"} 2",
        ] {
            assert!(text.contains(expected), "missing {expected} in:\n{text}");
        }
    }
}
