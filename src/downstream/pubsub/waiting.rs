//! Subscriptions waiting to be made again: a shard channel whose slot moved or whose connection
//! was lost, and the channels and patterns of a lost connection.

use std::sync::Arc;

use tokio::time::Instant;

/// A shard channel subscribed nowhere for now.
pub(super) struct Orphan {
    /// The node that held it.
    pub(super) from: Arc<str>,
    /// Its connection was lost (the same node may take it again); otherwise its slot moved.
    pub(super) lost: bool,
    /// Since when (the gap, put on record when it is subscribed again).
    pub(super) since: Instant,
}

/// The channels and patterns are to be subscribed again: since when, not on which node, and
/// when to try next.
pub(super) struct Lost {
    /// When the connection was lost: the start of the gap measured at resubscription.
    pub(super) since: Instant,
    /// The node lost, avoided when another primary can take the subscriptions.
    pub(super) node: Arc<str>,
    /// When to try again after a failed attempt.
    pub(super) next_try: Instant,
}
