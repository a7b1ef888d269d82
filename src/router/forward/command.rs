//! The types one command carries on its way to a node, shared by the single-command path and
//! the split, transaction and WATCH paths that send through it.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use crate::router::RouteTarget;
use crate::upstream::{Lane, Node, UpstreamError};

/// What one attempt on a node produced.
pub(in crate::router) type Outcome = Result<Bytes, UpstreamError>;

/// Where the next attempt goes.
pub(in crate::router) enum AttemptTarget {
    /// The slot's owner in the current map (`None`: any primary), by read policy for reads.
    Owner(Option<u16>),
    /// A node named by a redirect; `asking` for ASK.
    Redirected { node: Arc<Node>, asking: bool },
}

/// One command on its way: what to send, where, and by when.
pub(in crate::router) struct ForwardedCommand {
    /// The command as RESP, sent as it is on every attempt.
    pub(crate) payload: Bytes,
    /// The keys' slot; `None` for a keyless command (any primary).
    pub(crate) slot: Option<u16>,
    /// Whether it may write: a write goes to primaries only and is never sent again once it may
    /// have run.
    pub(crate) write: bool,
    /// Which of a node's connections carry it, and in which RESP version.
    pub(crate) lane: Lane,
    /// When the client gets a timeout instead, whatever attempt is under way (`router.op_timeout`
    /// from the command's start).
    pub(crate) deadline: Instant,
    /// A route's backend; `None`: the catch-all backend (the core's `cluster`).
    pub(crate) target: Option<Arc<RouteTarget>>,
}

/// The answer to "which node now?".
pub(in crate::router) enum Candidate {
    /// Send it here.
    Node(Arc<Node>),
    /// The slot has an owner but outlier detection ejected every node that could serve the
    /// command: the client gets this error at once instead of queueing to the deadline.
    Unusable(Bytes),
    /// No map yet, or nobody owns the slot: wait for a refresh.
    NoOwner,
}
