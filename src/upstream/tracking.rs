//! Client-side caching towards one node: the tracked lanes that carry the commands of clients
//! with `CLIENT TRACKING` on, and the node's invalidation connection they redirect to.
//!
//! The shared data connections never track (they multiplex many clients). Per node, on the
//! first command of a tracking client, two more connections are started (one per RESP version,
//! each connecting on its first command) whose handshake ends with `CLIENT TRACKING on REDIRECT
//! <id>` (default mode: every read on them is tracked), `<id>` being the node's **invalidation
//! connection** (`invalidation`), a RESP3 connection that only receives the node's `invalidate`
//! pushes and hands them to the `InvalidationSink` (the downstream table of who read what).
//!
//! When redcar may have missed an invalidation, it says so (`InvalidationSink::lost`): the
//! invalidation connection was lost (and again once it reconnected with a new id and the lanes
//! were pointed at it), or a tracked lane was lost (the node forgot what it tracked for that
//! connection; the lane reconnects on its next command). Tracked lanes never close for
//! idleness (`upstream.idle_timeout`), which would flush every tracking client.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{watch, Notify};

use super::conn;
use super::node_context::NodeContext;
use super::pending::Pending;
use super::queue;
use super::tracking_feed::{ProvenAt, TrackingFeed};
use crate::protocol::Protocol;

mod invalidation;

use super::tracked_lane::{LaneRedirect, Mode, TrackedLane};

/// One node's tracked lanes (default tracking, and the near cache's BCAST lanes, each in RESP2
/// and RESP3) and its invalidation connection's task.
pub(super) struct NodeTracking {
    lanes: Arc<[TrackedLane; 4]>,
    /// The BCAST prefixes the invalidation connection has confirmed.
    registered: watch::Receiver<Vec<Bytes>>,
    /// How recently the invalidation connection proved it missed nothing (heartbeat on).
    heard: Arc<ProvenAt>,
}

/// The BCAST prefixes one node confirmed on its invalidation connection.
pub(crate) struct BcastRegistered(watch::Receiver<Vec<Bytes>>);

impl BcastRegistered {
    /// Waits until the node confirmed a registration covering every one of `prefixes` (`""`:
    /// every key); false if the node's tracking went away.
    pub(crate) async fn covers(mut self, prefixes: &[Bytes]) -> bool {
        let covered = |registered: &Vec<Bytes>| covered(registered, prefixes);
        self.0.wait_for(covered).await.is_ok()
    }

    /// Whether the node confirmed a registration covering every one of `prefixes` already.
    pub(crate) fn covers_now(&self, prefixes: &[Bytes]) -> bool {
        covered(&self.0.borrow(), prefixes)
    }
}

fn covered(registered: &[Bytes], prefixes: &[Bytes]) -> bool {
    prefixes
        .iter()
        .all(|p| registered.iter().any(|q| p.starts_with(q)))
}

impl NodeTracking {
    /// Starts the invalidation connection and the two lanes (which connect on first use).
    /// `resp2` and `resp3`: the node's contexts for its RESP2 and RESP3 data connections.
    pub(super) fn start(
        resp2: &NodeContext,
        resp3: &Arc<NodeContext>,
        feed: &Arc<TrackingFeed>,
    ) -> NodeTracking {
        let (id, ids) = watch::channel(None);
        let (confirmed, registered) = watch::channel(Vec::new());
        let wake = Arc::new(Notify::new());
        let runtime = tokio::runtime::Handle::current();
        let lane = |context: &NodeContext, mode: Mode| {
            let redirect = Arc::new(LaneRedirect {
                addr: context.addr.clone(),
                mode,
                id: ids.clone(),
                wake: wake.clone(),
                timeout: context.config.connect_timeout,
                feed: feed.clone(),
                connected: AtomicBool::new(false),
            });
            let handshake = context.handshake.clone().with_tracking(redirect.clone());
            let mut context = context.with_handshake(handshake);
            context.config.idle_timeout = Duration::ZERO;
            TrackedLane {
                queue: conn::spawn(&runtime, Arc::new(context)),
                redirect,
            }
        };
        let lanes = Arc::new([
            lane(resp2, Mode::Tracked),
            lane(resp3, Mode::Tracked),
            lane(resp2, Mode::Near),
            lane(resp3, Mode::Near),
        ]);
        let heard = Arc::new(ProvenAt::default());
        runtime.spawn(invalidation::run(
            resp3.clone(),
            invalidation::Published {
                id,
                registered: confirmed,
                heard: heard.clone(),
                wake,
            },
            Arc::downgrade(&lanes),
            feed.clone(),
        ));
        NodeTracking {
            lanes,
            registered,
            heard,
        }
    }

    pub(super) fn bcast_registered(&self) -> BcastRegistered {
        BcastRegistered(self.registered.clone())
    }

    pub(super) fn heard(&self) -> &Arc<ProvenAt> {
        &self.heard
    }

    /// The tracked lane for clients speaking `protocol`; `near`: the near cache's BCAST lane.
    pub(super) fn lane(&self, protocol: Protocol, near: bool) -> &queue::Sender<Pending> {
        let index = match protocol {
            Protocol::Resp2 => 0,
            Protocol::Resp3 => 1,
        } + if near { 2 } else { 0 };
        &self.lanes[index].queue
    }
}
