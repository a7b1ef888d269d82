//! One cluster node: a fixed set of pipelined connections used round-robin.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;

use super::conn::{self, NodeContext, Pending};
use super::health::{Health, HealthMetrics};
use super::queue;
use super::reply_slot::{self, ReplyReceiver};
use super::{ConnectLimit, UpstreamConfig, UpstreamError};
use crate::metrics::NodeMetrics;
use crate::protocol::Limits;

/// How a node is created: what its connections share beyond the node's own address.
pub(super) struct NodeSettings<'a> {
    pub config: &'a UpstreamConfig,
    pub limits: &'a Limits,
    pub connect_limit: &'a Arc<ConnectLimit>,
    /// Bumped on every ejection of any node (health checker, topology refresher).
    pub ejections: &'a Arc<tokio::sync::watch::Sender<u64>>,
    /// What each pipelined connection sends first (AUTH, READONLY).
    pub handshake: &'a super::Handshake,
    /// `upstream.tls`, when on.
    pub tls: &'a Option<super::UpstreamTls>,
    /// `upstream.outlier` as it is now (a reload may swap it).
    pub outlier: &'a Arc<arc_swap::ArcSwap<super::OutlierConfig>>,
    /// `threading: per-core`: the workers' runtimes; each gets its own connections.
    pub workers: Option<&'a Arc<[tokio::runtime::Handle]>>,
}

/// A handle to one node's connections. Cheap to share (`Arc<Node>`); the connection tasks end when
/// the last handle is dropped and their in-flight replies are delivered.
pub struct Node {
    addr: Arc<str>,
    /// One queue per connection task; each task owns its socket. Unbounded because each client
    /// is already bounded by `client.max_in_flight`, and queueing must never wait (ordering).
    conns: Box<[queue::Sender<Pending>]>,
    /// Connections per worker: all of them with one shared runtime; per core, worker `w` uses
    /// `conns[w * per_worker..][..per_worker]`, which live on its own runtime.
    per_worker: usize,
    health: Arc<Health>,
}

impl Node {
    /// Starts the connection tasks (they connect lazily, on the first command).
    pub(super) fn spawn(addr: &str, settings: &NodeSettings<'_>, metrics: NodeMetrics) -> Node {
        let addr: Arc<str> = Arc::from(addr);
        let health = Arc::new(Health::new(
            addr.clone(),
            settings.outlier.clone(),
            HealthMetrics {
                in_flight: metrics.in_flight.clone(),
                ejections: metrics.ejections.clone(),
                ejected: metrics.ejected.clone(),
                events: metrics.events.clone(),
            },
            settings.ejections.clone(),
        ));
        let context = Arc::new(NodeContext {
            addr: addr.clone(),
            config: settings.config.clone(),
            limits: settings.limits.clone(),
            metrics,
            connect_limit: settings.connect_limit.clone(),
            health: health.clone(),
            handshake: settings.handshake.clone(),
            tls: settings.tls.clone(),
        });
        let per_worker = settings.config.connections_per_node.max(1);
        let conns = match settings.workers {
            None => (0..per_worker)
                .map(|_| conn::spawn(&tokio::runtime::Handle::current(), context.clone()))
                .collect(),
            Some(handles) => handles
                .iter()
                .flat_map(|handle| {
                    let context = &context;
                    (0..per_worker).map(move |_| conn::spawn(handle, context.clone()))
                })
                .collect(),
        };
        Node {
            addr,
            conns,
            per_worker,
            health,
        }
    }

    /// Whether the node takes traffic, and how loaded it is.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// True while outlier detection keeps the node out of selection.
    #[inline]
    pub fn is_ejected(&self) -> bool {
        self.health.is_ejected()
    }

    /// The `host:port` this node was created for.
    pub fn addr(&self) -> &Arc<str> {
        &self.addr
    }

    /// Queues one encoded command (preceded by `ASKING` when `asking`) on a connection right
    /// now, without waiting, and returns the handle to await its reply frame. Queueing is
    /// synchronous so commands reach the connection in exactly the order callers sent them.
    ///
    /// `lane` picks the connection: a client always passes the same lane, so its commands to one
    /// node travel over one connection and run in the order it sent them (Redis's per-connection
    /// ordering), while different clients spread evenly over the connections (never LIFO).
    pub fn send(&self, payload: Bytes, asking: bool, lane: usize) -> Reply {
        self.send_frames(payload, asking, lane, 1)
    }

    /// [`send`](Self::send) for a payload of several commands written contiguously (a whole
    /// `MULTI … EXEC`): resolves once all `frames` replies are in, as one slice.
    pub fn send_frames(&self, payload: Bytes, asking: bool, lane: usize, frames: u32) -> Reply {
        let (reply, receive) = reply_slot::channel();
        let pending = Pending {
            payload,
            asking,
            frames,
            reply,
        };
        let queued = self.conns[self.connection(lane)].send(pending);
        Reply {
            receive: queued.is_ok().then_some(receive),
            addr: self.addr.clone(),
        }
    }

    /// The connection for `lane`. Shared runtime: one of all of them. Per core, one of the calling
    /// worker's own (same thread, no hand-off); other threads (refresh, admin) use worker 0's.
    #[inline]
    fn connection(&self, lane: usize) -> usize {
        let within = lane % self.per_worker;
        if self.per_worker == self.conns.len() {
            return within;
        }
        let first = crate::workers::current().map_or(0, |w| w * self.per_worker);
        (first + within) % self.conns.len()
    }

    /// [`send`](Self::send), then wait for the reply.
    pub async fn call(
        &self,
        payload: Bytes,
        asking: bool,
        lane: usize,
    ) -> Result<Bytes, UpstreamError> {
        self.send(payload, asking, lane).await
    }
}

/// A command queued on a node connection; resolves to its reply frame. The caller bounds the
/// wait with its own deadline.
pub struct Reply {
    /// `None` when the connection task was gone, so nothing was sent.
    receive: Option<ReplyReceiver>,
    addr: Arc<str>,
}

impl Future for Reply {
    type Output = Result<Bytes, UpstreamError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(receive) = self.receive.as_mut() else {
            return Poll::Ready(Err(UpstreamError::NotSent {
                addr: self.addr.clone(),
                reason: "connection task stopped".to_string(),
            }));
        };
        Pin::new(receive).poll(cx).map(|received| {
            received.unwrap_or_else(|_| {
                Err(UpstreamError::Lost {
                    addr: self.addr.clone(),
                    reason: "connection task ended before replying".to_string(),
                })
            })
        })
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("addr", &self.addr).finish()
    }
}
