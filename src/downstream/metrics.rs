//! The series `downstream` produces: client connections per listener and per worker, the
//! worker threads, client traffic, refusals and closes, failed logins and the buffer budget.
//!
//! Every label value here comes from a fixed list (listener kinds, threading models, worker
//! numbers, move reasons, upgrade outcomes), never from what a client sends, so the number of
//! series is bounded by the configuration. Sessions get plain counter and gauge handles once and
//! count into them per read and per write, not per command; the per-command series live in
//! `metrics::command`.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::{MetricGroup, Totals};

/// `listener`: the listener kind (`tcp`, `unix`, `tls`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabel {
    listener: &'static str,
}

/// `threading`: the model that runs (`shared` or `per-core`), after `auto` settled.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ThreadingLabel {
    threading: &'static str,
}

/// `worker`: the per-core worker's number, 0-based.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabel {
    worker: usize,
}

/// `reason`: why a session moved (`pipelining`, `overflow`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MoveLabel {
    reason: &'static str,
}

/// `outcome` (`moved`, `closed`, `drained`) and why.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpgradeLabel {
    outcome: &'static str,
    reason: &'static str,
}

/// `redcar_upgrade_clients{outcome, reason}`: what an upgrade did with each client of the old
/// process (`moved`, or `closed` with why: `tls`, `version`, `gone`; `drained` is counted by
/// the app when `drain_timeout` closes the rest).
#[derive(Clone, Debug, Default)]
pub(crate) struct UpgradeClients(Family<UpgradeLabel, Counter>);

impl UpgradeClients {
    /// One client moved (`outcome` `moved`) or closed, for `reason`.
    pub(crate) fn count(&self, outcome: &'static str, reason: &'static str) {
        self.0
            .get_or_create(&UpgradeLabel { outcome, reason })
            .inc();
    }
}

/// Why a session moved to another worker (`placement: auto`, see `downstream::moves`).
pub(crate) const MOVE_REASONS: [&str; 2] = ["pipelining", "overflow"];

/// Every listener label (see `downstream::listener`).
const LISTENERS: [&str; 2] = ["tcp", "unix"];

/// The client side's figures; the plain counters and gauges are handed to sessions as they are.
#[derive(Default)]
pub(crate) struct ClientMetrics {
    /// `client_connections{listener}`: clients connected now.
    connections: Family<ListenerLabel, Gauge>,
    /// `client_connections_accepted{listener}`: clients registered since start.
    accepted: Family<ListenerLabel, Counter>,
    /// `threading: per-core`: connected clients on each worker.
    worker_clients: Family<WorkerLabel, Gauge>,
    /// `threading: per-core`: the share of time each worker spent running tasks lately.
    worker_busy: Family<WorkerLabel, Gauge<f64, AtomicU64>>,
    /// `threading: per-core`: 1 while new clients are packed (`placement`), else 0.
    placement_packing: Gauge,
    /// `placement: auto`: pipelining clients on each worker, and sessions moved between workers.
    worker_pipelining: Family<WorkerLabel, Gauge>,
    /// Sessions moved between workers, by reason.
    sessions_moved: Family<MoveLabel, Counter>,
    /// What upgrades did with this process's clients (see [`UpgradeClients`]).
    pub(crate) upgrade_clients: UpgradeClients,
    /// Data-plane threads, labelled with the threading model that runs (what `auto` settled to).
    workers: Family<ThreadingLabel, Gauge>,
    /// Client traffic, counted per read and per write (not per command).
    pub(crate) bytes_received: Counter,
    /// `client_bytes_sent`, counted per write.
    pub(crate) bytes_sent: Counter,
    /// Clients refused because `client.max_connections` were connected.
    pub(crate) refused: Counter,
    /// Clients closed at a safe point because they reached `client.max_age`.
    pub(crate) closed_max_age: Counter,
    /// Idle clients closed by `client.close_idle_when_slow`.
    closed_slow: Counter,
    /// Failed `AUTH` / `HELLO … AUTH` attempts, and connections closed after
    /// `auth.max_failures` of them.
    pub(crate) auth_failures: Counter,
    /// `auth_closed`: connections closed after too many failed logins.
    pub(crate) auth_closed: Counter,
    /// Bytes held in client buffers over all sessions (`client.max_buffered_bytes_total`).
    pub(crate) buffered: Gauge,
    /// Sessions not reading their client because of that budget, and pauses since start.
    pub(crate) paused: Gauge,
    /// `client_read_pauses`: times a session stopped reading because of the budget.
    pub(crate) read_pauses: Counter,
}

/// One listener's connection series.
#[derive(Clone, Debug)]
pub(crate) struct ListenerMetrics {
    /// Clients of the listener connected now; up at registration, down when the client's guard
    /// drops.
    pub(crate) connected: Gauge,
    /// Clients of the listener registered since start (one refused by `client.max_connections` is
    /// counted in `clients_refused` instead).
    pub(crate) accepted: Counter,
}

