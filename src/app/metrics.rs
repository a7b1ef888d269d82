//! The series about the process itself, produced by `app`: uptime and config reloads; and
//! every group, added to the hub at start-up.
//!
//! Series names here are given without the `redcar_` prefix the registry adds; the full names and
//! their meaning are in docs/observability.md, and tests/surface/ holds the committed list that a
//! change must update on purpose. The group order in `add_groups` is the order of the exposition,
//! which those committed copies also pin.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use crate::admin::ReadinessGauges;
use crate::auth::TenantMetrics;
use crate::cluster::TopologyMetrics;
use crate::downstream::{ClientMetrics, PubsubMetrics, TrackingMetrics};
use crate::metrics::{MetricGroup, Metrics, MetricsConfig, Totals};
use crate::near_cache::NearCacheMetrics;
use crate::router::{MirrorMetrics, RouterMetrics};
use crate::upstream::UpstreamMetrics;

/// The `result` label of `redcar_config_reloads_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    /// `ok` or `error`; both are created at registration so each starts at 0.
    result: &'static str,
}

/// Uptime (set when scraped) and the config in effect.
pub(crate) struct ProcessMetrics {
    /// When the group was made, i.e. at start-up: the zero of the uptime gauge.
    started: Instant,
    /// Seconds since start, refreshed in `before_encode` so it costs nothing between scrapes.
    uptime: Gauge<f64, AtomicU64>,
    /// Config reloads (SIGHUP), by result (`ok`, `error`).
    config_reloads: Family<ResultLabel, Counter>,
    /// Unix time of the last config that was loaded and applied (start-up or reload).
    config_loaded_at: Gauge<f64, AtomicU64>,
    /// Upgrades in place since the first start (0 for a process started by hand).
    generation: Gauge,
    /// This process's pid, and the old one's while it hands its clients over (else 0).
    pid: Gauge,
    /// The old process's pid while it hands clients over to this one; 0 otherwise.
    old_pid: Gauge,
}

impl Default for ProcessMetrics {
    /// Starts the uptime clock, and counts the config in hand as loaded now (the group is added
    /// at start-up, with the first config).
    fn default() -> ProcessMetrics {
        let process = ProcessMetrics {
            started: Instant::now(),
            uptime: Gauge::default(),
            config_reloads: Family::default(),
            config_loaded_at: Gauge::default(),
            generation: Gauge::default(),
            pid: Gauge::default(),
            old_pid: Gauge::default(),
        };
        process.config_loaded_at.set(unix_now());
        process.pid.set(i64::from(std::process::id()));
        process
    }
}

impl MetricGroup for ProcessMetrics {
    /// Registers the series; both reload results start at 0, so the dashboard and the
    /// `RedcarConfigReloadFailed` rule see the first refused reload.
    fn register(&self, r: &mut Registry) {
        for result in ["ok", "error"] {
            self.config_reloads
                .get_or_create_owned(&ResultLabel { result });
        }
        r.register("uptime_seconds", "Seconds since start", self.uptime.clone());
        r.register(
            "config_reloads",
            "Config reloads (SIGHUP), by result (ok, error)",
            self.config_reloads.clone(),
        );
        r.register(
            "config_last_reload_success_timestamp_seconds",
            "Unix time the config in effect was loaded (start-up or the last good reload)",
            self.config_loaded_at.clone(),
        );
        self.register_process(r);
    }

    /// Brings the uptime gauge up to date.
    fn before_encode(&self) {
        self.uptime.set(self.started.elapsed().as_secs_f64());
    }

    /// Feeds the admin status page and `redcar top`, which read totals rather than the series.
    fn add_totals(&self, totals: &mut Totals) {
        totals.uptime = self.started.elapsed();
        totals.pid = std::process::id();
        totals.generation = u64::try_from(self.generation.get()).unwrap_or(0);
        totals.old_pid = u32::try_from(self.old_pid.get()).unwrap_or(0);
    }
}

impl ProcessMetrics {
    /// The restart generation and the pids (upgrades in place).
    fn register_process(&self, r: &mut Registry) {
        r.register(
            "restart_generation",
            "Upgrades in place since redcar was first started (0: started by hand)",
            self.generation.clone(),
        );
        r.register("process_pid", "This process's pid", self.pid.clone());
        r.register(
            "upgrade_old_pid",
            "While an upgrade in place hands clients over: the old process's pid (else 0)",
            self.old_pid.clone(),
        );
    }

    /// This process's restart generation.
    pub(crate) fn set_generation(&self, generation: u64) {
        self.generation
            .set(i64::try_from(generation).unwrap_or(i64::MAX));
    }

    /// The old process handing clients over (`None` once it is done).
    pub(crate) fn set_old_pid(&self, pid: Option<u32>) {
        self.old_pid.set(pid.map_or(0, i64::from));
    }

    /// One config reload: `ok` (applied) or `error` (refused; the old config stays).
    pub(crate) fn config_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.config_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
        if ok {
            self.config_loaded_at.set(unix_now());
        }
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The process's hub, with every producer's group added.
/// Built first in `Parts::build`, so every part can register into it.
pub(super) fn hub(config: &MetricsConfig) -> Arc<Metrics> {
    let metrics = Arc::new(Metrics::new(config));
    add_groups(&metrics);
    metrics
}

/// Adds every producer's group to the hub, so each series is in `/metrics` from the first
/// scrape (in this order, which is the exposition's).
fn add_groups(metrics: &Metrics) {
    metrics.add::<MirrorMetrics>();
    metrics.add::<ReadinessGauges>();
    metrics.add::<UpstreamMetrics>();
    metrics.add::<RouterMetrics>();
    metrics.add::<ClientMetrics>();
    metrics.add::<PubsubMetrics>();
    metrics.add::<TopologyMetrics>();
    metrics.add::<ProcessMetrics>();
    metrics.add::<TrackingMetrics>();
    metrics.add::<NearCacheMetrics>();
    metrics.add::<TenantMetrics>();
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
