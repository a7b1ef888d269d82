//! A lock-free latency histogram with fixed log-linear buckets that Prometheus can encode and the
//! status page can read back (per-node p50/p99), every percentile within 10 % of the truth.
//!
//! `prometheus_client`'s `Histogram` takes a mutex per observation and offers no way to read its
//! buckets; this one costs three relaxed atomic adds per observation and can be snapshotted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Upper bounds (seconds) of the finite buckets: 10 µs × 2^(k/4) for k = 0..=80, i.e. from 10 µs
/// to 10.49 s, four buckets per doubling. Reported as the geometric middle of its bucket, a
/// percentile is within 2^(1/8) − 1 = 9.05 % of the true value anywhere in that range (the
/// fixed 50 µs … 2.5 s buckets before made 400 µs read as "1.00 ms").
pub(crate) const LATENCY_BUCKETS: [f64; 81] = log_linear_bounds();

/// The first bound and the bounds per doubling of [`LATENCY_BUCKETS`].
const FIRST_BOUND: f64 = 1e-5;
/// Four buckets per doubling: the resolution that keeps every percentile within about 9 %.
const PER_DOUBLING: usize = 4;

/// Computed at compile time from exact powers of two times the four steps of one doubling, so bound
/// `k + 4` is exactly twice bound `k`.
const fn log_linear_bounds() -> [f64; 81] {
    // 2^(j/4) for j = 0..4; each doubling is exact, so the bounds do not drift.
    const STEPS: [f64; PER_DOUBLING] = [
        1.0,
        1.189_207_115_002_721,
        std::f64::consts::SQRT_2,
        1.681_792_830_507_429,
    ];
    let mut bounds = [0.0; 81];
    let mut k = 0;
    let mut octave = FIRST_BOUND;
    while k < bounds.len() {
        bounds[k] = octave * STEPS[k % PER_DOUBLING];
        k += 1;
        if k % PER_DOUBLING == 0 {
            octave *= 2.0;
        }
    }
    bounds
}

/// [`LATENCY_BUCKETS`] in whole nanoseconds, rounded down: a whole number of nanoseconds is at
/// most a bound exactly when it is at most the bound rounded down, so a duration lands in the
/// same bucket either way, found with integer comparisons.
const LATENCY_BOUNDS_NS: [u64; 81] = bounds_ns();

/// Computed at compile time from [`LATENCY_BUCKETS`].
const fn bounds_ns() -> [u64; 81] {
    let mut bounds = [0; 81];
    let mut k = 0;
    while k < bounds.len() {
        // `as` truncates: rounds down for these positive values.
        bounds[k] = (LATENCY_BUCKETS[k] * 1e9) as u64;
        k += 1;
    }
    bounds
}

/// Finite buckets plus the overflow (`+Inf`) bucket.
const SLOTS: usize = LATENCY_BUCKETS.len() + 1;

/// Observations per bucket (not cumulative), in the order of `LATENCY_BUCKETS` then `+Inf`.
pub(crate) type BucketCounts = [u64; SLOTS];

/// A cheap clone shares the counts (like every `prometheus_client` metric).
#[derive(Clone, Debug, Default)]
pub(crate) struct LatencyHistogram {
    inner: Arc<Inner>,
}

/// The counts, shared by every clone.
#[derive(Debug)]
struct Inner {
    /// Observations per bucket (not cumulative); the encoder makes them cumulative.
    buckets: [AtomicU64; SLOTS],
    /// Sum of observations in nanoseconds (an `f64` sum would need a CAS loop).
    sum_ns: AtomicU64,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            buckets: [const { AtomicU64::new(0) }; SLOTS],
            sum_ns: AtomicU64::new(0),
        }
    }
}

// === impl LatencyHistogram ===

impl LatencyHistogram {
    /// Records one observation in seconds (same call as `Histogram::observe`).
    pub(crate) fn observe(&self, seconds: f64) {
        self.inner.buckets[slot_of(seconds)].fetch_add(1, Ordering::Relaxed);
        self.inner
            .sum_ns
            .fetch_add(nanos(seconds), Ordering::Relaxed);
    }

    /// The counts per bucket right now (each bucket read once; not a consistent cut, which
    /// percentiles over a second of traffic do not need).
    pub(crate) fn buckets(&self) -> BucketCounts {
        let mut counts = [0; SLOTS];
        for (count, bucket) in counts.iter_mut().zip(&self.inner.buckets) {
            *count = bucket.load(Ordering::Relaxed);
        }
        counts
    }
}

/// The bucket an observation of `seconds` falls in: the first whose bound holds it (a binary
/// search: seven comparisons). NaN lands in the overflow bucket.
fn slot_of(seconds: f64) -> usize {
    if seconds.is_nan() {
        return SLOTS - 1;
    }
    LATENCY_BUCKETS.partition_point(|&bound| bound < seconds)
}

