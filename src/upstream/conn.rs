//! One pipelined connection to a node: a single task that connects on demand (`connect`: TCP,
//! keepalive, TLS), reconnects with back-off after failures, and serves each established
//! connection (`session`: writes queued commands in batches and hands each reply frame to the
//! command waiting at the front of the in-flight queue).

use std::sync::Arc;

use bytes::Bytes;
use socket2::{SockRef, TcpKeepalive};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::handshake::Handshake;
use super::health::Health;
use super::inbox::Delivery;
use super::queue;
use super::reply_slot::ReplySender;
use super::standby::Standby;
use super::stream::NodeStream;
use super::NodeMetrics;
use super::{ConnectLimit, UpstreamConfig, UpstreamError, UpstreamTls};
use crate::protocol::{reply_frame_len, Limits};

#[path = "conn_session.rs"]
mod session;

use session::Session;

/// The RESP encoding of `ASKING`, written before a command redirected by `-ASK`.
pub(crate) const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

/// A command waiting to be written, and where its reply goes.
pub(super) struct Pending {
    pub(crate) payload: Bytes,
    pub(crate) asking: bool,
    /// Reply frames the payload produces (1 for one command; `MULTI … EXEC` sends several). They
    /// are handed over together, as one contiguous slice.
    pub(crate) frames: u32,
    pub(crate) reply: ReplyTo,
}

/// Where a command's reply goes: its own channel, or a client session's inbox (see `inbox`).
pub(super) enum ReplyTo {
    Slot(ReplySender),
    Inbox(Delivery),
}

impl ReplyTo {
    /// Hands over one outcome on its own (failures; replies go through `Session::deliver`).
    fn send(self, outcome: Result<Bytes, UpstreamError>) {
        match self {
            ReplyTo::Slot(slot) => slot.send(outcome),
            ReplyTo::Inbox(delivery) => delivery.send(outcome),
        }
    }
}

/// What every connection of one node shares: its settings, metrics and health.
pub(super) struct NodeContext {
    pub(crate) addr: Arc<str>,
    pub(crate) config: UpstreamConfig,
    pub(crate) limits: Limits,
    pub(crate) metrics: NodeMetrics,
    pub(crate) connect_limit: Arc<ConnectLimit>,
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

/// Starts the task and returns its queue.
pub(super) fn spawn(
    runtime: &tokio::runtime::Handle,
    context: Arc<NodeContext>,
) -> queue::Sender<Pending> {
    let (tx, rx) = queue::channel();
    runtime.spawn(run(context, rx));
    tx
}

/// Connects on demand and reconnects after failures, until every sender is gone.
async fn run(context: Arc<NodeContext>, mut rx: queue::Receiver<Pending>) {
    let NodeContext {
        addr,
        config,
        metrics,
        health,
        ..
    } = &*context;
    let mut failures: u32 = 0;
    let mut retry_at = Instant::now();
    while let Some(first) = rx.recv().await {
        if Instant::now() < retry_at {
            metrics.errors.inc();
            fail_queued(
                first,
                &mut rx,
                addr,
                "reconnect back-off after a failed connect",
            );
            continue;
        }
        let connected = match connect(addr, config, &context.connect_limit, &context.tls).await {
            Ok(stream) => context.greet(stream).await,
            Err(reason) => Err(reason),
        };
        match connected {
            Ok(stream) => {
                failures = 0;
                tracing::debug!(node = %addr, "connected");
                metrics.connections.inc();
                let mut session = Session::new(&context);
                if let Err(reason) = session
                    .serve(stream, first, &mut rx, config.idle_timeout)
                    .await
                {
                    tracing::warn!(node = %addr, %reason, "node connection closed");
                    metrics.errors.inc();
                    health.record_failure(&reason);
                    session.fail_in_flight(&reason);
                }
                metrics.connections.dec();
                context.handshake.ended();
            }
            Err(reason) => {
                failures = failures.saturating_add(1);
                let backoff = config.reconnect_backoff * 2u32.pow(failures.min(5) - 1);
                retry_at = Instant::now() + backoff;
                tracing::warn!(node = %addr, %reason, ?backoff, "connect failed");
                metrics.errors.inc();
                health.record_failure(&reason);
                fail_queued(first, &mut rx, addr, &reason);
            }
        }
    }
}

/// Length of the first `count` complete reply frames in `input`, or `None` until all are there.
pub(super) fn frames_len(
    input: &[u8],
    count: u32,
    limits: &Limits,
) -> Result<Option<usize>, String> {
    let mut end = 0;
    for _ in 0..count {
        match reply_frame_len(&input[end..], limits) {
            Ok(Some(len)) => end += len,
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("protocol error in reply: {e}")),
        }
    }
    Ok(Some(end))
}

/// Fails `first` and everything already queued behind it: none of it was sent.
fn fail_queued(first: Pending, rx: &mut queue::Receiver<Pending>, addr: &Arc<str>, reason: &str) {
    let error = UpstreamError::NotSent {
        addr: addr.clone(),
        reason: reason.to_string(),
    };
    first.reply.send(Err(error.clone()));
    while let Some(pending) = rx.try_recv() {
        pending.reply.send(Err(error.clone()));
    }
}

/// A new connection to `addr`: TCP within `connect_timeout`, then TLS (within as long again)
/// when `upstream.tls` is on.
pub(super) async fn connect(
    addr: &str,
    config: &UpstreamConfig,
    limit: &ConnectLimit,
    tls: &Option<UpstreamTls>,
) -> Result<NodeStream, String> {
    if let Err(wait) = limit.admit(addr, config.connect_timeout).await {
        return Err(format!(
            "connect rate limit reached (upstream.max_connects_per_second = {}; next slot in {wait:?})",
            config.max_connects_per_second
        ));
    }
    let stream = match tokio::time::timeout(config.connect_timeout, TcpStream::connect(addr)).await
    {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(format!("connect failed: {e}")),
        Err(_) => {
            return Err(format!(
                "connect timed out after {:?}",
                config.connect_timeout
            ))
        }
    };
    // Small commands must not wait for Nagle; we batch ourselves.
    stream
        .set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    if !config.tcp_keepalive.is_zero() {
        let mut keepalive = TcpKeepalive::new()
            .with_time(config.tcp_keepalive)
            .with_interval(config.keepalive_interval());
        // Unset leaves the OS's probe count alone.
        if let Some(probes) = config.tcp_keepalive_probes {
            keepalive = keepalive.with_retries(probes);
        }
        SockRef::from(&stream)
            .set_tcp_keepalive(&keepalive)
            .map_err(|e| format!("TCP keepalive: {e}"))?;
    }
    match tls {
        None => Ok(NodeStream::Tcp(stream)),
        Some(tls) => {
            let stream = tls.handshake(addr, stream, config.connect_timeout).await?;
            Ok(NodeStream::Tls(Box::new(stream)))
        }
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
