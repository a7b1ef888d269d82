//! Asking several nodes at once: the request queued on each (so it keeps the client's order),
//! every node's reply or why there is none, and the error that names a node whose part failed.
//!
//! One deadline covers all the parts of a fan-out (not one op timeout per node, which would make a
//! fan-out over N slow nodes take N times as long), and a part's failure is kept as text next to
//! its node's address so the merged error can say which node and why. The nodes are asked in
//! parallel; only the waiting is sequential, in the order sent.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::protocol::Request;
use crate::router::replies::error_text;
use crate::router::reply::redcar_error;
use crate::upstream::Lane;
use crate::upstream::{Node, Reply};

/// One primary's answer: its reply frame, or why there is none (connection, timeout).
pub(super) struct NodeReply {
    /// The node asked; named in any error the merge builds from this part.
    pub(crate) addr: Arc<str>,
    /// The node's reply frame as received (which may itself be a Redis error), or the transport
    /// failure or timeout as text.
    pub(crate) reply: Result<Bytes, String>,
}

/// Queues `request` on every node now (so it keeps the client's order), returning the replies to await.
pub(super) fn send_to_all<'n>(
    nodes: impl Iterator<Item = &'n Arc<Node>>,
    request: &Request,
    lane: Lane,
) -> Vec<(Arc<str>, Reply)> {
    nodes
        .map(|node| {
            (
                node.addr().clone(),
                node.send(request.raw().clone(), false, lane),
            )
        })
        .collect()
}

/// Every node's reply (or why there is none), in the order sent, all within one `op_timeout`.
pub(super) async fn collect(sent: Vec<(Arc<str>, Reply)>, op_timeout: Duration) -> Vec<NodeReply> {
    let deadline = Instant::now() + op_timeout;
    let mut replies = Vec::with_capacity(sent.len());
    for (addr, reply) in sent {
        let reply = await_reply(&addr, reply, deadline, op_timeout).await;
        replies.push(NodeReply { addr, reply });
    }
    replies
}

/// Waits for one node's reply until `deadline`.
///
/// `op_timeout` is only for the message: the wait itself ends at `deadline`, shared by all parts,
/// so a part awaited late may have less than `op_timeout` left.
pub(super) async fn await_reply(
    addr: &str,
    reply: Reply,
    deadline: Instant,
    op_timeout: Duration,
) -> Result<Bytes, String> {
    match tokio::time::timeout_at(deadline, reply).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_elapsed) => Err(format!("timed out after {op_timeout:?} waiting for {addr}")),
    }
}

/// `-ERR redcar: <CMD> failed on <node>: <why><consequence>`.
///
/// `consequence` is appended as is (`"; other primaries may have applied it"`), empty when a
/// failure changes nothing elsewhere. A part that replied with something other than an error or the
/// expected shape is reported as `unexpected reply`.
pub(super) fn failure(name: &str, failed: &NodeReply, consequence: &str) -> Bytes {
    let why = match &failed.reply {
        Ok(reply) => error_text(reply).unwrap_or_else(|| "unexpected reply".to_string()),
        Err(why) => why.clone(),
    };
    redcar_error(format_args!(
        "{name} failed on {}: {why}{consequence}",
        failed.addr
    ))
}
