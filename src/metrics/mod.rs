//! Prometheus metrics and the slow log: one registry, filled at start-up by a group of series
//! per producing module, and the one interface the data plane, the admin and the status page
//! use to read and write them.
//!
//! Layout:
//! - `mod.rs`: [`MetricsConfig`] and [`Metrics`], which holds the registry, the groups and the
//!   shared pieces, registers every group in [`Metrics::new`] and keeps the methods call sites use
//!   (`metrics.node(addr)`, `metrics.listener(..)`, `metrics.refresh(ok)`, …).
//! - One file per producer, each a group type with a `register(&self, &mut Registry)`:
//!   `command.rs` (per-command series, sessions), `upstream.rs` (per-node series and the
//!   dedicated pool), `client.rs` (listeners, workers, client traffic and closes: `downstream`),
//!   `topology.rs` (refreshes, rejected maps, redirects: `cluster`), `router.rs` (retries,
//!   hedges, retry budget, faults), `mirror.rs` (request mirroring), `tracking.rs`
//!   (client-side caching: `downstream::tracking`), `near_cache.rs` (the near cache),
//!   `readiness.rs` (gauges set when scraped),
//!   `process.rs` (uptime, config reloads: `app`).
//! - Shared pieces: `latency.rs` (the lock-free histogram), `tally.rs` (a thread's per-command
//!   counts), `slowlog.rs`, `events.rs` (the status page's event log), `totals.rs` (INFO).
//!
//! The groups live here rather than in the modules that produce them because those modules are
//! above `metrics` in the layers (tests/layering.rs): `Metrics` could not hold a type defined in
//! `upstream` or `router`. Each file is named for its producer instead.
//!
//! Handles are created once where possible (per node, per listener) so the hot path only does
//! atomic adds; per-command series are looked up by the command's static name.
#![warn(unreachable_pub, missing_docs)]

mod client;
mod command;
mod events;
mod latency;
mod mirror;
mod near_cache;
mod process;
mod readiness;
mod router;
mod slowlog;
mod tally;
mod topology;
mod totals;
mod tracking;
mod upstream;

pub(crate) use client::{ClientMetrics, ListenerMetrics};
pub(crate) use command::CommandMetrics;
pub(crate) use events::{EventKind, EventLog};
pub(crate) use latency::{quantile_us, BucketCounts, LatencyHistogram, LocalLatency};
pub(crate) use mirror::{MirrorCounters, MirrorMetrics};
pub(crate) use near_cache::NearCacheMetrics;
pub(crate) use process::ProcessMetrics;
pub(crate) use readiness::ReadinessGauges;
pub(crate) use router::RouterMetrics;
pub(crate) use slowlog::{SlowEntry, SlowLog};
pub use tally::CommandTally;
pub(crate) use topology::TopologyMetrics;
pub(crate) use tracking::{FlushCause, TrackingMetrics};
pub(crate) use upstream::{NodeMetrics, UpstreamMetrics};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
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

/// Every metric redcar exports, as one group per producing module.
pub struct Metrics {
    /// Tells this registry from others in the same process (the per-thread command tally keys
    /// its entries by it).
    id: u64,
    registry: Registry,
    /// Per-command series and slow commands (client sessions).
    pub(crate) commands: CommandMetrics,
    /// Per-node series and the dedicated pool (`upstream`).
    pub(crate) upstream: UpstreamMetrics,
    /// Listeners, workers, client traffic and closes (`downstream`).
    pub(crate) clients: ClientMetrics,
    /// Refreshes, rejected maps and redirects (`cluster`).
    pub(crate) topology: TopologyMetrics,
    /// Retries, hedges, the retry budget and injected faults (`router`).
    pub(crate) router: RouterMetrics,
    /// Request mirroring (`routes[].mirror`).
    pub(crate) mirror: MirrorMetrics,
    /// Client-side caching (`downstream::tracking`).
    pub(crate) tracking: TrackingMetrics,
    /// The near cache (`near_cache`).
    pub(crate) near_cache: NearCacheMetrics,
    /// Slots owned, readiness and the client limit, set when `/metrics` is scraped.
    pub(crate) readiness: ReadinessGauges,
    /// Uptime and config reloads (`app`).
    pub(crate) process: ProcessMetrics,
    pub(crate) slowlog: SlowLog,
    /// Topology changes and node ejections (status page); shared with every node's health.
    pub(crate) events: Arc<EventLog>,
}

