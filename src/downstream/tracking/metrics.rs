//! The series client-side caching (`downstream::tracking`) produces: tracking clients, the
//! tracking table, invalidations delivered, flushes by cause and broken redirects.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::{FlushCause, MetricGroup};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    /// `key` (one key to one client) or `flush` (one null invalidation to one client).
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    /// `topology`, `connection_lost`, `node_flush` or `slow_client`.
    cause: &'static str,
}

/// Client-side caching's figures; cheap to clone (the tracking hub keeps a copy).
#[derive(Clone, Default)]
pub(crate) struct TrackingMetrics {
    /// Sessions with `CLIENT TRACKING` on now.
    pub(crate) clients: Gauge,
    /// Keys in the tracking table now.
    pub(crate) keys: Gauge,
    /// `tracking_invalidations{kind}`.
    invalidations: Family<KindLabel, Counter>,
    /// `tracking_flushes{cause}`.
    flushes: Family<CauseLabel, Counter>,
    /// Keys evicted because the table was full (`client.tracking_table_max_keys`).
    pub(crate) evicted: Counter,
    /// Sessions told their REDIRECT target is gone (`tracking-redir-broken`).
    pub(crate) redirects_broken: Counter,
}

impl MetricGroup for TrackingMetrics {
    fn register(&self, r: &mut Registry) {
        r.register(
            "tracking_clients",
            "Clients with CLIENT TRACKING on",
            self.clients.clone(),
        );
        r.register(
            "tracking_keys",
            "Keys in the tracking table (read by tracking clients since their last invalidation)",
            self.keys.clone(),
        );
        r.register(
            "tracking_invalidations",
            "Invalidations delivered to clients, by kind (key: one key to one client; flush: one null invalidation to one client)",
            self.invalidations.clone(),
        );
        r.register(
            "tracking_flushes",
            "Flush orders, by cause (topology, connection_lost, node_flush: every tracking client; slow_client: one client whose queue of invalidations overflowed)",
            self.flushes.clone(),
        );
        // Every series exists from the start, at 0.
        for kind in ["key", "flush"] {
            self.invalidation(kind);
        }
        for cause in FlushCause::ALL {
            self.flush(cause.label());
        }
        self.flush("slow_client");
        r.register(
            "tracking_keys_evicted",
            "Keys evicted (and invalidated) because the tracking table was full (client.tracking_table_max_keys)",
            self.evicted.clone(),
        );
        r.register(
            "tracking_redirects_broken",
            "Tracking clients told that the client they redirect to is gone",
            self.redirects_broken.clone(),
        );
    }
}

impl TrackingMetrics {
    /// `keys` invalidated keys delivered to clients.
    pub(crate) fn keys_delivered(&self, keys: usize) {
        self.invalidation("key").inc_by(keys as u64);
    }

    /// `clients` null invalidations delivered.
    pub(crate) fn flushes_delivered(&self, clients: usize) {
        self.invalidation("flush").inc_by(clients as u64);
    }

    /// Every tracking client was told to flush because of `cause`.
    pub(crate) fn flushed(&self, cause: FlushCause) {
        self.flush(cause.label()).inc();
    }

    /// One client's queue of invalidations overflowed: it was told to flush instead.
    pub(crate) fn slow_client(&self) {
        self.flush("slow_client").inc();
    }

    fn invalidation(&self, kind: &'static str) -> Counter {
        self.invalidations.get_or_create_owned(&KindLabel { kind })
    }

    fn flush(&self, cause: &'static str) -> Counter {
        self.flushes.get_or_create_owned(&CauseLabel { cause })
    }
}
