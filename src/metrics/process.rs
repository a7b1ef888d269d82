//! The series about the process itself, produced by `app`: uptime and config reloads.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// Uptime (set when scraped) and the config in effect.
pub(crate) struct ProcessMetrics {
    started: Instant,
    uptime: Gauge<f64, AtomicU64>,
    /// Config reloads (SIGHUP), by result (`ok`, `error`).
    config_reloads: Family<ResultLabel, Counter>,
    /// Unix time of the last config that was loaded and applied (start-up or reload).
    config_loaded_at: Gauge<f64, AtomicU64>,
}

impl ProcessMetrics {
    /// Starts the uptime clock, and counts the config in hand as loaded now.
    pub(super) fn new() -> ProcessMetrics {
        let process = ProcessMetrics {
            started: Instant::now(),
            uptime: Gauge::default(),
            config_reloads: Family::default(),
            config_loaded_at: Gauge::default(),
        };
        process.config_loaded_at.set(unix_now());
        process
    }

    pub(super) fn register(&self, r: &mut Registry) {
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
    }

    /// Time since start.
    pub(crate) fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Brings the uptime gauge up to date (before an exposition).
    pub(super) fn set_uptime(&self) {
        self.uptime.set(self.started.elapsed().as_secs_f64());
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
