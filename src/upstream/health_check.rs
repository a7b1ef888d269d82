//! The active health check: while a node is ejected, `PING` it every `health_check_interval` once
//! its ejection time is over — or, for a replica, while its shard's primary is down, whatever its
//! ejection time —; the first `PONG` brings it back into selection.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use super::Lane;
use super::{Node, Upstreams};

/// `PING` as RESP; the only reply that restores a node is exactly `+PONG` (a `-LOADING` node
/// answers, but cannot serve yet).
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";

/// Runs until `shutdown`. Idle (no timer) while no node is ejected.
///
/// One task for the whole process, started with the upstream registry. Each round re-reads the
/// nodes and the interval and spawns a check for every ejected node that is due; a check is
/// bounded by one interval, so a hung node costs at most about one pending PING per round.
pub(crate) async fn run_health_checks(
    upstreams: Arc<Upstreams>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ejections = upstreams.ejections();
    loop {
        // Read each round, so a reload's `health_check_interval` applies at once.
        let interval = upstreams.outlier().health_check_interval;
        let all = upstreams.all();
        let down: Vec<Arc<str>> = (all.iter())
            .filter(|node| node.health().is_down())
            .map(|node| node.addr().clone())
            .collect();
        let ejected: Vec<Arc<Node>> = all.into_iter().filter(|node| node.is_ejected()).collect();
        if ejected.is_empty() {
            tokio::select! {
                changed = ejections.changed() => if changed.is_err() { return },
                _ = shutdown.changed() => return,
            }
            continue;
        }
        for node in ejected {
            let health = node.health();
            let primary_down = health.shard_primary().is_some_and(|p| down.contains(&p));
            if health.due_for_check(primary_down) {
                tokio::spawn(check(node, interval));
            }
        }
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// One `PING` through the node's own pipelined connection (so a node that accepts connections
/// but never answers stays ejected), bounded by `timeout`.
async fn check(node: Arc<Node>, timeout: Duration) {
    let ping = node.call(Bytes::from_static(PING), false, Lane::default());
    match tokio::time::timeout(timeout, ping).await {
        Ok(Ok(reply)) if reply.as_ref() == b"+PONG\r\n" => node.health().restore(),
        Ok(Ok(reply)) => {
            let reply = String::from_utf8_lossy(&reply);
            tracing::debug!(node = %node.addr(), reply = %reply.trim_end(), "health check: not yet");
        }
        Ok(Err(error)) => tracing::debug!(node = %node.addr(), %error, "health check failed"),
        Err(_) => tracing::debug!(node = %node.addr(), ?timeout, "health check timed out"),
    }
}