impl Metrics {
    /// Makes every group and registers its series.
    pub(crate) fn new(config: &MetricsConfig) -> Metrics {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        let mut metrics = Metrics {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            registry: Registry::with_prefix("redcar"),
            commands: CommandMetrics::new(config.command_stats),
            upstream: UpstreamMetrics::default(),
            clients: ClientMetrics::default(),
            topology: TopologyMetrics::default(),
            router: RouterMetrics::default(),
            mirror: MirrorMetrics::default(),
            tracking: TrackingMetrics::default(),
            near_cache: NearCacheMetrics::default(),
            readiness: ReadinessGauges::default(),
            process: ProcessMetrics::new(),
            slowlog: SlowLog::new(config.slowlog_threshold, config.slowlog_max_len),
            events: Arc::new(EventLog::new()),
        };
        let r = &mut metrics.registry;
        metrics.mirror.register(r);
        metrics.readiness.register(r);
        metrics.commands.register(r);
        metrics.upstream.register(r);
        metrics.router.register(r);
        metrics.clients.register(r);
        metrics.topology.register(r);
        metrics.process.register(r);
        metrics.tracking.register(r);
        metrics.near_cache.register(r);
        metrics
    }

    /// The Prometheus text exposition.
    pub(crate) fn encode(&self) -> String {
        self.process.set_uptime();
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
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

    /// The series for one node (created on first use).
    pub(crate) fn node(&self, addr: &str) -> NodeMetrics {
        self.upstream.node(addr, &self.events)
    }

    /// Drops the series of a node redcar no longer knows (see [`UpstreamMetrics::forget_node`]).
    pub(crate) fn forget_node(&self, addr: &str) {
        self.upstream.forget_node(addr);
    }

    /// Commands sent to any node so far.
    pub(crate) fn requests_sent(&self) -> u64 {
        self.upstream.requests_sent()
    }

    /// The series for one listener (`tcp` or `unix`).
    pub(crate) fn listener(&self, listener: &'static str) -> ListenerMetrics {
        self.clients.listener(listener)
    }

    /// Records the threading model that runs and its worker threads; called once at start-up.
    pub(crate) fn set_workers(&self, threading: &'static str, workers: usize) {
        self.clients.set_workers(threading, workers);
    }

    /// The connected-clients gauge of per-core worker `worker`.
    pub(crate) fn worker_clients(&self, worker: usize) -> Gauge {
        self.clients.worker_clients(worker)
    }

    /// Whether new clients are packed now (`placement`).
    pub(crate) fn placement_packing(&self) -> Gauge {
        self.clients.placement_packing()
    }

    /// The busy-share gauge of per-core worker `worker`.
    pub(crate) fn worker_busy(
        &self,
        worker: usize,
    ) -> prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64> {
        self.clients.worker_busy(worker)
    }

    /// The counter of idle clients closed by `client.close_idle_when_slow`.
    pub(crate) fn clients_closed_slow(&self) -> Counter {
        self.clients.clients_closed_slow()
    }

    /// A followed redirect: `moved` or `ask`, to `node`.
    pub(crate) fn redirect(&self, kind: &'static str, node: &str) {
        self.topology.redirect(kind, node);
    }

    /// A topology refresh that succeeded or failed.
    pub(crate) fn refresh(&self, ok: bool) {
        self.topology.refresh(ok);
    }

    /// A slot map read but not adopted (see [`TopologyMetrics::rejected`]).
    pub(crate) fn topology_rejected(&self, reason: &'static str) {
        self.topology.rejected(reason);
    }

    /// A command about to be sent again (after a connection failure or a transient error reply).
    pub(crate) fn retry(&self) {
        self.router.retry();
    }

    /// A read sent to a second node (`router.hedge_after`).
    pub(crate) fn hedge(&self) {
        self.router.hedge();
    }

    /// A retry refused by `router.retry_budget`.
    pub(crate) fn retry_budget_exhausted(&self) {
        self.router.retry_budget_exhausted();
    }

    /// The counter of injected faults of one `kind` (`delay` or `error`).
    pub(crate) fn faults(&self, kind: &'static str) -> Counter {
        self.router.faults(kind)
    }

    /// One config reload: `ok` (applied) or `error` (refused; the old config stays).
    pub(crate) fn config_reload(&self, ok: bool) {
        self.process.config_reload(ok);
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