/// The bucket of an observation of `ns` nanoseconds ([`slot_of`] without floating point).
#[inline]
fn slot_of_ns(ns: u64) -> usize {
    LATENCY_BOUNDS_NS.partition_point(|&bound| bound < ns)
}

/// `seconds` in nanoseconds; `as` saturates for out-of-range floats, and NaN becomes 0.
fn nanos(seconds: f64) -> u64 {
    (seconds * 1e9) as u64
}

/// Observations gathered by one task and added to a shared [`LatencyHistogram`] in one go.
/// Every worker writes the shared histogram's cache lines, so two atomic adds per observation
/// cost more than the observation itself under load; a batch costs one add per bucket it
/// touched, plus one.
#[derive(Debug)]
pub(crate) struct LocalLatency {
    /// Observations per bucket since the last flush.
    buckets: [u64; SLOTS],
    /// Bit `i` set: `buckets[i]` holds something. A flush visits only those buckets: at `-P 1`
    /// a flush carries one or two observations, and walking all 82 buckets would cost more than
    /// the observations themselves.
    touched: u128,
    /// Their sum in nanoseconds.
    sum_ns: u64,
    /// How many.
    count: u64,
}

// Every slot has its bit.
const _: () = assert!(SLOTS <= u128::BITS as usize);

impl Default for LocalLatency {
    fn default() -> LocalLatency {
        LocalLatency {
            buckets: [0; SLOTS],
            touched: 0,
            sum_ns: 0,
            count: 0,
        }
    }
}

impl LocalLatency {
    /// Records one observation of `ns` nanoseconds, in this task only (in the bucket
    /// [`LatencyHistogram::observe`] would put it, with no floating point).
    #[inline]
    pub(crate) fn observe_ns(&mut self, ns: u64) {
        self.observe_ns_times(ns, 1);
    }

    /// Records `times` observations of `ns` nanoseconds each.
    #[inline]
    pub(crate) fn observe_ns_times(&mut self, ns: u64, times: u64) {
        let slot = slot_of_ns(ns);
        self.buckets[slot] += times;
        self.touched |= 1 << slot;
        self.sum_ns = self.sum_ns.saturating_add(ns.saturating_mul(times));
        self.count += times;
    }

    /// Observations not yet added to a shared histogram.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Adds everything gathered so far to `shared` and starts again from nothing.
    pub(crate) fn flush_into(&mut self, shared: &LatencyHistogram) {
        if self.count == 0 {
            return;
        }
        let mut touched = std::mem::take(&mut self.touched);
        while touched != 0 {
            let slot = touched.trailing_zeros() as usize;
            touched &= touched - 1;
            let local = std::mem::take(&mut self.buckets[slot]);
            shared.inner.buckets[slot].fetch_add(local, Ordering::Relaxed);
        }
        shared
            .inner
            .sum_ns
            .fetch_add(self.sum_ns, Ordering::Relaxed);
        self.sum_ns = 0;
        self.count = 0;
    }
}

