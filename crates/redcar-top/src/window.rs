//! Rates and latencies from scrapes: a [`Snapshot`] of `/metrics`, histogram percentiles, and a
//! [`Window`] between two snapshots (counter deltas become rates, bucket deltas p50/p99).

use std::collections::BTreeMap;
use std::time::Duration;

use super::scrape::Sample;

/// Latency quantiles shown per row.
const P50: f64 = 0.50;
const P99: f64 = 0.99;

/// Cumulative histogram buckets: `(upper bound "le", observations <= le)`, sorted by `le`.
type Buckets = Vec<(f64, f64)>;

/// One scrape of `/metrics`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Snapshot {
    /// Every sample of the exposition, in order.
    pub(crate) samples: Vec<Sample>,
}

impl Snapshot {
    pub(crate) fn new(samples: Vec<Sample>) -> Self {
        Snapshot { samples }
    }

    /// Sum of every series called `name`; `None` if there is none.
    pub(crate) fn sum(&self, name: &str) -> Option<f64> {
        let mut matching = self.samples.iter().filter(|s| s.name == name).peekable();
        matching.peek()?;
        Some(matching.map(|s| s.value).sum())
    }

    /// Series called `name` summed per value of `label` (series without it are ignored).
    pub(crate) fn by(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.name == name) {
            if let Some(key) = s.label(label) {
                *out.entry(key.to_string()).or_insert(0.0) += s.value;
            }
        }
        out
    }

    /// The `{name}_bucket` histogram series grouped by `label`, buckets summed per `le`.
    pub(crate) fn histograms(&self, name: &str, label: &str) -> BTreeMap<String, Buckets> {
        let bucket_name = format!("{name}_bucket");
        let mut out: BTreeMap<String, Buckets> = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.name == bucket_name) {
            let (Some(key), Some(le)) = (s.label(label), s.label("le")) else {
                continue;
            };
            let Ok(le) = le.parse::<f64>() else { continue };
            let buckets = out.entry(key.to_string()).or_default();
            match buckets.iter_mut().find(|(bound, _)| *bound == le) {
                Some((_, count)) => *count += s.value,
                None => buckets.push((le, s.value)),
            }
        }
        for buckets in out.values_mut() {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        out
    }
}

/// The `q` quantile (0..=1) of cumulative `buckets`: the geometric middle of the bucket it falls
/// in, which for redcar's buckets (four per doubling) is within 9.05 % of the true value however
/// the observations lie inside the bucket (a linear interpolation can be off by up to 19 %). The
/// lowest bucket starts at 0 and reports its bound. A quantile in the `+Inf` bucket is reported
/// as the largest finite bound, as Prometheus's `histogram_quantile` does. `None` without
/// observations.
pub(crate) fn percentile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total;
    let mut lower = 0.0_f64;
    for &(le, count) in buckets {
        if count >= rank && count > 0.0 {
            if le.is_infinite() {
                return (lower > 0.0).then_some(lower);
            }
            return Some(if lower > 0.0 && lower < le {
                (lower * le).sqrt()
            } else {
                le
            });
        }
        lower = le;
    }
    None
}

/// Per-bucket `cur - prev`; a bucket that went down means the process restarted, so the current
/// buckets are the delta.
pub(super) fn bucket_delta(cur: &[(f64, f64)], prev: Option<&Buckets>) -> Buckets {
    let Some(prev) = prev else {
        return cur.to_vec();
    };
    let old = |le: f64| prev.iter().find(|(b, _)| *b == le).map_or(0.0, |(_, c)| *c);
    let delta: Buckets = cur.iter().map(|&(le, c)| (le, c - old(le))).collect();
    if delta.iter().any(|(_, d)| *d < 0.0) {
        cur.to_vec()
    } else {
        delta
    }
}

/// `cur - prev` for a counter, treating a decrease as a reset.
pub(super) fn counter_delta(cur: f64, prev: Option<f64>) -> f64 {
    match prev {
        Some(prev) if cur >= prev => cur - prev,
        _ => cur,
    }
}

/// Rates and latencies over one window: between two scrapes, or since start on the first frame.
pub(crate) struct Window<'a> {
    /// The latest scrape.
    cur: &'a Snapshot,
    /// The scrape before it; `None` on the first frame (rates since start).
    prev: Option<&'a Snapshot>,
    /// Seconds the deltas cover; `None` when unknown (first frame without an uptime).
    secs: Option<f64>,
}

impl<'a> Window<'a> {
    /// `prev` and the time between the scrapes; without it (or after a restart, seen as the
    /// uptime going down) the window is "since start", using `redcar_uptime_seconds`.
    pub(crate) fn new(cur: &'a Snapshot, prev: Option<(&'a Snapshot, Duration)>) -> Self {
        let uptime = cur.sum("redcar_uptime_seconds");
        let restarted = |p: &Snapshot| match (p.sum("redcar_uptime_seconds"), uptime) {
            (Some(before), Some(now)) => now < before,
            _ => false,
        };
        match prev.filter(|(p, elapsed)| !restarted(p) && !elapsed.is_zero()) {
            Some((p, elapsed)) => Window {
                cur,
                prev: Some(p),
                secs: Some(elapsed.as_secs_f64()),
            },
            None => Window {
                cur,
                prev: None,
                secs: uptime.filter(|u| *u > 0.0),
            },
        }
    }

    /// Seconds between the two scrapes; `None` when the rates are cumulative since start.
    pub(super) fn interval(&self) -> Option<f64> {
        if self.prev.is_none() {
            None
        } else {
            self.secs
        }
    }

    /// Rate of the sum of every series called `name`.
    pub(crate) fn rate(&self, name: &str) -> Option<f64> {
        let cur = self.cur.sum(name)?;
        let prev = self.prev.and_then(|p| p.sum(name));
        Some(counter_delta(cur, prev) / self.secs?)
    }

    /// The current scrape.
    pub(super) fn current(&self) -> &Snapshot {
        self.cur
    }

    /// Rates of `name` per value of `label`.
    pub(super) fn rates_by(&self, name: &str, label: &str) -> BTreeMap<String, Option<f64>> {
        let prev = self.prev.map(|p| p.by(name, label)).unwrap_or_default();
        self.cur
            .by(name, label)
            .into_iter()
            .map(|(key, cur)| {
                let rate = self
                    .secs
                    .map(|s| counter_delta(cur, prev.get(&key).copied()) / s);
                (key, rate)
            })
            .collect()
    }

    /// p50 and p99 in milliseconds of histogram `name` per value of `label`.
    pub(super) fn latencies_by(&self, name: &str, label: &str) -> BTreeMap<String, Latency> {
        let prev = self
            .prev
            .map(|p| p.histograms(name, label))
            .unwrap_or_default();
        self.cur
            .histograms(name, label)
            .into_iter()
            .map(|(key, cur)| {
                let delta = bucket_delta(&cur, prev.get(&key));
                let ms = |q| percentile(&delta, q).map(|s| s * 1000.0);
                (
                    key,
                    Latency {
                        p50_ms: ms(P50),
                        p99_ms: ms(P99),
                    },
                )
            })
            .collect()
    }
}

/// Two latency quantiles, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Latency {
    /// The median, `None` without observations in the window.
    pub(crate) p50_ms: Option<f64>,
    /// The 99th percentile.
    pub(crate) p99_ms: Option<f64>,
}
