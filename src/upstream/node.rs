//! One cluster node: a fixed set of pipelined connections used round-robin (which one carries a
//! lane: `lanes`), and the handles that await a queued command's reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;

use super::conn;
use super::health::Health;
use super::inbox::Inbox;
use super::metrics::NodeSeries;
use super::node_context::NodeContext;
use super::pending::{Pending, ReplyTo};
use super::queue;
use super::reply_slot::{self, ReplyReceiver};
use super::standby::Standby;
use super::tracking::NodeTracking;
use super::tracking_feed::TrackingFeed;
use super::Lane;
use super::{ConnectLimit, UpstreamConfig, UpstreamError};
use crate::protocol::Limits;

mod lanes;

/// What every node's connections share beyond the node's own address: one per registry, made
/// with the first node (after the workers and loops are set).
pub(super) struct NodeShared {
    /// `upstream:` as at start-up.
    pub(crate) config: UpstreamConfig,
    /// Parse limits for node replies.
    pub(crate) limits: Limits,
    /// `upstream.max_connects_per_second`, shared by every node.
    pub(crate) connect_limit: Arc<ConnectLimit>,
    /// Bumped on every ejection of any node (health checker, topology refresher).
    pub(crate) ejections: Arc<tokio::sync::watch::Sender<u64>>,
    /// What each pipelined connection sends first (AUTH, READONLY).
    pub(crate) handshake: super::Handshake,
    /// The same for the RESP3 connections (`HELLO 3` added).
    pub(crate) handshake3: super::Handshake,
    /// `upstream.tls`, when on.
    pub(crate) tls: Option<super::UpstreamTls>,
    /// `upstream.outlier` as it is now (a reload may swap it).
    pub(crate) outlier: Arc<arc_swap::ArcSwap<super::OutlierConfig>>,
    /// `threading: per-core`: the workers' runtimes; the node's connections are spread over them.
    pub(crate) workers: Option<Arc<[tokio::runtime::Handle]>>,
    /// Per core with event loops: the loops that drive the node's connections instead.
    pub(crate) loops: Option<Arc<[Arc<crate::reactor::Remote>]>>,
    /// Where the node's invalidations go once a tracking client uses it.
    pub(crate) tracking: Arc<TrackingFeed>,
    /// The per-node series' families, and where ejections are recorded.
    pub(crate) series: Arc<super::UpstreamMetrics>,
    pub(crate) events: Arc<crate::metrics::EventLog>,
}

/// A handle to one node's connections. Cheap to share (`Arc<Node>`); the connection tasks end when
/// the last handle is dropped and their in-flight replies are delivered.
///
/// A node costs little until it is used: its connections (tasks, or connections on the workers'
/// loops, with their buffers), their shared context and its metric series are made by the first
/// command sent to it. A big map's nodes that redcar never sends to (replicas under
/// `read_policy: primary`, shards no client's keys hash to) hold only this struct, their health
/// and standby flags, so a map of a thousand nodes costs little more than the ones in use
/// (docs/scale.md).
pub(crate) struct Node {
    addr: Arc<str>,
    /// One queue per connection task; each task owns its socket. Unbounded because each client
    /// is already bounded by `client.max_in_flight`, and queueing must never wait (ordering).
    /// Started on the first command.
    conns: OnceLock<Box<[queue::Sender<Pending>]>>,
    /// The same number of RESP3 connections, for RESP3 clients' commands: started on the first
    /// such command, so a deployment without RESP3 clients never opens them.
    conns3: OnceLock<Box<[queue::Sender<Pending>]>>,
    /// What starting the connections needs.
    start: Box<NodeStart>,
    /// Worker runtimes the connections are spread over: 1 with the shared runtime; per core,
    /// connection `i` lives on worker `i % workers` (see `lanes::connection_for`).
    workers: usize,
    health: Arc<Health>,
    /// Set while the current slot map gives the node nothing to serve (see `standby`).
    standby: Arc<Standby>,
    /// The tracked lanes and invalidation connection, started by the first tracking client.
    tracking: OnceLock<NodeTracking>,
}