/// The `q`-quantile (0..=1) of the observations in `counts`, in microseconds: the geometric
/// middle of the bucket it falls in, within 9.05 % of the true value (the first bucket, below
/// 10 µs, reports its bound). `None` when there are no observations; the overflow bucket
/// reports the last finite bound.
pub(crate) fn quantile_us(counts: &BucketCounts, q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64) * q.clamp(0.0, 1.0)).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, count) in counts.iter().enumerate() {
        seen += count;
        if seen >= rank {
            let last = LATENCY_BUCKETS.len() - 1;
            let seconds = match i {
                0 => LATENCY_BUCKETS[0],
                i if i > last => LATENCY_BUCKETS[last],
                i => (LATENCY_BUCKETS[i - 1] * LATENCY_BUCKETS[i]).sqrt(),
            };
            return Some((seconds * 1e6).round() as u64);
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
    use std::time::Duration;

    #[test]
    fn nanoseconds_land_in_the_bucket_their_seconds_do() {
        // Around every bound (a nanosecond either side), across the whole range and past it.
        let mut samples: Vec<u64> = vec![0, 1, 9_999, 10_000, 10_001, u64::MAX];
        for bound in LATENCY_BOUNDS_NS {
            samples.extend([bound - 1, bound, bound + 1, bound + bound / 3]);
        }
        samples.extend((0..200).map(|k| 37u64.pow(k % 7) * (k as u64 + 1)));
        for ns in samples {
            let seconds = Duration::from_nanos(ns).as_secs_f64();
            assert_eq!(slot_of_ns(ns), slot_of(seconds), "{ns} ns");
        }
    }

    #[test]
    fn a_local_batch_adds_up_to_the_same_histogram_as_single_observations() {
        // In nanoseconds locally, in seconds directly.
        let observations: [u64; 6] = [40_000, 100_000, 100_000, 3_000_000, 3_000_000_000, 7];
        let seconds = |ns: u64| Duration::from_nanos(ns).as_secs_f64();
        let direct = LatencyHistogram::default();
        let batched = LatencyHistogram::default();
        let mut local = LocalLatency::default();
        for ns in observations {
            direct.observe(seconds(ns));
            local.observe_ns(ns);
        }
        assert_eq!(
            batched.buckets(),
            [0; SLOTS],
            "nothing shared before the flush"
        );
        assert_eq!(local.count(), 6);
        local.flush_into(&batched);
        assert_eq!(batched.buckets(), direct.buckets());
        assert_eq!(
            batched.inner.sum_ns.load(Ordering::Relaxed),
            3_003_240_007,
            "the exact sum"
        );
        // Flushed means emptied: a second flush adds nothing.
        assert_eq!(local.count(), 0);
        local.flush_into(&batched);
        assert_eq!(batched.buckets(), direct.buckets());
        // Reused after a flush, the first and the overflow bucket included.
        for ns in [1_000, 1_000, 100_000_000_000, u64::MAX] {
            direct.observe(seconds(ns));
            local.observe_ns(ns);
        }
        local.flush_into(&batched);
        assert_eq!(batched.buckets(), direct.buckets());
    }

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = LatencyHistogram::default();
        h.observe(0.000004); // ≤ 10µs
        h.observe(0.00002); // exactly on a bound (10µs × 2): that bucket
        h.observe(20.0); // overflow (> 10.49s)
        h.observe(f64::NAN); // overflow, not a panic
        let counts = h.buckets();
        assert_eq!(counts[0], 1);
        assert_eq!(counts[PER_DOUBLING], 1);
        assert_eq!(counts[SLOTS - 1], 2);
        assert_eq!(counts.iter().sum::<u64>(), 4);
    }

    #[test]
    fn the_bounds_double_every_four_buckets_from_10us_to_10s() {
        assert_eq!(LATENCY_BUCKETS[0], 1e-5);
        assert_eq!(LATENCY_BUCKETS[4], 2e-5);
        assert!((LATENCY_BUCKETS[80] - 10.485_76).abs() < 1e-9);
        for pair in LATENCY_BUCKETS.windows(2) {
            let ratio = pair[1] / pair[0];
            assert!((ratio - 2f64.powf(0.25)).abs() < 1e-9, "{pair:?}");
        }
    }

    /// The promise on the status page: any latency from 10 µs to 10 s is reported within 10 %.
    #[test]
    fn every_quantile_is_within_ten_percent_of_the_true_value() {
        let mut seconds = 1e-5;
        while seconds < 10.0 {
            let mut counts = [0; SLOTS];
            counts[slot_of(seconds)] = 1;
            let shown = quantile_us(&counts, 0.5).expect("one observation") as f64 / 1e6;
            let error = (shown - seconds).abs() / seconds;
            // Rounding to whole microseconds adds up to 0.5 µs at the low end.
            assert!(
                error <= 0.0905 + 0.5e-6 / seconds,
                "{seconds}s shown as {shown}s"
            );
            seconds *= 1.013;
        }
    }

    #[test]
    fn quantiles_are_bucket_middles() {
        let mut counts = [0; SLOTS];
        assert_eq!(quantile_us(&counts, 0.5), None);
        counts[slot_of(0.000_4)] = 90;
        counts[slot_of(0.002)] = 9;
        counts[SLOTS - 1] = 1;
        let p50 = quantile_us(&counts, 0.5).expect("p50");
        assert!((370..=430).contains(&p50), "400µs shown as {p50}µs");
        assert_eq!(quantile_us(&counts, 0.9), Some(p50));
        let p99 = quantile_us(&counts, 0.99).expect("p99");
        assert!((1_850..=2_150).contains(&p99), "2ms shown as {p99}µs");
        assert_eq!(
            quantile_us(&counts, 1.0),
            Some(10_485_760),
            "overflow: last bound"
        );
    }

    #[test]
    fn the_exposition_is_a_cumulative_prometheus_histogram() {
        let mut registry = prometheus_client::registry::Registry::default();
        let h = LatencyHistogram::default();
        registry.register("lat_seconds", "test", h.clone());
        h.observe(0.000015);
        h.observe(0.00003);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        for expected in [
            "# TYPE lat_seconds histogram",
            "lat_seconds_count 2",
            "lat_seconds_bucket{le=\"0.00001\"} 0",
            "lat_seconds_bucket{le=\"0.00002\"} 1",
            "lat_seconds_bucket{le=\"0.00004\"} 2",
            "lat_seconds_bucket{le=\"+Inf\"} 2",
        ] {
            assert!(text.contains(expected), "missing {expected} in:\n{text}");
        }
    }
}
