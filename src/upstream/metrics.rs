//! The series `upstream` produces: per-node requests, replies, latency, connections and
//! ejections (handed out once per node as a [`NodeMetrics`]), and the dedicated-connection pool.
//!
//! Every series carries one label, `node` (the node's address as the slot map gives it), so the
//! number of series is bounded by the nodes redcar has used, and a node's series are dropped when
//! it leaves the map. The hot path touches only handles taken once per node ([`NodeMetrics`]),
//! never the families' maps: a family look-up hashes the label and takes a lock. The names
//! registered here are part of what users see and must not change.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::{EventLog, LatencyHistogram, MetricGroup};

/// The one label of every per-node series: the node's `host:port`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabel {
    node: String,
}

/// The per-node families and the pool's figures.
#[derive(Default)]
pub(crate) struct UpstreamMetrics {
    /// `node_requests`: commands written to the node, counted once per write batch.
    requests: Family<NodeLabel, Counter>,
    /// `node_errors`: connection failures and replies lost with a connection.
    errors: Family<NodeLabel, Counter>,
    /// Per reply on the hot path, and read back by the status page: the lock-free kind.
    duration: Family<NodeLabel, LatencyHistogram>,
    /// `node_replies`: reply frames received from the node.
    replies: Family<NodeLabel, Counter>,
    /// `node_latency_microseconds`: the sum of write-to-reply times, so `rate(latency) /
    /// rate(replies)` is the mean without reading the histogram.
    latency_us: Family<NodeLabel, Counter>,
    /// `node_in_flight`: commands written or queued and not yet answered.
    in_flight: Family<NodeLabel, Gauge>,
    /// `node_connections`: open pipelined connections to the node.
    connections: Family<NodeLabel, Gauge>,
    /// `node_ejections`: times outlier detection took the node out of selection.
    ejections: Family<NodeLabel, Counter>,
    /// `node_ejected`: 1 while the node is out of selection.
    ejected: Family<NodeLabel, Gauge>,
    /// `node_in_flight_capped`: batches that hit `upstream.max_in_flight_per_connection`.
    in_flight_capped: Family<NodeLabel, Counter>,
    /// Commands sent to any node (not exported: the sum of `node_requests`); the retry budget's
    /// measure of traffic.
    requests_sent: Counter,
    /// Dedicated connections (blocking commands, WATCH, pub/sub) lent to a client right now.
    pub(crate) dedicated_busy: Gauge,
    /// Dedicated connections kept open for reuse.
    pub(crate) dedicated_idle: Gauge,
    /// Requests for a dedicated connection that found the pool exhausted (failed or waited out).
    pub(crate) dedicated_exhausted: Counter,
}

/// One node's series, created once per node.
#[derive(Clone, Debug)]
pub(crate) struct NodeMetrics {
    /// Commands written to this node; incremented once per batch by the connection.
    pub(crate) requests: Counter,
    /// Connection failures and lost replies on this node's connections.
    pub(crate) errors: Counter,
    /// Write-to-reply time per reply, fed through a per-connection local histogram.
    pub(crate) duration: LatencyHistogram,
    /// Reply frames received.
    pub(crate) replies: Counter,
    /// Sum of write-to-reply times in microseconds; see [`NodeMetrics::mean_latency_us`].
    latency_us: Counter,
    /// Commands awaiting a reply: up when a batch is counted, down as replies arrive or a failure
    /// drains what was in flight.
    pub(crate) in_flight: Gauge,
    /// Open connections to the node (pipelined ones; dedicated ones are counted by the pool).
    pub(crate) connections: Gauge,
    /// Outlier detection's figures (off the command path).
    pub(crate) ejection: EjectionSeries,
    /// Batches that filled a connection up to `upstream.max_in_flight_per_connection`.
    pub(crate) in_flight_capped: Counter,
    /// Shared by every node: commands sent anywhere.
    pub(crate) all_requests: Counter,
}

/// A node's ejections from selection (outlier detection): counted, flagged while out, and
/// recorded with their reason.
#[derive(Clone, Debug)]
pub(crate) struct EjectionSeries {
    /// Times the node was ejected.
    pub(crate) ejections: Counter,
    /// 1 while the node is out.
    pub(crate) ejected: Gauge,
    /// Where ejections and restorations are recorded.
    pub(crate) events: Arc<EventLog>,
}

/// A node's series, made on first use: a node of a big map that redcar never sends to (a
/// replica no read policy reads, a shard no client's keys hash to) has none: ten series and a
/// histogram per node would be most of what a known node costs (docs/scale.md).
pub(crate) struct NodeSeries {
    /// The node's address, the series' label.
    addr: Arc<str>,
    /// The families the series are made in.
    group: Arc<UpstreamMetrics>,
    /// Handed to the node's ejection series.
    events: Arc<EventLog>,
    /// Boxed: a node never used holds only the pointer's room (the series' handles are ~100
    /// bytes).
    made: OnceLock<Box<NodeMetrics>>,
}

impl NodeSeries {
    /// `addr`'s series in `group`, not made yet; ejections are recorded in `events`.
    pub(crate) fn new(addr: Arc<str>, group: Arc<UpstreamMetrics>, events: Arc<EventLog>) -> Self {
        NodeSeries {
            addr,
            group,
            events,
            made: OnceLock::new(),
        }
    }

