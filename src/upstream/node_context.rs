//! What every connection of one node shares (its settings, metrics, health and handshake), and
//! greeting a new connection with that handshake.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};

use super::handshake::Handshake;
use super::health::Health;
use super::standby::Standby;
use super::NodeMetrics;
use super::{ConnectLimit, UpstreamConfig, UpstreamTls};
use crate::protocol::Limits;

/// What every connection of one node shares: its settings, metrics and health.
pub(super) struct NodeContext {
    /// The node's `host:port`.
    pub(crate) addr: Arc<str>,
    /// `upstream:` as at start-up: timeouts, batching, keepalive.
    pub(crate) config: UpstreamConfig,
    /// Parse limits for the node's replies.
    pub(crate) limits: Limits,
    /// The node's series (made on its first use).
    pub(crate) metrics: NodeMetrics,
    /// `upstream.max_connects_per_second`, shared by every node.
    pub(crate) connect_limit: Arc<ConnectLimit>,
    /// The node's health, fed by every connection's failures and replies.
    pub(crate) health: Arc<Health>,
    /// `AUTH` and/or `READONLY` (so a replica serves reads of its primary's slots) after connecting.
    pub(crate) handshake: Handshake,
    /// `upstream.tls`: every connection is wrapped in TLS when set.
    pub(crate) tls: Option<UpstreamTls>,
    /// Set while the node serves nothing: idle connections close within a second.
    pub(crate) standby: Arc<Standby>,
}

impl NodeContext {
    /// The same node's context for connections that send `handshake` first.
    pub(super) fn with_handshake(&self, handshake: Handshake) -> NodeContext {
        NodeContext {
            addr: self.addr.clone(),
            config: self.config.clone(),
            limits: self.limits.clone(),
            metrics: self.metrics.clone(),
            connect_limit: self.connect_limit.clone(),
            health: self.health.clone(),
            handshake,
            tls: self.tls.clone(),
            standby: self.standby.clone(),
        }
    }
}

impl NodeContext {
    /// [`Handshake::run`] on a new pipelined connection of this node, which it reports to.
    pub(super) async fn greet<S>(&self, stream: S) -> Result<S, String>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        self.handshake
            .run(stream, &self.limits, Some(&self.health))
            .await
    }
}
