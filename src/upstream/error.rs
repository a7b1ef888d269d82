//! Why a command sent to a node got no reply, and whether it may have executed.

use std::sync::Arc;

/// The distinction the router needs: a command that never left redcar can be retried anywhere,
/// one that may have reached the node must not be re-sent if it writes.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum UpstreamError {
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
    pub(crate) fn never_sent(&self) -> bool {
        matches!(
            self,
            UpstreamError::NotSent { .. } | UpstreamError::Exhausted { .. }
        )
    }
}

/// True for the error Redis gives a blocked command (redcar's `WAIT` on a shared connection)
/// when the node turns replica. Nothing the connection carried behind it can have been
/// applied: the node was not running that client's later commands while it was blocked, and
/// after the change a replica refuses writes. So when the node then closes the connection,
/// the commands still owed a reply never ran and may go to the new primary.
pub(super) fn turned_replica(reply: &[u8]) -> bool {
    const UNBLOCKED: &[u8] = b"-UNBLOCKED ";
    const ROLE_CHANGE: &[u8] = b"(master -> replica?)";
    reply.starts_with(UNBLOCKED)
        && reply
            .windows(ROLE_CHANGE.len())
            .any(|window| window == ROLE_CHANGE)
}

#[cfg(test)]
mod tests {
    use super::turned_replica;

    #[test]
    fn only_the_role_change_unblocked_error_counts() {
        assert!(turned_replica(
            b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n"
        ));
        assert!(!turned_replica(
            b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
        ));
        assert!(!turned_replica(b"+OK\r\n"));
        assert!(!turned_replica(b"$20\r\n(master -> replica?)\r\n"));
    }
}