    /// The series, made now if they were not.
    pub(crate) fn get(&self) -> &NodeMetrics {
        self.made
            .get_or_init(|| Box::new(self.group.node(&self.addr, &self.events)))
    }

    /// The series if the node was used (nothing counted otherwise).
    #[inline]
    pub(crate) fn made(&self) -> Option<&NodeMetrics> {
        self.made.get().map(|made| &**made)
    }
}

impl NodeMetrics {
    /// Records `count` replies (one read's worth) that took `latency` in total; the histogram is
    /// fed per reply by the caller.
    ///
    /// Called once per read by the connection (`Wire::deliver`), never per reply; `in_flight` falls
    /// by `count` here, matching the rise when the batch was counted.
    pub(crate) fn record_replies(&self, count: u64, latency: Duration) {
        if count == 0 {
            return;
        }
        self.replies.inc_by(count);
        self.latency_us
            .inc_by(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
        self.in_flight.dec_by(count as i64);
    }

    /// Mean write-to-reply time so far, in microseconds.
    ///
    /// `None` before the first reply. Shown per node on `/topology`; it is the mean since
    /// start, so it moves slowly and is no substitute for the histogram's recent quantiles.
    pub(crate) fn mean_latency_us(&self) -> Option<u64> {
        let replies = self.replies.get();
        (replies > 0).then(|| self.latency_us.get() / replies)
    }
}

impl MetricGroup for UpstreamMetrics {
    fn register(&self, r: &mut Registry) {
        r.register(
            "node_requests",
            "Commands sent to a node",
            self.requests.clone(),
        );
        r.register(
            "node_errors",
            "Connection failures and lost replies, by node",
            self.errors.clone(),
        );
        r.register(
            "node_duration_seconds",
            "Write to reply on a node connection",
            self.duration.clone(),
        );
        r.register(
            "node_replies",
            "Replies received from a node",
            self.replies.clone(),
        );
        r.register(
            "node_latency_microseconds",
            "Sum of write-to-reply times on a node (divide by node_replies for the mean)",
            self.latency_us.clone(),
        );
        r.register(
            "node_in_flight",
            "Commands awaiting a reply from a node",
            self.in_flight.clone(),
        );
        r.register(
            "node_connections",
            "Open connections to a node",
            self.connections.clone(),
        );
        r.register(
            "node_ejections",
            "Times a node was ejected from selection after consecutive failures",
            self.ejections.clone(),
        );
        r.register(
            "node_ejected",
            "1 while a node is ejected from selection (outlier detection), else 0",
            self.ejected.clone(),
        );
        r.register(
            "node_in_flight_capped",
            "Write batches that filled a node connection to upstream.max_in_flight_per_connection (it then waits for replies before taking more)",
            self.in_flight_capped.clone(),
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
    }
}

impl UpstreamMetrics {
    /// The series for one node (created on first use); ejections are recorded in `events`.
    pub(crate) fn node(&self, addr: &str, events: &Arc<EventLog>) -> NodeMetrics {
        let label = NodeLabel {
            node: addr.to_string(),
        };
        NodeMetrics {
            requests: self.requests.get_or_create_owned(&label),
            errors: self.errors.get_or_create_owned(&label),
            duration: self.duration.get_or_create_owned(&label),
            replies: self.replies.get_or_create_owned(&label),
            latency_us: self.latency_us.get_or_create_owned(&label),
            in_flight: self.in_flight.get_or_create_owned(&label),
            connections: self.connections.get_or_create_owned(&label),
            ejection: EjectionSeries {
                ejections: self.ejections.get_or_create_owned(&label),
                ejected: self.ejected.get_or_create_owned(&label),
                events: events.clone(),
            },
            in_flight_capped: self.in_flight_capped.get_or_create_owned(&label),
            all_requests: self.requests_sent.clone(),
        }
    }

    /// Drops a node's series once redcar no longer knows the node (it left the cluster, or is
    /// a failed replica), so dashboards do not show a gone node as stuck ejected or busy.
    pub(crate) fn forget_node(&self, addr: &str) {
        let label = NodeLabel {
            node: addr.to_string(),
        };
        self.requests.remove(&label);
        self.errors.remove(&label);
        self.duration.remove(&label);
        self.replies.remove(&label);
        self.latency_us.remove(&label);
        self.in_flight.remove(&label);
        self.connections.remove(&label);
        self.ejections.remove(&label);
        self.ejected.remove(&label);
        self.in_flight_capped.remove(&label);
    }

    /// What the status page samples of `addr`: requests, errors and latency buckets; `None`
    /// for a node whose series were never made (never used). Makes nothing.
    pub(crate) fn sample(&self, addr: &str) -> Option<(u64, u64, crate::metrics::BucketCounts)> {
        let label = NodeLabel {
            node: addr.to_string(),
        };
        let requests = self.requests.get(&label)?.get();
        let errors = self.errors.get(&label).map_or(0, |c| c.get());
        let buckets = self.duration.get(&label)?.buckets();
        Some((requests, errors, buckets))
    }

    /// Commands sent to any node so far.
    pub(crate) fn requests_sent(&self) -> u64 {
        self.requests_sent.get()
    }
}
