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
        let slot = LATENCY_BUCKETS
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(SLOTS - 1);
        self.inner.buckets[slot].fetch_add(1, Ordering::Relaxed);
        // `as` saturates for out-of-range floats, and NaN becomes 0.
        let ns = (seconds * 1e9) as u64;
        self.inner.sum_ns.fetch_add(ns, Ordering::Relaxed);
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
