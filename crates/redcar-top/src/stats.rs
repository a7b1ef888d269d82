//! From scrapes to a [`Frame`]: counter deltas become rates, histogram bucket deltas become
//! p50/p99 latencies. Pure functions over parsed samples, so every number is testable.

use std::collections::BTreeSet;
use std::time::Duration;

use super::window::Window;
#[cfg(test)]
use super::window::{bucket_delta, counter_delta, percentile};
pub(crate) use super::window::{Latency, Snapshot};

/// One row of the command table.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CommandRow {
    /// The command's name as the `command` label has it (`get`, `config|get`).
    pub(crate) command: String,
    /// `redcar_commands_total` over the window.
    pub(crate) calls_per_sec: Option<f64>,
    /// `redcar_command_errors_total` over the window.
    pub(crate) errors_per_sec: Option<f64>,
    /// p50/p99 of `redcar_command_duration_seconds` over the window.
    pub(crate) latency: Latency,
}

/// One row of the node table.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct NodeRow {
    /// The node's `host:port`, the `node` label.
    pub(crate) node: String,
    /// `redcar_node_requests_total` over the window.
    pub(crate) requests_per_sec: Option<f64>,
    /// `redcar_node_errors_total` over the window.
    pub(crate) errors_per_sec: Option<f64>,
    /// p50/p99 of `redcar_node_duration_seconds` over the window.
    pub(crate) latency: Latency,
    /// `redcar_node_in_flight` now: commands awaiting the node's reply.
    pub(crate) in_flight: Option<f64>,
    /// `redcar_node_connections` now.
    pub(crate) connections: Option<f64>,
}

/// Everything one screen shows; `None` means the metric was missing (rendered as `-`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Frame {
    /// The admin address scraped.
    pub(crate) admin: String,
    /// Seconds since the redcar started.
    pub(crate) uptime_secs: Option<f64>,
    /// Seconds the rates cover; `None` means cumulative since start (first frame).
    pub(crate) window_secs: Option<f64>,
    /// Commands per second over all commands.
    pub(crate) commands_per_sec: Option<f64>,
    /// Error replies per second over all commands.
    pub(crate) errors_per_sec: Option<f64>,
    /// Clients connected now, over every listener.
    pub(crate) client_connections: Option<f64>,
    /// Bytes read from clients per second.
    pub(crate) bytes_in_per_sec: Option<f64>,
    /// Bytes written to clients per second.
    pub(crate) bytes_out_per_sec: Option<f64>,
    /// MOVED redirects followed per second: non-zero while slots move or the map is behind.
    pub(crate) moved_per_sec: Option<f64>,
    /// ASK redirects followed per second: non-zero during a slot migration.
    pub(crate) ask_per_sec: Option<f64>,
    /// Commands over the slow-log threshold per second.
    pub(crate) slow_per_sec: Option<f64>,
    /// Failed slot-map refreshes since start.
    pub(crate) refresh_failures: Option<f64>,
    /// Sorted by calls/s, busiest first.
    pub(crate) commands: Vec<CommandRow>,
    /// Sorted by node address.
    pub(crate) nodes: Vec<NodeRow>,
    /// A line shown under the header, e.g. the last scrape's error while retrying.
    pub(crate) notice: Option<String>,
    /// `/hotkeys`, when the redcar has it (fetched after the metrics, see `top::hotkeys`).
    pub(crate) hotkeys: Option<super::hotkeys::HotPanel>,
    /// The near cache, once it has seen a cacheable read (`None`: off, or nothing yet).
    pub(crate) near_cache: Option<NearCacheLine>,
    /// Per-core workers (`None` with the shared runtime).
    pub(crate) workers: Option<WorkersLine>,
    /// Configured users (`auth.users`), by name.
    pub(crate) users: Vec<super::users::UserRow>,
}

/// The per-core workers' line: each worker's clients and busy share, and whether new clients
/// are packed onto the first worker not yet busy (`placement`) or spread evenly.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct WorkersLine {
    /// By worker index: (clients, busy share 0–1).
    pub(crate) workers: Vec<(Option<f64>, Option<f64>)>,
    /// `redcar_placement_packing`: true while new clients are packed, false while spread; `None`
    /// when not exported.
    pub(crate) packing: Option<bool>,
}

impl WorkersLine {
    /// `None` without per-core workers (the series are absent); the worker count is the highest
    /// worker label seen plus one, so a worker with no clients still gets its slot.
    fn build(cur: &Snapshot) -> Option<WorkersLine> {
        let clients = cur.by("redcar_worker_clients", "worker");
        let busy = cur.by("redcar_worker_busy_ratio", "worker");
        let count = clients
            .keys()
            .chain(busy.keys())
            .filter_map(|w| w.parse::<usize>().ok())
            .max()?
            + 1;
        let workers = (0..count)
            .map(|w| {
                let w = w.to_string();
                (clients.get(&w).copied(), busy.get(&w).copied())
            })
            .collect();
        Some(WorkersLine {
            workers,
            packing: cur.sum("redcar_placement_packing").map(|v| v > 0.0),
        })
    }
}

/// The near cache's line: hits per second, the share of cacheable reads it answered over the
/// window, and the bytes it holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct NearCacheLine {
    /// Near-cache hits per second over the window.
    pub(crate) hits_per_sec: Option<f64>,
    /// Hits over hits plus misses over the window, 0–1.
    pub(crate) hit_ratio: Option<f64>,
    /// Bytes the near cache holds now.
    pub(crate) bytes: Option<f64>,
}