impl Node {
    /// A node at `addr`; nothing is started, connected or counted until its first command.
    pub(super) fn new(addr: &str, shared: &Arc<NodeShared>) -> Node {
        let addr: Arc<str> = Arc::from(addr);
        let series = Arc::new(NodeSeries::new(
            addr.clone(),
            shared.series.clone(),
            shared.events.clone(),
        ));
        let health = Arc::new(Health::new(
            addr.clone(),
            shared.outlier.clone(),
            series.clone(),
            shared.ejections.clone(),
        ));
        // The shared runtime's connections are tasks on the runtime that made the node.
        let runtime = match (&shared.workers, &shared.loops) {
            (None, None) => tokio::runtime::Handle::try_current().ok(),
            _ => None,
        };
        Node {
            addr,
            conns: OnceLock::new(),
            conns3: OnceLock::new(),
            start: Box::new(NodeStart {
                shared: shared.clone(),
                series,
                runtime,
                contexts: OnceLock::new(),
            }),
            workers: shared.workers.as_ref().map_or(1, |handles| handles.len()),
            health,
            standby: Arc::new(Standby::default()),
            tracking: OnceLock::new(),
        }
    }

    /// Puts the node on standby while the slot map gives it nothing to serve (a replica that no
    /// read policy reads): its pooled connections then close once idle for a second instead of
    /// `upstream.idle_timeout`. It still takes any command sent to it.
    pub(crate) fn set_standby(&self, on: bool) {
        self.standby.set(on);
    }

    /// The node's series; `None` until its first command (a node never used has none).
    pub(crate) fn metrics(&self) -> Option<&super::NodeMetrics> {
        self.start.series.made()
    }

    /// Whether the node's RESP2 connections were started (tests).
    #[cfg(test)]
    pub(crate) fn started(&self) -> bool {
        self.conns.get().is_some()
    }

    /// The node's series, made now as its first command would (tests).
    #[cfg(test)]
    pub(crate) fn metrics_now(&self) -> &super::NodeMetrics {
        self.start.series.get()
    }

    /// Whether the node takes traffic, and how loaded it is.
    pub(crate) fn health(&self) -> &Health {
        &self.health
    }

    /// True while outlier detection keeps the node out of selection.
    #[inline]
    pub(crate) fn is_ejected(&self) -> bool {
        self.health.is_ejected()
    }

    /// The `host:port` this node was created for.
    pub(crate) fn addr(&self) -> &Arc<str> {
        &self.addr
    }

    /// Queues one encoded command (preceded by `ASKING` when `asking`) on a connection right
    /// now, without waiting, and returns the handle to await its reply frame. Queueing is
    /// synchronous so commands reach the connection in exactly the order callers sent them.
    ///
    /// `lane` picks the connection: a client always passes the same lane, so its commands to one
    /// node travel over one connection and run in the order it sent them (Redis's per-connection
    /// ordering), while different clients spread evenly over the connections (never LIFO).
    pub(crate) fn send(&self, payload: Bytes, asking: bool, lane: Lane) -> Reply {
        self.send_frames(payload, asking, lane, 1)
    }

    /// [`send`](Self::send) for a payload of several commands written contiguously (a whole
    /// `MULTI … EXEC`): resolves once all `frames` replies are in, as one slice.
    pub(crate) fn send_frames(
        &self,
        payload: Bytes,
        asking: bool,
        lane: Lane,
        frames: u32,
    ) -> Reply {
        Reply {
            queued: self.queue(payload, asking, lane, frames),
            addr: self.addr.clone(),
        }
    }

    /// [`send_frames`](Self::send_frames) for a caller that keeps the node at hand: the handle
    /// does not copy the node's address (a reference count every thread would write per
    /// command); [`Queued::poll_from`] takes the node instead.
    pub(crate) fn queue(&self, payload: Bytes, asking: bool, lane: Lane, frames: u32) -> Queued {
        let (reply, receive) = reply_slot::channel();
        let pending = Pending {
            payload,
            asking,
            frames,
            reply: ReplyTo::Slot(reply),
        };
        let sent = self.connection(lane).send(pending);
        Queued {
            receive: sent.is_ok().then_some(receive),
        }
    }

