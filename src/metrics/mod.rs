//! Prometheus metrics and the slow log: what every other module reports, in one registry.
//!
//! Handles are created once where possible (per node, per listener) so the hot path only does
//! atomic adds; per-command series are looked up by the command's static name.

mod events;
mod latency;
mod mirror;
mod readiness;
mod slowlog;
mod tally;
mod totals;

pub use events::{Event, EventKind, EventLog, EVENT_LOG_LEN};
pub use latency::{quantile_us, BucketCounts, LatencyHistogram, LocalLatency, LATENCY_BUCKETS};
pub use mirror::{MirrorCounters, MirrorMetrics};
pub use readiness::ReadinessGauges;
pub use slowlog::{SlowEntry, SlowLog};
pub use tally::CommandTally;
pub use totals::Totals;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::values::units;

/// `metrics:` and `slowlog:` settings.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// Per-command call, error and latency series. Costs two clock reads and a few atomic
    /// operations per command; switch off if a benchmark shows it matters for you.
    pub command_stats: bool,
    /// Commands slower than this (dispatch to reply) are kept in the slow log; 0 disables it.
    #[serde(with = "units::duration")]
    pub slowlog_threshold: Duration,
    /// Entries the slow log keeps (oldest dropped first).
    pub slowlog_max_len: usize,
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandLabel {
    command: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabel {
    node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RedirectLabel {
    kind: &'static str,
    node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabel {
    listener: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ThreadingLabel {
    threading: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabel {
    worker: usize,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// Every metric redcar exports.
pub struct Metrics {
    /// Tells this registry from others in the same process (the per-thread command tally keys
    /// its entries by it).
    id: u64,
    registry: Registry,
    command_stats: bool,
    command_calls: Family<CommandLabel, Counter>,
    command_errors: Family<CommandLabel, Counter>,
    /// Per command on the hot path: the lock-free kind (no mutex shared by every worker).
    command_duration: Family<CommandLabel, LatencyHistogram>,
    node_requests: Family<NodeLabel, Counter>,
    node_errors: Family<NodeLabel, Counter>,
    /// Per reply on the hot path, and read back by the status page: the lock-free kind.
    node_duration: Family<NodeLabel, LatencyHistogram>,
    node_replies: Family<NodeLabel, Counter>,
    node_latency_us: Family<NodeLabel, Counter>,
    node_in_flight: Family<NodeLabel, Gauge>,
    node_connections: Family<NodeLabel, Gauge>,
    node_ejections: Family<NodeLabel, Counter>,
    node_ejected: Family<NodeLabel, Gauge>,
    node_in_flight_capped: Family<NodeLabel, Counter>,
    faults: Family<KindLabel, Counter>,
    clients_closed_slow: Counter,
    hedges: Counter,
    retry_budget_exhausted: Counter,
    /// Request mirroring (`routes[].mirror`).
    pub mirror: MirrorMetrics,
    /// Slots owned, readiness and the client limit, set when `/metrics` is scraped.
    pub readiness: ReadinessGauges,
    /// Commands sent to any node (not exported: the sum of `node_requests`); the retry budget's
    /// measure of traffic.
    requests_sent: Counter,
    client_connections: Family<ListenerLabel, Gauge>,
    client_connections_total: Family<ListenerLabel, Counter>,
    /// `threading: per-core`: connected clients on each worker.
    worker_clients: Family<WorkerLabel, Gauge>,
    /// Data-plane threads, labelled with the threading model that runs (what `auto` settled to).
    workers: Family<ThreadingLabel, Gauge>,
    /// Client traffic, counted per read and per write (not per command).
    pub bytes_received: Counter,
    pub bytes_sent: Counter,
    redirects: Family<RedirectLabel, Counter>,
    retries: Counter,
    refreshes: Family<ResultLabel, Counter>,
    topology_rejected: Family<ReasonLabel, Counter>,
    slow_commands: Counter,
    /// Clients refused because `client.max_connections` were connected.
    pub clients_refused: Counter,
    /// Clients closed at a safe point because they reached `client.max_age`.
    pub clients_closed_max_age: Counter,
    /// Failed `AUTH` / `HELLO … AUTH` attempts, and connections closed after
    /// `auth.max_failures` of them.
    pub auth_failures: Counter,
    pub auth_closed: Counter,
    /// Bytes held in client buffers over all sessions (`client.max_buffered_bytes_total`).
    pub client_buffered: Gauge,
    /// Sessions not reading their client because of that budget, and pauses since start.
    pub clients_paused: Gauge,
    pub client_read_pauses: Counter,
    /// Dedicated connections (blocking commands, WATCH, pub/sub) lent to a client right now.
    pub dedicated_busy: Gauge,
    /// Dedicated connections kept open for reuse.
    pub dedicated_idle: Gauge,
    /// Requests for a dedicated connection that found the pool exhausted (failed or waited out).
    pub dedicated_exhausted: Counter,
    uptime: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Config reloads (SIGHUP), by result (`ok`, `error`).
    config_reloads: Family<ResultLabel, Counter>,
    /// Unix time of the last config that was loaded and applied (start-up or reload).
    config_loaded_at: Gauge<f64, std::sync::atomic::AtomicU64>,
    started: Instant,
    pub slowlog: SlowLog,
    /// Topology changes and node ejections (status page); shared with every node's health.
    pub events: Arc<EventLog>,
    /// Per-command handles by name, so recording a command costs one lookup.
    /// Keyed by command name with FNV rather than SipHash: looked up on every command, and the
    /// names are the command table's, not chosen by clients.
    commands: RwLock<HashMap<&'static str, CommandSeries, BuildHasherDefault<NameHasher>>>,
}

#[derive(Clone)]
struct CommandSeries {
    calls: Counter,
    errors: Counter,
    duration: LatencyHistogram,
}

impl CommandSeries {
    fn record(&self, elapsed: Duration, error: bool) {
        self.calls.inc();
        if error {
            self.errors.inc();
        }
        self.duration.observe(elapsed.as_secs_f64());
    }
}

/// One node's series, created once per node.
#[derive(Clone, Debug)]
pub struct NodeMetrics {
    pub requests: Counter,
    pub errors: Counter,
    pub duration: LatencyHistogram,
    pub replies: Counter,
    pub latency_us: Counter,
    pub in_flight: Gauge,
    pub connections: Gauge,
    pub ejections: Counter,
    pub ejected: Gauge,
    /// Batches that filled a connection up to `upstream.max_in_flight_per_connection`.
    pub in_flight_capped: Counter,
    /// Shared by every node: commands sent anywhere.
    pub all_requests: Counter,
    /// Where ejections and restorations are recorded.
    pub events: Arc<EventLog>,
}

impl NodeMetrics {
    /// Records `count` replies (one read's worth) that took `latency` in total; the histogram is
    /// fed per reply by the caller.
    pub fn record_replies(&self, count: u64, latency: Duration) {
        if count == 0 {
            return;
        }
        self.replies.inc_by(count);
        self.latency_us
            .inc_by(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
        self.in_flight.dec_by(count as i64);
    }

    /// Mean write-to-reply time so far, in microseconds.
    pub fn mean_latency_us(&self) -> Option<u64> {
        let replies = self.replies.get();
        (replies > 0).then(|| self.latency_us.get() / replies)
    }
}

/// One listener's connection series.
#[derive(Clone, Debug)]
pub struct ListenerMetrics {
    pub connected: Gauge,
    pub accepted: Counter,
}

impl Metrics {
    pub fn new(config: &MetricsConfig) -> Metrics {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut metrics = Metrics {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            registry: Registry::with_prefix("redcar"),
            command_stats: config.command_stats,
            command_calls: Family::default(),
            command_errors: Family::default(),
            command_duration: Family::default(),
            node_requests: Family::default(),
            node_errors: Family::default(),
            node_duration: Family::default(),
            node_replies: Family::default(),
            node_latency_us: Family::default(),
            node_in_flight: Family::default(),
            node_connections: Family::default(),
            node_ejections: Family::default(),
            node_ejected: Family::default(),
            node_in_flight_capped: Family::default(),
            faults: Family::default(),
            clients_closed_slow: Counter::default(),
            hedges: Counter::default(),
            retry_budget_exhausted: Counter::default(),
            mirror: MirrorMetrics::default(),
            readiness: ReadinessGauges::default(),
            requests_sent: Counter::default(),
            client_connections: Family::default(),
            client_connections_total: Family::default(),
            worker_clients: Family::default(),
            workers: Family::default(),
            bytes_received: Counter::default(),
            bytes_sent: Counter::default(),
            redirects: Family::default(),
            retries: Counter::default(),
            refreshes: Family::default(),
            topology_rejected: Family::default(),
            slow_commands: Counter::default(),
            clients_refused: Counter::default(),
            clients_closed_max_age: Counter::default(),
            auth_failures: Counter::default(),
            auth_closed: Counter::default(),
            client_buffered: Gauge::default(),
            clients_paused: Gauge::default(),
            client_read_pauses: Counter::default(),
            dedicated_busy: Gauge::default(),
            dedicated_idle: Gauge::default(),
            dedicated_exhausted: Counter::default(),
            uptime: Gauge::default(),
            config_reloads: Family::default(),
            config_loaded_at: Gauge::default(),
            started: Instant::now(),
            slowlog: SlowLog::new(config.slowlog_threshold, config.slowlog_max_len),
            events: Arc::new(EventLog::new()),
            commands: RwLock::new(HashMap::default()),
        };
        metrics.register();
        metrics.config_loaded_at.set(unix_now());
        metrics
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        self.mirror.register(r);
        self.readiness.register(r);
        r.register(
            "commands",
            "Commands received, by command",
            self.command_calls.clone(),
        );
        r.register(
            "command_errors",
            "Error replies sent, by command",
            self.command_errors.clone(),
        );
        r.register(
            "command_duration_seconds",
            "Dispatch to reply, by command",
            self.command_duration.clone(),
        );
        r.register(
            "node_requests",
            "Commands sent to a node",
            self.node_requests.clone(),
        );
        r.register(
            "node_errors",
            "Connection failures and lost replies, by node",
            self.node_errors.clone(),
        );
        r.register(
            "node_duration_seconds",
            "Write to reply on a node connection",
            self.node_duration.clone(),
        );
        r.register(
            "node_replies",
            "Replies received from a node",
            self.node_replies.clone(),
        );
        r.register(
            "node_latency_microseconds",
            "Sum of write-to-reply times on a node (divide by node_replies for the mean)",
            self.node_latency_us.clone(),
        );
        r.register(
            "node_in_flight",
            "Commands awaiting a reply from a node",
            self.node_in_flight.clone(),
        );
        r.register(
            "node_connections",
            "Open connections to a node",
            self.node_connections.clone(),
        );
        r.register(
            "node_ejections",
            "Times a node was ejected from selection after consecutive failures",
            self.node_ejections.clone(),
        );
        r.register(
            "node_ejected",
            "1 while a node is ejected from selection (outlier detection), else 0",
            self.node_ejected.clone(),
        );
        r.register(
            "node_in_flight_capped",
            "Write batches that filled a node connection to upstream.max_in_flight_per_connection (it then waits for replies before taking more)",
            self.node_in_flight_capped.clone(),
        );
        r.register(
            "faults_injected",
            "Commands delayed or answered with an error by router.faults, by kind (delay, error)",
            self.faults.clone(),
        );
        r.register(
            "clients_closed_slow",
            "Idle clients closed because latency was above its baseline (client.close_idle_when_slow)",
            self.clients_closed_slow.clone(),
        );
        r.register(
            "hedged_reads",
            "Reads sent to a second node because the first had not answered within router.hedge_after",
            self.hedges.clone(),
        );
        r.register(
            "retry_budget_exhausted",
            "Retries not made because router.retry_budget was spent",
            self.retry_budget_exhausted.clone(),
        );
        r.register(
            "client_connections",
            "Connected clients, by listener",
            self.client_connections.clone(),
        );
        r.register(
            "workers",
            "Data-plane worker threads, by the threading model that runs (threading: auto settled)",
            self.workers.clone(),
        );
        r.register(
            "worker_clients",
            "Connected clients on each worker (threading: per-core)",
            self.worker_clients.clone(),
        );
        r.register(
            "client_connections_accepted",
            "Clients accepted, by listener",
            self.client_connections_total.clone(),
        );
        r.register(
            "client_bytes_received",
            "Bytes read from clients",
            self.bytes_received.clone(),
        );
        r.register(
            "client_bytes_sent",
            "Bytes written to clients",
            self.bytes_sent.clone(),
        );
        r.register(
            "redirects",
            "MOVED and ASK replies followed",
            self.redirects.clone(),
        );
        r.register(
            "retries",
            "Commands sent again after a failure or a TRYAGAIN/CLUSTERDOWN/LOADING/MASTERDOWN reply",
            self.retries.clone(),
        );
        r.register(
            "topology_refreshes",
            "Slot map refreshes, by result",
            self.refreshes.clone(),
        );
        r.register(
            "topology_rejected",
            "Slot maps read but not adopted, by reason (stale, unconfirmed, partial)",
            self.topology_rejected.clone(),
        );
        r.register(
            "slow_commands",
            "Commands slower than the slow-log threshold",
            self.slow_commands.clone(),
        );
        r.register(
            "clients_refused",
            "Clients refused because client.max_connections were connected",
            self.clients_refused.clone(),
        );
        r.register(
            "clients_closed_max_age",
            "Clients closed at a safe point after client.max_age (load-balancer rebalancing)",
            self.clients_closed_max_age.clone(),
        );
        r.register(
            "auth_failures",
            "Failed AUTH and HELLO ... AUTH attempts (wrong password or unknown user)",
            self.auth_failures.clone(),
        );
        r.register(
            "auth_closed",
            "Client connections closed after auth.max_failures failed attempts",
            self.auth_closed.clone(),
        );
        r.register(
            "client_buffered_bytes",
            "Unparsed request and unwritten reply bytes held for all clients (client.max_buffered_bytes_total)",
            self.client_buffered.clone(),
        );
        r.register(
            "clients_paused",
            "Clients not being read because client.max_buffered_bytes_total is exceeded",
            self.clients_paused.clone(),
        );
        r.register(
            "client_read_pauses",
            "Times a client stopped being read because client.max_buffered_bytes_total was exceeded",
            self.client_read_pauses.clone(),
        );
        r.register(
            "dedicated_connections_busy",
            "Dedicated node connections lent to a client (blocking commands, WATCH, pub/sub)",
            self.dedicated_busy.clone(),
        );
        r.register(
            "dedicated_connections_idle",
            "Dedicated node connections kept open for reuse",
            self.dedicated_idle.clone(),
        );
        r.register(
            "dedicated_exhausted",
            "Requests for a dedicated connection refused because the pool was exhausted",
            self.dedicated_exhausted.clone(),
        );
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

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        self.uptime.set(self.started.elapsed().as_secs_f64());
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }

    /// Records one finished command (when command stats are on) and returns whether it was slow.
    /// Sessions use a [`CommandTally`] instead, which adds up a batch of commands first.
    pub fn record_command(&self, command: &'static str, elapsed: Duration, error: bool) -> bool {
        if self.command_stats {
            self.series_of(command).record(elapsed, error);
        }
        self.note_slow(elapsed)
    }

    /// A command's series, made on its first use.
    fn series_of(&self, command: &'static str) -> CommandSeries {
        let known = self.commands.read().unwrap_or_else(|e| e.into_inner());
        match known.get(command) {
            Some(series) => series.clone(),
            None => {
                drop(known);
                self.command_series(command)
            }
        }
    }

    /// Whether a command that took `elapsed` is slow (counted if so).
    fn note_slow(&self, elapsed: Duration) -> bool {
        let slow = self.slowlog.is_slow(elapsed);
        if slow {
            self.slow_commands.inc();
        }
        slow
    }

    /// Creates (once) the series of a command seen for the first time.
    fn command_series(&self, command: &'static str) -> CommandSeries {
        let label = CommandLabel { command };
        let series = CommandSeries {
            calls: self.command_calls.get_or_create_owned(&label),
            errors: self.command_errors.get_or_create_owned(&label),
            duration: self.command_duration.get_or_create_owned(&label),
        };
        let mut commands = self.commands.write().unwrap_or_else(|e| e.into_inner());
        commands.entry(command).or_insert(series).clone()
    }

    /// The series for one node (created on first use).
    pub fn node(&self, addr: &str) -> NodeMetrics {
        let label = NodeLabel {
            node: addr.to_string(),
        };
        NodeMetrics {
            requests: self.node_requests.get_or_create_owned(&label),
            errors: self.node_errors.get_or_create_owned(&label),
            duration: self.node_duration.get_or_create_owned(&label),
            replies: self.node_replies.get_or_create_owned(&label),
            latency_us: self.node_latency_us.get_or_create_owned(&label),
            in_flight: self.node_in_flight.get_or_create_owned(&label),
            connections: self.node_connections.get_or_create_owned(&label),
            ejections: self.node_ejections.get_or_create_owned(&label),
            ejected: self.node_ejected.get_or_create_owned(&label),
            in_flight_capped: self.node_in_flight_capped.get_or_create_owned(&label),
            all_requests: self.requests_sent.clone(),
            events: self.events.clone(),
        }
    }

    /// Calls so far per command seen (status page rates); empty when command stats are off.
    pub fn command_calls(&self) -> Vec<(&'static str, u64)> {
        let known = self.commands.read().unwrap_or_else(|e| e.into_inner());
        known
            .iter()
            .map(|(name, series)| (*name, series.calls.get()))
            .collect()
    }

    /// Drops a node's series once redcar no longer knows the node (it left the cluster, or is
    /// a failed replica), so dashboards do not show a gone node as stuck ejected or busy.
    pub fn forget_node(&self, addr: &str) {
        let label = NodeLabel {
            node: addr.to_string(),
        };
        self.node_requests.remove(&label);
        self.node_errors.remove(&label);
        self.node_duration.remove(&label);
        self.node_replies.remove(&label);
        self.node_latency_us.remove(&label);
        self.node_in_flight.remove(&label);
        self.node_connections.remove(&label);
        self.node_ejections.remove(&label);
        self.node_ejected.remove(&label);
        self.node_in_flight_capped.remove(&label);
    }

    /// The series for one listener (`tcp` or `unix`).
    pub fn listener(&self, listener: &'static str) -> ListenerMetrics {
        let label = ListenerLabel { listener };
        ListenerMetrics {
            connected: self.client_connections.get_or_create_owned(&label),
            accepted: self.client_connections_total.get_or_create_owned(&label),
        }
    }

    /// Records the threading model that runs (`shared` or `per-core`) and its worker threads;
    /// called once at start-up.
    pub fn set_workers(&self, threading: &'static str, workers: usize) {
        let count = i64::try_from(workers).unwrap_or(i64::MAX);
        self.workers
            .get_or_create(&ThreadingLabel { threading })
            .set(count);
    }

    /// The connected-clients gauge of per-core worker `worker`.
    pub fn worker_clients(&self, worker: usize) -> Gauge {
        self.worker_clients
            .get_or_create_owned(&WorkerLabel { worker })
    }

    /// A followed redirect: `moved` or `ask`, to `node`. Rare, so the label allocation is fine.
    pub fn redirect(&self, kind: &'static str, node: &str) {
        let label = RedirectLabel {
            kind,
            node: node.to_string(),
        };
        self.redirects.get_or_create(&label).inc();
    }

    /// A command about to be sent again (after a connection failure or a transient error reply).
    pub fn retry(&self) {
        self.retries.inc();
    }

    /// Commands sent to any node so far.
    pub fn requests_sent(&self) -> u64 {
        self.requests_sent.get()
    }

    /// A read sent to a second node (`router.hedge_after`).
    pub fn hedge(&self) {
        self.hedges.inc();
    }

    /// The counter of injected faults of one `kind` (`delay` or `error`), made once at start-up
    /// so injecting costs one atomic add.
    pub fn faults(&self, kind: &'static str) -> Counter {
        self.faults.get_or_create_owned(&KindLabel { kind })
    }

    /// The counter of idle clients closed by `client.close_idle_when_slow`.
    pub fn clients_closed_slow(&self) -> Counter {
        self.clients_closed_slow.clone()
    }

    /// A retry refused by `router.retry_budget`.
    pub fn retry_budget_exhausted(&self) {
        self.retry_budget_exhausted.inc();
    }

    /// A topology refresh that succeeded or failed.
    /// One config reload: `ok` (applied) or `error` (refused; the old config stays).
    pub fn config_reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.config_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
        if ok {
            self.config_loaded_at.set(unix_now());
        }
    }

    pub fn refresh(&self, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.refreshes.get_or_create(&ResultLabel { result }).inc();
    }

    /// A slot map read but not adopted: `stale` (an owner with a lower config epoch),
    /// `unconfirmed` (a surprising change no second node agreed with) or `partial` (unowned
    /// slots while the current map is complete).
    pub fn topology_rejected(&self, reason: &'static str) {
        self.topology_rejected
            .get_or_create(&ReasonLabel { reason })
            .inc();
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(&MetricsConfig::default())
    }
}

/// FNV-1a over the bytes of a command name (see `Metrics::commands`).
struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        NameHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests;
