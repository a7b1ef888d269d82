//! Request mirroring series: copies sent, failed and dropped, by mirror backend (every backend
//! has them at 0 from start-up: `backends` asks for each backend's counters).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::metrics::MetricGroup;

/// `backend`: the mirror backend's configured name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabel {
    backend: String,
}

/// The three families; a route takes its handles once (at start-up or reload), so a mirrored
/// command only does atomic adds.
#[derive(Default)]
pub(crate) struct MirrorMetrics {
    /// `mirror_sent{backend}`.
    sent: Family<BackendLabel, Counter>,
    /// `mirror_errors{backend}`.
    errors: Family<BackendLabel, Counter>,
    /// `mirror_dropped{backend}`.
    dropped: Family<BackendLabel, Counter>,
}

/// One mirror backend's counters.
#[derive(Clone, Debug, Default)]
pub(crate) struct MirrorCounters {
    /// Copies queued on the mirror backend.
    pub(crate) sent: Counter,
    /// Copies that failed or timed out; the client never sees them.
    pub(crate) errors: Counter,
    /// Copies not sent (no map, no usable node, or over the mirror's in-flight bound).
    pub(crate) dropped: Counter,
}

impl MetricGroup for MirrorMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "mirror_sent",
            "Copies of commands queued on a mirror backend",
            self.sent.clone(),
        );
        registry.register(
            "mirror_errors",
            "Mirrored copies that failed or timed out (the client never sees them)",
            self.errors.clone(),
        );
        registry.register(
            "mirror_dropped",
            "Copies not sent: the mirror had no map, no usable node, or too many in flight",
            self.dropped.clone(),
        );
    }
}

impl MirrorMetrics {
    /// The counters for mirror backend `backend`.
    pub(crate) fn counters(&self, backend: &str) -> MirrorCounters {
        let label = BackendLabel {
            backend: backend.to_string(),
        };
        MirrorCounters {
            sent: self.sent.get_or_create(&label).clone(),
            errors: self.errors.get_or_create(&label).clone(),
            dropped: self.dropped.get_or_create(&label).clone(),
        }
    }
}
