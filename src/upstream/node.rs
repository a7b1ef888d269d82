//! One cluster node: a fixed set of pipelined connections used round-robin.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::conn::{self, Pending};
use super::{UpstreamConfig, UpstreamError};
use crate::protocol::Limits;

/// A handle to one node's connections. Cheap to share (`Arc<Node>`); the connection tasks end when
/// the last handle is dropped and their in-flight replies are delivered.
pub struct Node {
    addr: Arc<str>,
    /// One queue per connection task; each task owns its socket.
    conns: Box<[mpsc::Sender<Pending>]>,
    /// Round-robin cursor: spreading by rotation (never "most recently used") keeps connections
    /// evenly loaded.
    next: AtomicUsize,
}

impl Node {
    /// Starts the connection tasks (they connect lazily, on the first command).
    pub fn spawn(addr: &str, config: &UpstreamConfig, limits: &Limits) -> Node {
        let addr: Arc<str> = Arc::from(addr);
        let conns = (0..config.connections_per_node.max(1))
            .map(|_| conn::spawn(addr.clone(), config.clone(), limits.clone()))
            .collect();
        Node {
            addr,
            conns,
            next: AtomicUsize::new(0),
        }
    }

    /// The `host:port` this node was created for.
    pub fn addr(&self) -> &Arc<str> {
        &self.addr
    }

    /// Sends one encoded command (preceded by `ASKING` when `asking`) and waits for its reply
    /// frame. The caller bounds the wait with its own deadline.
    pub async fn call(&self, payload: Bytes, asking: bool) -> Result<Bytes, UpstreamError> {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len();
        let (reply, receive) = oneshot::channel();
        let pending = Pending {
            payload,
            asking,
            reply,
        };
        if self.conns[index].send(pending).await.is_err() {
            return Err(self.not_sent("connection task stopped"));
        }
        match receive.await {
            Ok(result) => result,
            Err(_) => Err(UpstreamError::Lost {
                addr: self.addr.clone(),
                reason: "connection task ended before replying".to_string(),
            }),
        }
    }

    fn not_sent(&self, reason: &str) -> UpstreamError {
        UpstreamError::NotSent {
            addr: self.addr.clone(),
            reason: reason.to_string(),
        }
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("addr", &self.addr).finish()
    }
}
