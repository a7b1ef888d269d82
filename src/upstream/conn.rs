//! One pipelined connection to a node: a single task that connects on demand (`connect`: TCP,
//! keepalive, TLS), reconnects with back-off after failures, and serves each established
//! connection (`session`: writes queued commands in batches and hands each reply frame to the
//! command waiting at the front of the in-flight queue).
//!
//! What holds: commands are written in the order they were queued and every reply frame goes to the
//! oldest command still waiting, so the connection never reorders; a command is failed with
//! `NotSent` only when it provably never reached the node (connect failed, or it was queued during
//! the back-off), which is what lets the router retry even a write safely. A connection lost
//! mid-flight fails what was in flight with an error that says it may have run. After a failed
//! connect the task refuses new commands at once until the back-off is over (doubling per failure,
//! capped at 16 times `reconnect_backoff`), so a dead node costs callers a fast error instead of a
//! connect timeout each.

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
///
/// Called when a node's pooled connections are made (one task per connection, spread over the
/// workers' runtimes) and for the tracking lanes; the task ends by itself when the last sender is
/// dropped (the node left the map and every caller let go of it), closing its connection.
pub(super) fn spawn(
    runtime: &tokio::runtime::Handle,
    context: Arc<NodeContext>,
) -> queue::Sender<Pending> {
    let (tx, rx) = queue::channel();
    runtime.spawn(run(context, rx));
    tx
}

/// Connects on demand and reconnects after failures, until every sender is gone.
///
/// The first command after an idle spell is what triggers a connect, so a node nobody sends to
/// holds no connection. Every failure (connect, greeting, a session that ended in error) counts in
/// the node's health, which is what ejects a node that keeps failing.
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
///
/// Every command failed here gets `NotSent`, the one upstream error the router may retry whatever
/// the command, since none of it reached the node.
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
///
/// Also used by the dedicated connections and the handshake, so all of them share
/// `upstream.max_connects_per_second` (`limit`): a reconnect storm against one node cannot open
/// thousands of sockets at once. TCP keepalive, when set, detects a peer that vanished without a
/// FIN on an idle connection. The error is a sentence for logs and for the client's error reply.
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