    /// Queues one encoded command whose reply goes to a client session's `inbox` (see
    /// `upstream::inbox`), and returns its number there; `NotSent` when the connection task was
    /// gone (the number is already given back).
    pub(crate) fn queue_into(
        &self,
        inbox: &mut Inbox,
        payload: Bytes,
        lane: Lane,
    ) -> Result<u64, UpstreamError> {
        let delivery = inbox.reserve();
        let seq = delivery.seq();
        let pending = Pending {
            payload,
            asking: false,
            frames: 1,
            reply: ReplyTo::Inbox(delivery),
        };
        match self.connection(lane).send(pending) {
            Ok(()) => Ok(seq),
            Err(refused) => {
                if let ReplyTo::Inbox(delivery) = refused.reply {
                    // Not a failure to report through the inbox: the caller learns it here.
                    drop(delivery.take());
                }
                inbox.forget(seq);
                Err(task_stopped(&self.addr))
            }
        }
    }

    /// What a command queued into an inbox gets when its connection task ended without
    /// replying (the inbox only says the delivery was dropped).
    pub(crate) fn closed_without_reply(&self) -> UpstreamError {
        ended_before_replying(&self.addr)
    }

    /// [`send`](Self::send), then wait for the reply.
    pub(crate) async fn call(
        &self,
        payload: Bytes,
        asking: bool,
        lane: Lane,
    ) -> Result<Bytes, UpstreamError> {
        self.send(payload, asking, lane).await
    }

    /// Starts the node's invalidation connection and tracked lanes if they are not yet (BCAST
    /// clients hear of writes on every primary, whether they sent it anything or not).
    pub(crate) fn start_tracking(&self) {
        self.tracked_lane(Lane::resp2(0).tracked(true));
    }

    /// How recently the node's invalidation connection proved it missed nothing (`None` before
    /// `start_tracking`; see [`ProvenAt`](super::ProvenAt)).
    pub(crate) fn heard(&self) -> Option<Arc<super::ProvenAt>> {
        self.tracking.get().map(|t| t.heard().clone())
    }

    /// What the node confirmed of the BCAST prefixes (`None` before `start_tracking`).
    pub(crate) fn bcast_registered(&self) -> Option<super::BcastRegistered> {
        self.tracking.get().map(NodeTracking::bcast_registered)
    }
}

/// A command queued on a node connection; resolves to its reply frame. The caller bounds the
/// wait with its own deadline.
pub(crate) struct Reply {
    queued: Queued,
    addr: Arc<str>,
}

impl Future for Reply {
    type Output = Result<Bytes, UpstreamError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Reply { queued, addr } = &mut *self;
        queued.poll_with(cx, addr)
    }
}

/// A [`Reply`] without the node's address, polled with the node it was queued on.
pub(crate) struct Queued {
    /// `None` when the connection task was gone, so nothing was sent.
    receive: Option<ReplyReceiver>,
}

impl Queued {
    /// A [`Reply`] that names `node` (the node it was queued on) on its own.
    pub(crate) fn into_reply(self, node: &Node) -> Reply {
        Reply {
            queued: self,
            addr: node.addr.clone(),
        }
    }

    /// Polls for the reply of a command queued on `node`.
    pub(crate) fn poll_from(
        &mut self,
        cx: &mut Context<'_>,
        node: &Node,
    ) -> Poll<Result<Bytes, UpstreamError>> {
        self.poll_with(cx, &node.addr)
    }

    /// `addr` names the node in the errors.
    fn poll_with(
        &mut self,
        cx: &mut Context<'_>,
        addr: &Arc<str>,
    ) -> Poll<Result<Bytes, UpstreamError>> {
        let Some(receive) = self.receive.as_mut() else {
            return Poll::Ready(Err(task_stopped(addr)));
        };
        Pin::new(receive)
            .poll(cx)
            .map(|received| received.unwrap_or_else(|_| Err(ended_before_replying(addr))))
    }
}

