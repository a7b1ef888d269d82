//! Why a command sent to a node got no reply, and whether it may have executed.

use std::sync::Arc;

/// The distinction the router needs: a command that never left redcar can be retried anywhere,
/// one that may have reached the node must not be re-sent if it writes.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum UpstreamError {
    /// The command was never written to the node (connect failed, or connection in back-off).
    #[error("cannot reach {addr}: {reason}")]
    NotSent { addr: Arc<str>, reason: String },
    /// No dedicated connection could be had (the pool's bound); nothing was sent.
    #[error("{reason}")]
    Exhausted { reason: String },
    /// The connection broke after the command was (maybe) written; it may have executed.
    #[error("connection to {addr} lost: {reason}")]
    Lost { addr: Arc<str>, reason: String },
}

impl UpstreamError {
    /// True when the command provably never reached the node.
    pub fn never_sent(&self) -> bool {
        matches!(
            self,
            UpstreamError::NotSent { .. } | UpstreamError::Exhausted { .. }
        )
    }
}
