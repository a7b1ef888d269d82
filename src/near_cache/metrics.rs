//! The series the near cache (`near_cache`) produces: hits, misses, fills, invalidations,
//! evictions, flushes by cause, and what it holds.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::{FlushCause, MetricGroup};

/// The `cause` label of `redcar_near_cache_flushes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    /// `topology`, `connection_lost` or `node_flush` (`FlushCause::label`).
    cause: &'static str,
}

/// The near cache's figures; cheap to clone (the cache keeps a copy).
#[derive(Clone, Default)]
pub(crate) struct NearCacheMetrics {
    /// Reads answered from memory.
    pub(crate) hits: Counter,
    /// Cacheable reads sent to a node (not cached, expired, or the node silent too long).
    pub(crate) misses: Counter,
    /// Replies stored after a miss.
    pub(crate) fills: Counter,
    /// Misses that waited for the same read already on its way instead of sending their own.
    pub(crate) coalesced: Counter,
    /// Entries dropped because a node said the key changed, or a write went through redcar.
    pub(crate) invalidations: Counter,
    /// Entries dropped to stay within `near_cache.max_bytes`.
    pub(crate) evictions: Counter,
    /// Whole-cache drops by cause; every cause is created at registration, so each starts at 0.
    flushes: Family<CauseLabel, Counter>,
    /// Bytes held (replies, keys, bookkeeping), sampled every second.
    pub(crate) bytes: Gauge,
    /// Keys held, sampled every second.
    pub(crate) entries: Gauge,
}

impl MetricGroup for NearCacheMetrics {
    /// Registered whether or not the near cache is on, so dashboards see zeros rather than gaps.
    fn register(&self, r: &mut Registry) {
        r.register(
            "near_cache_hits",
            "Reads answered from the near cache",
            self.hits.clone(),
        );
        r.register(
            "near_cache_misses",
            "Cacheable reads sent to a node (not cached, expired, or its node silent longer than near_cache.max_silence)",
            self.misses.clone(),
        );
        r.register(
            "near_cache_fills",
            "Replies stored in the near cache after a miss",
            self.fills.clone(),
        );
        r.register(
            "near_cache_coalesced",
            "Near cache misses that waited for the same read already on its way to the node instead of sending their own",
            self.coalesced.clone(),
        );
        r.register(
            "near_cache_invalidations",
            "Near cache entries dropped because the key changed (a node's invalidation, or a write through redcar)",
            self.invalidations.clone(),
        );
        r.register(
            "near_cache_evictions",
            "Near cache entries dropped to stay within near_cache.max_bytes",
            self.evictions.clone(),
        );
        r.register(
            "near_cache_flushes",
            "Times the whole near cache was dropped, by cause (topology, connection_lost, node_flush)",
            self.flushes.clone(),
        );
        // Every series exists from the start, at 0.
        for cause in FlushCause::ALL {
            self.flushes.get_or_create_owned(&CauseLabel {
                cause: cause.label(),
            });
        }
        r.register(
            "near_cache_bytes",
            "Bytes the near cache holds (sampled every second)",
            self.bytes.clone(),
        );
        r.register(
            "near_cache_entries",
            "Keys the near cache holds (sampled every second)",
            self.entries.clone(),
        );
    }
}

impl NearCacheMetrics {
    /// The whole cache was dropped because of `cause`.
    /// Counts one flush; the entries dropped are not counted as invalidations or evictions.
    pub(crate) fn flushed(&self, cause: FlushCause) {
        self.flushes
            .get_or_create(&CauseLabel {
                cause: cause.label(),
            })
            .inc();
    }
}
