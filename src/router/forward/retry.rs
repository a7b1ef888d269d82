//! What a failed attempt leaves behind: whether the node or only the slot failed, how long to
//! pause before the next attempt, and the client's reply when no attempt is left.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::router::reply::redcar_error;
use crate::upstream::UpstreamError;

/// `-LOADING` and `-MASTERDOWN` say this node cannot serve now (another may); `-TRYAGAIN` and
/// `-CLUSTERDOWN` are about the slot or the cluster, not the node.
pub(super) fn node_unavailable(reply: &[u8]) -> bool {
    reply.starts_with(b"-LOADING") || reply.starts_with(b"-MASTERDOWN")
}

/// Sleeps before retry `attempt`; false when the deadline leaves no time for another try.
pub(in crate::router) async fn pause_before_retry(
    base: Duration,
    attempt: u32,
    deadline: Instant,
) -> bool {
    let pause = base
        .saturating_mul(1 << attempt.min(4))
        .min(Duration::from_millis(500));
    let wake = Instant::now() + pause;
    if wake >= deadline {
        return false;
    }
    tokio::time::sleep_until(wake).await;
    true
}

/// Why the last attempt failed, turned into the client's reply when retries run out.
pub(super) enum RetryCause {
    /// The node answered an error worth a retry (TRYAGAIN, CLUSTERDOWN, ...): the client gets it as
    /// is.
    Reply(Bytes),
    /// No reply: the connection failed or the command was not sent.
    Upstream(UpstreamError),
}

impl RetryCause {
    /// True when the node failed (not the slot or the cluster): another node may do better.
    pub(super) fn is_node_failure(&self) -> bool {
        match self {
            RetryCause::Reply(reply) => node_unavailable(reply),
            RetryCause::Upstream(_) => true,
        }
    }

    /// The client's reply; `note` is added to redcar's own errors.
    pub(super) fn into_reply(self, note: &str) -> Bytes {
        match self {
            // The node's own error (e.g. -CLUSTERDOWN) is the most precise answer.
            RetryCause::Reply(reply) => reply,
            RetryCause::Upstream(e) => redcar_error(format_args!("{e}{note}")),
        }
    }
}

/// A write whose connection broke after sending: it may have been applied, so it is not re-sent.
pub(in crate::router) fn lost_write(error: &UpstreamError) -> Bytes {
    redcar_error(format_args!(
        "{error}; the write may have been applied, so it was not retried"
    ))
}
