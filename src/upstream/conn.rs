//! One pipelined connection to a node: a single task that connects on demand (`connect`: TCP,
//! keepalive, TLS), reconnects with back-off after failures, and serves each established
//! connection (`session`: writes queued commands in batches and hands each reply frame to the
//! command waiting at the front of the in-flight queue).

use std::sync::Arc;

use socket2::{SockRef, TcpKeepalive};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::node_context::NodeContext;
use super::pending::Pending;
use super::queue;
use super::stream::NodeStream;
use super::{ConnectLimit, UpstreamConfig, UpstreamError, UpstreamTls};

mod session;

use session::Session;

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
