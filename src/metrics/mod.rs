//! Prometheus metrics and the slow log: the hub every producer registers its series in, and the
//! one interface the admin and the status page read them through.
//!
//! Each producing module defines its own group of series next to its code, as a type that
//! implements `MetricGroup` (`upstream/metrics.rs`: per-node series and the dedicated pool;
//! `downstream/metrics.rs`: listeners, workers, client traffic and closes;
//! `downstream/tracking/metrics.rs`: client-side caching; `cluster/metrics.rs`: refreshes,
//! rejected maps, redirects; `router/metrics.rs`: retries, hedges, retry budget, faults;
//! `router/routes/mirror_metrics.rs`: request mirroring; `near_cache/metrics.rs`;
//! `admin/readiness.rs`: gauges set when scraped; `app/metrics.rs`: uptime, config reloads).
//! `app` adds every group to the hub at start-up (`Metrics::add`), so every series is in
//! `/metrics` from the first scrape; `Metrics::group` hands a group out (adding it the first
//! time if start-up did not, as in unit tests). The hub knows groups only by type, so it sits
//! below every producer in the layers (tests/layering.rs).
//!
//! Reading: the admin encodes `/metrics` with `Metrics::encode`, reads a group's figures for
//! the status page and `/topology` with `Metrics::group`, and INFO's totals with
//! `Metrics::totals` (each group adds its share, so a reader below the producers needs none of
//! their types).
//!
//! What stays here is what is shared: the per-command series (`command.rs`, recorded through a
//! thread's `tally.rs`), the lock-free latency histogram (`latency.rs`), the slow log
//! (`slowlog.rs`), the event log (`events.rs`), the INFO totals (`totals.rs`), the flush cause
//! two caches label by (`flush.rs`) and the group set (`group.rs`).
//!
//! Producers take their group's handles once (per node, per listener, per session, in the
//! router's core), so the hot path only does atomic adds and never looks a group up;
//! per-command series are looked up by the command's static name.
#![warn(unreachable_pub, missing_docs)]

pub(crate) mod clock;
mod command;
mod events;
mod flush;
mod group;
mod latency;
mod slowlog;
mod tally;
mod totals;

pub(crate) use command::CommandMetrics;
pub(crate) use events::{EventKind, EventLog};
pub(crate) use flush::FlushCause;
pub(crate) use group::MetricGroup;
pub(crate) use latency::{quantile_us, BucketCounts, LatencyHistogram, LocalLatency};
pub(crate) use slowlog::{SlowEntry, SlowLog};
pub use tally::CommandTally;
pub(crate) use tally::UserSeries;
pub(crate) use totals::Totals;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};

use crate::values::units;

/// `metrics:` and `slowlog:` settings.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Per-command call, error and latency series. Costs two clock reads and a few atomic
    /// operations per command; switch off if a benchmark shows it matters for you.
    pub(crate) command_stats: bool,
    /// Commands slower than this (dispatch to reply) are kept in the slow log; 0 disables it.
    #[serde(with = "units::duration")]
    pub(crate) slowlog_threshold: Duration,
    /// Entries the slow log keeps (oldest dropped first).
    pub(crate) slowlog_max_len: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            command_stats: true,
            slowlog_threshold: Duration::from_millis(10),
            slowlog_max_len: 128,
        }
    }
}

/// Every metric redcar exports: the registry, the groups the producers added, and the shared
/// pieces.
pub struct Metrics {
    /// Tells this registry from others in the same process (the per-thread command tally keys
    /// its entries by it).
    id: u64,
    /// Locked only to add a group and to encode: series are updated through their own handles.
    registry: Mutex<Registry>,
    /// Each producing module's series, by type.
    groups: group::Groups,
    /// Per-command series and slow commands (client sessions).
    pub(crate) commands: CommandMetrics,
    pub(crate) slowlog: SlowLog,
    /// Topology changes and node ejections (status page); shared with every node's health.
    pub(crate) events: Arc<EventLog>,
}

impl Metrics {
    /// Makes the hub with the shared pieces; the producers' groups are added by [`Metrics::add`].
    pub(crate) fn new(config: &MetricsConfig) -> Metrics {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        let mut registry = Registry::with_prefix("redcar");
        let commands = CommandMetrics::new(config.command_stats);
        commands.register(&mut registry);
        Metrics {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            registry: Mutex::new(registry),
            groups: group::Groups::default(),
            commands,
            slowlog: SlowLog::new(config.slowlog_threshold, config.slowlog_max_len),
            events: Arc::new(EventLog::new()),
        }
    }

    /// Adds group `G` and registers its series, once: adding it again changes nothing.
    pub(crate) fn add<G: MetricGroup + Default>(&self) {
        self.group::<G>();
    }

    /// Group `G`, added (and registered) now if start-up did not. Takes a lock: producers call
    /// it when they are built and keep what it returns, never per command.
    pub(crate) fn group<G: MetricGroup + Default>(&self) -> Arc<G> {
        self.groups.get_or_add(|group: &G| {
            let mut registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
            group.register(&mut registry);
        })
    }

    /// Reads the totals without creating series that do not exist yet (a group not added
    /// counts 0).
    pub(crate) fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        self.groups.each(|group| group.add_totals(&mut totals));
        totals
    }

    /// The Prometheus text exposition.
    pub(crate) fn encode(&self) -> String {
        self.groups.each(|group| group.before_encode());
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
            text.clear();
        }
        text
    }

    /// Records one finished command (when command stats are on) and returns whether it was slow.
    /// Sessions use a [`CommandTally`] instead, which adds up a batch of commands first.
    pub fn record_command(&self, command: &'static str, elapsed: Duration, error: bool) -> bool {
        self.commands.record(command, elapsed, error);
        self.note_slow(elapsed)
    }

    /// Whether a command that took `elapsed` is slow (counted if so).
    fn note_slow(&self, elapsed: Duration) -> bool {
        let slow = self.slowlog.is_slow(elapsed);
        if slow {
            self.commands.slow();
        }
        slow
    }

    /// Calls so far per command seen (status page rates); empty when command stats are off.
    pub(crate) fn command_calls(&self) -> Vec<(&'static str, u64)> {
        self.commands.calls()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(&MetricsConfig::default())
    }
}

// For the status sampler's tests; last, so tests/layering.rs reads the code above.
#[cfg(test)]
pub(crate) use latency::LATENCY_BUCKETS;
#[cfg(test)]
mod tests;