impl NearCacheLine {
    /// `None` until the near cache has seen a cacheable read, so a redcar without it shows no line.
    fn build(w: &Window<'_>, cur: &Snapshot) -> Option<NearCacheLine> {
        let reads =
            cur.sum("redcar_near_cache_hits_total")? + cur.sum("redcar_near_cache_misses_total")?;
        if reads == 0.0 {
            return None;
        }
        let hits = w.rate("redcar_near_cache_hits_total");
        let misses = w.rate("redcar_near_cache_misses_total");
        let hit_ratio = match (hits, misses) {
            (Some(h), Some(m)) if h + m > 0.0 => Some(h / (h + m)),
            _ => None,
        };
        Some(NearCacheLine {
            hits_per_sec: hits,
            hit_ratio,
            bytes: cur.sum("redcar_near_cache_bytes"),
        })
    }
}

impl Frame {
    /// Builds a frame from the current scrape and, if there is one, the previous scrape and the
    /// time between the two.
    pub(crate) fn build(admin: &str, cur: &Snapshot, prev: Option<(&Snapshot, Duration)>) -> Frame {
        let w = Window::new(cur, prev);
        // Counter series appear on first increment: with traffic measured, "none yet" is 0.
        let traffic = w.rate("redcar_commands_total");
        let label_rate = |name: &str, label: &str, value: &str| {
            or_zero(w.rates_by(name, label).get(value), Some(&traffic))
        };
        let refreshes = cur.by("redcar_topology_refreshes_total", "result");
        Frame {
            admin: admin.to_string(),
            uptime_secs: cur.sum("redcar_uptime_seconds"),
            window_secs: w.interval(),
            commands_per_sec: traffic,
            errors_per_sec: or_zero(Some(&w.rate("redcar_command_errors_total")), Some(&traffic)),
            client_connections: cur.sum("redcar_client_connections"),
            bytes_in_per_sec: w.rate("redcar_client_bytes_received_total"),
            bytes_out_per_sec: w.rate("redcar_client_bytes_sent_total"),
            moved_per_sec: label_rate("redcar_redirects_total", "kind", "moved"),
            ask_per_sec: label_rate("redcar_redirects_total", "kind", "ask"),
            slow_per_sec: or_zero(Some(&w.rate("redcar_slow_commands_total")), Some(&traffic)),
            refresh_failures: refreshes
                .get("failed")
                .copied()
                .or((!refreshes.is_empty()).then_some(0.0)),
            commands: command_rows(&w),
            nodes: node_rows(&w),
            notice: None,
            hotkeys: None,
            near_cache: NearCacheLine::build(&w, cur),
            workers: WorkersLine::build(cur),
            users: super::users::user_rows(&w),
        }
    }
}

/// An error rate, or 0 where the error series is missing but the traffic rate is known: counter
/// series are created on first increment, so "no series" means "none yet".
fn or_zero(errors: Option<&Option<f64>>, traffic: Option<&Option<f64>>) -> Option<f64> {
    errors
        .copied()
        .flatten()
        .or(traffic.copied().flatten().map(|_| 0.0))
}

/// Every command seen in any of the three families, busiest first (by calls per second; ties by
/// name, so the table does not shuffle between frames). A command without a rate yet sorts last.
fn command_rows(w: &Window<'_>) -> Vec<CommandRow> {
    let calls = w.rates_by("redcar_commands_total", "command");
    let errors = w.rates_by("redcar_command_errors_total", "command");
    let latency = w.latencies_by("redcar_command_duration_seconds", "command");
    let names: BTreeSet<&String> = calls
        .keys()
        .chain(errors.keys())
        .chain(latency.keys())
        .collect();
    let mut rows: Vec<CommandRow> = names
        .into_iter()
        .map(|name| CommandRow {
            command: name.clone(),
            calls_per_sec: calls.get(name).copied().flatten(),
            errors_per_sec: or_zero(errors.get(name), calls.get(name)),
            latency: latency.get(name).copied().unwrap_or_default(),
        })
        .collect();
    let key = |r: &CommandRow| r.calls_per_sec.unwrap_or(-1.0);
    rows.sort_by(|a, b| {
        key(b)
            .total_cmp(&key(a))
            .then_with(|| a.command.cmp(&b.command))
    });
    rows
}

/// Every node seen in any of the node families, by address.
fn node_rows(w: &Window<'_>) -> Vec<NodeRow> {
    let requests = w.rates_by("redcar_node_requests_total", "node");
    let errors = w.rates_by("redcar_node_errors_total", "node");
    let latency = w.latencies_by("redcar_node_duration_seconds", "node");
    let in_flight = w.current().by("redcar_node_in_flight", "node");
    let connections = w.current().by("redcar_node_connections", "node");
    let names: BTreeSet<&String> = requests
        .keys()
        .chain(errors.keys())
        .chain(latency.keys())
        .chain(in_flight.keys())
        .chain(connections.keys())
        .collect();
    names
        .into_iter()
        .map(|node| NodeRow {
            node: node.clone(),
            requests_per_sec: requests.get(node).copied().flatten(),
            errors_per_sec: or_zero(errors.get(node), requests.get(node)),
            latency: latency.get(node).copied().unwrap_or_default(),
            in_flight: in_flight.get(node).copied(),
            connections: connections.get(node).copied(),
        })
        .collect()
}

#[cfg(test)]
#[path = "stats_tests.rs"]
mod tests;