impl MetricGroup for ClientMetrics {
    fn register(&self, r: &mut Registry) {
        r.register(
            "clients_closed_slow",
            "Idle clients closed because latency was above its baseline (client.close_idle_when_slow)",
            self.closed_slow.clone(),
        );
        r.register(
            "client_connections",
            "Connected clients, by listener",
            self.connections.clone(),
        );
        self.register_workers(r);
        r.register(
            "client_connections_accepted",
            "Clients accepted, by listener",
            self.accepted.clone(),
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
            "clients_refused",
            "Clients refused because client.max_connections were connected",
            self.refused.clone(),
        );
        r.register(
            "clients_closed_max_age",
            "Clients closed at a safe point after client.max_age (load-balancer rebalancing)",
            self.closed_max_age.clone(),
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
            self.buffered.clone(),
        );
        r.register(
            "clients_paused",
            "Clients not being read because client.max_buffered_bytes_total is exceeded",
            self.paused.clone(),
        );
        r.register(
            "client_read_pauses",
            "Times a client stopped being read because client.max_buffered_bytes_total was exceeded",
            self.read_pauses.clone(),
        );
    }

    fn add_totals(&self, totals: &mut Totals) {
        (totals.clients, totals.accepted) = self.connected_and_accepted();
    }
}

impl ClientMetrics {
    /// The worker threads' series: the model, and per worker its clients and how busy it is.
    fn register_workers(&self, r: &mut Registry) {
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
            "placement_packing",
            "1 while new clients go to the first worker not yet busy, 0 while counts are kept even (placement; threading: per-core)",
            self.placement_packing.clone(),
        );
        r.register(
            "worker_busy_ratio",
            "Share of the last second each worker spent running tasks, 0 to 1 (threading: per-core)",
            self.worker_busy.clone(),
        );
        r.register(
            "worker_pipelining_clients",
            "Busy clients sending several commands per read, on each worker (placement: auto keeps them even)",
            self.worker_pipelining.clone(),
        );
        for reason in MOVE_REASONS {
            drop(self.sessions_moved.get_or_create(&MoveLabel { reason }));
        }
        r.register(
            "upgrade_clients",
            "Clients of this process at an upgrade in place, by outcome (moved, closed) and reason",
            self.upgrade_clients.0.clone(),
        );
        r.register(
            "sessions_moved",
            "Client sessions moved to another worker at a safe point, by reason (placement: auto)",
            self.sessions_moved.clone(),
        );
    }

    /// The series for one listener (`tcp` or `unix`).
    pub(crate) fn listener(&self, listener: &'static str) -> ListenerMetrics {
        let label = ListenerLabel { listener };
        ListenerMetrics {
            connected: self.connections.get_or_create_owned(&label),
            accepted: self.accepted.get_or_create_owned(&label),
        }
    }

    /// Records the threading model that runs (`shared` or `per-core`) and its worker threads;
    /// called once at start-up.
    pub(crate) fn set_workers(&self, threading: &'static str, workers: usize) {
        let count = i64::try_from(workers).unwrap_or(i64::MAX);
        self.workers
            .get_or_create(&ThreadingLabel { threading })
            .set(count);
    }

    /// The connected-clients gauge of per-core worker `worker`.
    pub(crate) fn worker_clients(&self, worker: usize) -> Gauge {
        self.worker_clients
            .get_or_create_owned(&WorkerLabel { worker })
    }

    /// The pipelining-clients gauge of per-core worker `worker`.
    pub(crate) fn worker_pipelining(&self, worker: usize) -> Gauge {
        self.worker_pipelining
            .get_or_create_owned(&WorkerLabel { worker })
    }

    /// The counter of sessions moved for `reason` (one of [`MOVE_REASONS`]).
    pub(crate) fn sessions_moved(&self, reason: &'static str) -> Counter {
        self.sessions_moved
            .get_or_create_owned(&MoveLabel { reason })
    }

    /// Whether new clients are packed now (`placement`).
    pub(crate) fn placement_packing(&self) -> Gauge {
        self.placement_packing.clone()
    }

    /// The busy-share gauge of per-core worker `worker`.
    pub(crate) fn worker_busy(&self, worker: usize) -> Gauge<f64, AtomicU64> {
        self.worker_busy
            .get_or_create_owned(&WorkerLabel { worker })
    }

    /// The counter of idle clients closed by `client.close_idle_when_slow`.
    pub(crate) fn clients_closed_slow(&self) -> Counter {
        self.closed_slow.clone()
    }

    /// Clients connected now and accepted since start, over every listener, read without
    /// creating series that do not exist yet.
    fn connected_and_accepted(&self) -> (i64, u64) {
        let mut clients = 0;
        let mut accepted = 0;
        for listener in LISTENERS {
            let label = ListenerLabel { listener };
            if let Some(gauge) = self.connections.get(&label) {
                clients += gauge.get();
            }
            if let Some(counter) = self.accepted.get(&label) {
                accepted += counter.get();
            }
        }
        (clients, accepted)
    }
}
