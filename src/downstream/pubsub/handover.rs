//! Subscribe mode's part in an upgrade in place (docs/operations.md, "Subscribed clients"): a
//! subscribed client moves with its channels, patterns and shard channels, and the new process
//! subscribes them on its own node connections before the old one lets go (the two steps are
//! drawn in `handover/release.rs`). Pub/sub is at-most-once; this order trades the gap a plain
//! reconnect leaves for a few possible duplicates: the messages published while both processes
//! are subscribed can reach the client twice.
//!
//! The old process, once the upgrade starts: stops reading the client and starting commands;
//! at its safe point (no confirmation owed) it sends the record and a copy of the socket and
//! keeps forwarding messages; once the new process is subscribed it forwards for
//! [`LINGER`] more (messages already on their way through the cluster bus to the node it
//! listens on), writes what it holds, and lets go. The new process: subscribes everything
//! again as it would after a lost node connection (`lost.rs`, confirmations not shown), writes
//! nothing and reads nothing until released, then serves as usual, the messages it held first.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::super::handover::Subscriptions;
use super::waiting::{Lost, Orphan};
use super::SubscribeMode;

/// How long the old process goes on forwarding after the new one is subscribed: longer than a
/// message takes from the node it was published on to the node the old process listens on.
const LINGER: Duration = Duration::from_millis(20);

/// The old process's way to send its client over: the record (with `subscriptions` and the
/// unparsed input) and a copy of the socket. The receiver fires once the new process is
/// subscribed; `None` when the client could not be sent (it is closed, counted).
pub(crate) type Leave<'a> =
    &'a mut (dyn FnMut(Subscriptions, &[u8]) -> Option<oneshot::Receiver<()>> + Send);

/// A subscribed client the previous process handed over: what to subscribe again, and the
/// wake-up once that process has let go of it.
pub(crate) struct Rejoin {
    /// Channels, patterns and shard channels to subscribe again here.
    pub(crate) subscriptions: Subscriptions,
    /// Fires once the old process has written what it held and let go of the client.
    pub(crate) released: oneshot::Receiver<()>,
}

/// Where subscribe mode stands in an upgrade.
pub(super) enum Phase {
    /// Serving as usual.
    Serving,
    /// Old process: leaves at its next safe point; reads nothing more from the client.
    Leaving,
    /// Old process: sent; forwards messages until the new process is subscribed.
    Handed(oneshot::Receiver<()>),
    /// Old process: the new one is subscribed; forwards until then, then writes what it holds.
    Lingering(Instant),
    /// Old process: writes what it holds, takes no more messages, then lets go.
    LettingGo,
    /// New process: subscribing again; writes and reads nothing until released. `told`: the
    /// old process knows it is subscribed.
    Held {
        /// Fires once the old process let go: then this one writes and reads.
        released: oneshot::Receiver<()>,
        /// Whether the old process was told that this one is subscribed.
        told: bool,
    },
}

/// What a phase waited for.
pub(super) enum Woke {
    /// Old process: the new one subscribed the client.
    Subscribed,
    /// Old process: the time to keep forwarding after that is over.
    Lingered,
    /// New process: the old one let go of the client.
    Released,
}

impl Phase {
    /// The client's commands are read and started.
    pub(super) fn serves_commands(&self) -> bool {
        matches!(self, Phase::Serving)
    }

    /// What is owed to the client is written.
    pub(super) fn writes(&self) -> bool {
        !matches!(self, Phase::Held { .. })
    }

    /// Messages from the nodes are taken.
    pub(super) fn takes_pushes(&self) -> bool {
        !matches!(self, Phase::LettingGo)
    }

    /// Whether [`Phase::wait`] has something to wait for.
    pub(super) fn waits(&self) -> bool {
        matches!(
            self,
            Phase::Handed(_) | Phase::Lingering(_) | Phase::Held { .. }
        )
    }

    /// Until what this phase waits for happens (an error on the other side's end counts: the
    /// other process is gone, and nobody else writes to the client).
    pub(super) async fn wait(&mut self) -> Woke {
        match self {
            Phase::Handed(subscribed) => {
                let _ = subscribed.await;
                Woke::Subscribed
            }
            Phase::Lingering(until) => {
                tokio::time::sleep_until(*until).await;
                Woke::Lingered
            }
            Phase::Held { released, .. } => {
                let _ = released.await;
                Woke::Released
            }
            _ => std::future::pending().await,
        }
    }

    /// The next phase after `woke`.
    pub(super) fn after(&mut self, woke: Woke) {
        *self = match woke {
            Woke::Subscribed => Phase::Lingering(Instant::now() + LINGER),
            Woke::Lingered => Phase::LettingGo,
            Woke::Released => Phase::Serving,
        };
    }
}

// === impl Mode ===

impl SubscribeMode<'_> {
    /// A client handed over with `subscriptions`: every one waits to be subscribed again, as
    /// after a lost node connection (channels and patterns at once, shard channels at their
    /// slot's primary on the next tick).
    pub(super) fn rejoin(&mut self, subscriptions: Subscriptions) {
        let now = Instant::now();
        let nowhere: Arc<str> = Arc::from("");
        self.channels.extend(subscriptions.channels);
        self.patterns.extend(subscriptions.patterns);
        if !self.channels.is_empty() || !self.patterns.is_empty() {
            self.lost_global = Some(Lost {
                since: now,
                node: nowhere.clone(),
                next_try: now,
            });
        }
        for name in subscriptions.shard_channels {
            let orphan = Orphan {
                from: nowhere.clone(),
                lost: true,
                since: now,
            };
            self.orphans.insert(name, orphan);
        }
    }

    /// Everything the client is subscribed to, for its record (shard channels waiting for
    /// their slot's owner included).
    pub(super) fn subscriptions(&self) -> Subscriptions {
        Subscriptions {
            channels: self.channels.iter().cloned().collect(),
            patterns: self.patterns.iter().cloned().collect(),
            shard_channels: (self.shards.keys())
                .chain(self.orphans.keys())
                .cloned()
                .collect(),
        }
    }

    /// No confirmation owed to the client and no redirect to follow: it may leave.
    pub(super) fn at_safe_point(&self) -> bool {
        self.awaiting == 0 && self.redirect.is_none()
    }

    /// Every subscription is made on this process's connections and confirmed.
    pub(super) fn settled(&self) -> bool {
        self.lost_global.is_none()
            && self.global_swallow == 0
            && self.orphans.is_empty()
            && self.resubscribing.is_empty()
    }
}