/// A command for a node whose connection task is gone: nothing was sent.
fn task_stopped(addr: &Arc<str>) -> UpstreamError {
    UpstreamError::NotSent {
        addr: addr.clone(),
        reason: "connection task stopped".to_string(),
    }
}

/// A command whose connection task ended after taking it: it may have run.
fn ended_before_replying(addr: &Arc<str>) -> UpstreamError {
    UpstreamError::Lost {
        addr: addr.clone(),
        reason: "connection task ended before replying".to_string(),
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("addr", &self.addr).finish()
    }
}

/// What a node needs to start its connections and its tracked lanes, on first use.
pub(super) struct NodeStart {
    shared: Arc<NodeShared>,
    series: Arc<NodeSeries>,
    /// The shared runtime (neither workers nor loops): where the connection tasks run.
    runtime: Option<tokio::runtime::Handle>,
    /// The RESP2 and RESP3 connections' contexts, made with the first connection.
    contexts: OnceLock<[Arc<NodeContext>; 2]>,
}

impl NodeStart {
    /// The RESP2 and RESP3 contexts (the node's series are made with them).
    pub(super) fn contexts(&self, node: &Node) -> &[Arc<NodeContext>; 2] {
        self.contexts.get_or_init(|| {
            let shared = &self.shared;
            let resp2 = NodeContext {
                addr: node.addr.clone(),
                config: shared.config.clone(),
                limits: shared.limits.clone(),
                metrics: self.series.get().clone(),
                connect_limit: shared.connect_limit.clone(),
                health: node.health.clone(),
                handshake: shared.handshake.clone(),
                tls: shared.tls.clone(),
                standby: node.standby.clone(),
            };
            let resp3 = resp2.with_handshake(shared.handshake3.clone());
            [Arc::new(resp2), Arc::new(resp3)]
        })
    }

    /// Where the node's invalidations go.
    pub(super) fn feed(&self) -> &Arc<TrackingFeed> {
        &self.shared.tracking
    }

    /// `connections_per_node` connections for `protocol` (0: RESP2, 1: RESP3).
    #[cold]
    pub(super) fn connections(
        &self,
        node: &Node,
        protocol: usize,
    ) -> Box<[queue::Sender<Pending>]> {
        let shared = &self.shared;
        // `connections_per_node` bounds the node's connections in both threading models; per
        // core they are dealt out to the workers' runtimes in turn.
        let total = shared.config.connections_per_node.max(1);
        let context = &self.contexts(node)[protocol];
        spawn_connections(
            total,
            context,
            self.runtime.as_ref(),
            shared.workers.as_ref(),
            shared.loops.as_ref(),
        )
    }
}

/// `total` connections for `context`: tasks on `runtime` (else the current one), or per core
/// dealt out to the workers in turn (connection `i` on worker `i % workers`): to their event
/// loops when they have them, else as tasks on their runtimes.
pub(super) fn spawn_connections(
    total: usize,
    context: &Arc<NodeContext>,
    runtime: Option<&tokio::runtime::Handle>,
    workers: Option<&Arc<[tokio::runtime::Handle]>>,
    loops: Option<&Arc<[Arc<crate::reactor::Remote>]>>,
) -> Box<[queue::Sender<Pending>]> {
    if let Some(loops) = loops.filter(|loops| !loops.is_empty()) {
        return (0..total)
            .map(|i| {
                let (tx, rx) = queue::channel();
                let attach = super::loop_conn::ConnAttach {
                    queue: rx,
                    context: context.clone(),
                };
                loops[i % loops.len()].post(Box::new(attach));
                tx
            })
            .collect();
    }
    match workers {
        None => {
            let current = runtime
                .cloned()
                .unwrap_or_else(tokio::runtime::Handle::current);
            (0..total)
                .map(|_| conn::spawn(&current, context.clone()))
                .collect()
        }
        Some(handles) => (0..total)
            .map(|i| conn::spawn(&handles[i % handles.len()], context.clone()))
            .collect(),
    }
}
