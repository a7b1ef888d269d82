//! The series subscribe mode produces: the subscriptions redcar made again by itself after the
//! node holding them went away (or, for shard channels, after their slot moved), and how long
//! the client's subscriptions were not in place.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::metrics::{LatencyHistogram, MetricGroup};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    /// `channel` (channels and patterns) or `shard` (a shard channel).
    kind: &'static str,
}

/// Re-subscriptions: one per lost channel-and-pattern connection (`kind="channel"`), one per
/// shard channel (`kind="shard"`); and each one's gap, from the loss (or the node's
/// `sunsubscribe`) to the new node's confirmation.
pub(crate) struct PubsubMetrics {
    /// Resubscriptions, by kind.
    resubscribes: Family<KindLabel, Counter>,
    /// Each resubscription's gap, from the loss to the new node's confirmation.
    gap: LatencyHistogram,
    /// Messages the new node delivered again after a re-subscription, dropped (`echoes.rs`).
    echoes: Counter,
}

impl Default for PubsubMetrics {
    /// Both kinds' counters exist from the start (a family without a child is not exported).
    fn default() -> PubsubMetrics {
        let resubscribes = Family::<KindLabel, Counter>::default();
        for kind in ["channel", "shard"] {
            resubscribes.get_or_create(&KindLabel { kind }).inc_by(0);
        }
        PubsubMetrics {
            resubscribes,
            gap: LatencyHistogram::default(),
            echoes: Counter::default(),
        }
    }
}

impl MetricGroup for PubsubMetrics {
    fn register(&self, r: &mut Registry) {
        r.register(
            "pubsub_resubscribes",
            "Subscriptions redcar made again on another node after the one holding them was lost or, for shard channels, their slot moved: kind=channel per connection of channels and patterns, kind=shard per shard channel",
            self.resubscribes.clone(),
        );
        r.register(
            "pubsub_resubscribe_gap_seconds",
            "From losing a subscription (its node's connection, or the slot's sunsubscribe) to the new node's confirmation; messages published meanwhile were not delivered",
            self.gap.clone(),
        );
        r.register(
            "pubsub_echoes_dropped",
            "Messages the node holding re-subscribed channels and patterns delivered again after the lost node had already delivered them (the cluster bus is asynchronous), dropped so that no client gets a message twice",
            self.echoes.clone(),
        );
    }
}

impl PubsubMetrics {
    /// A re-subscription of `kind` (`channel` or `shard`) is in place, `gap` after the loss.
    pub(crate) fn resubscribed(&self, kind: &'static str, gap: Duration) {
        self.resubscribes.get_or_create(&KindLabel { kind }).inc();
        self.gap.observe(gap.as_secs_f64());
    }

    /// A message repeated by the node subscribed after a loss was dropped.
    pub(crate) fn echo_dropped(&self) {
        self.echoes.inc();
    }
}
