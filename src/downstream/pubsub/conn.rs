//! One node connection of a client in subscribe mode: a task that writes the client's
//! (un)subscribe commands and passes on everything the node pushes (confirmations, messages).

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::upstream::Dedicated;

/// Frames in flight from the node tasks to the session; when full, the tasks stop reading and
/// the node's own pub/sub output-buffer limit applies, as for a slow direct subscriber.
pub(crate) const PUSH_QUEUE: usize = 1024;

/// A frame a node pushed, or why its connection ended.
pub(crate) struct Pushed {
    /// The node the connection goes to.
    pub(crate) addr: Arc<str>,
    /// A frame the node pushed, or why the connection ended.
    pub(crate) frame: Result<Bytes, String>,
}

/// The session's handle on one subscription connection; dropping it closes the connection,
/// which ends its subscriptions on the node.
pub(crate) struct SubConn {
    /// Commands for the node, written in order by the connection's task.
    commands: mpsc::UnboundedSender<Bytes>,
}

impl SubConn {
    /// Starts the task for `conn`; what the node sends arrives on `pushed`.
    pub(crate) fn start(mut conn: Dedicated, pushed: mpsc::Sender<Pushed>) -> SubConn {
        let (commands, mut queue) = mpsc::unbounded_channel::<Bytes>();
        let addr = conn.addr().clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    command = queue.recv() => match command {
                        Some(command) => {
                            if let Err(e) = conn.send(&command).await {
                                let _ = pushed.send(Pushed { addr: addr.clone(), frame: Err(e.to_string()) }).await;
                                return;
                            }
                        }
                        None => return,
                    },
                    frame = conn.receive(1) => {
                        let failed = frame.is_err();
                        let frame = frame.map_err(|e| e.to_string());
                        if pushed.send(Pushed { addr: addr.clone(), frame }).await.is_err() || failed {
                            return;
                        }
                    }
                }
            }
        });
        SubConn { commands }
    }

    /// Queues one encoded command; false when the connection is gone.
    pub(crate) fn send(&self, command: Bytes) -> bool {
        self.commands.send(command).is_ok()
    }
}
