//! Keeps one connection to a sentinel subscribed to `+switch-master`, so a failover is followed
//! as soon as Sentinel announces it instead of at the next periodic query. When the connection
//! drops, the next sentinel in the list is tried.

use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::conn::{SentinelAuth, SentinelConn};
use super::reply::switched;

/// What the subscription needs to know.
/// Built by `follow` and run as its own task; it only ever sends notices, never touches the map.
pub(super) struct Switches {
    /// Tried in turn, round and round, one subscription at a time.
    pub(crate) sentinels: Vec<String>,
    /// Only switches of this primary are reported; the channel carries every master's.
    pub(crate) master: String,
    /// The same sentinel credentials as the queries use.
    pub(crate) auth: Option<SentinelAuth>,
    /// Bounds the connect, AUTH and the SUBSCRIBE confirmation.
    pub(crate) timeout: Duration,
    /// Pause before trying the next sentinel after a failure.
    pub(crate) retry: Duration,
    /// Names the sentinel that announced a switch (or that a new subscription started, since
    /// an event may have been missed meanwhile); the follower queries it first.
    pub(crate) notify: mpsc::Sender<String>,
}

// === impl Switches ===

impl Switches {
    /// Subscribes to each sentinel in turn until `shutdown`.
    /// Never ends on its own while sentinels are configured: a lost subscription waits `retry` and
    /// moves to the next sentinel.
    pub(crate) async fn run(self, mut shutdown: watch::Receiver<bool>) {
        for addr in self.sentinels.iter().cycle() {
            tokio::select! {
                reason = self.listen(addr) => {
                    tracing::warn!(sentinel = %addr, %reason, "+switch-master subscription lost; trying the next sentinel");
                }
                _ = shutdown.changed() => return,
            }
            tokio::select! {
                _ = tokio::time::sleep(self.retry) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Subscribes on `addr` and reports events for this primary; returns why it stopped.
    /// A notice is sent at once after subscribing, because a switch may have happened while no
    /// subscription was up; later ones only for this primary's switches. A full channel drops the
    /// notice, which is fine: the query already due sees the switch.
    async fn listen(&self, addr: &str) -> String {
        let mut conn = match SentinelConn::open(addr, self.auth.as_ref(), self.timeout).await {
            Ok(conn) => conn,
            Err(reason) => return reason,
        };
        let subscribe: Vec<&[u8]> = vec![b"SUBSCRIBE", b"+switch-master"];
        match conn.request(&[subscribe], self.timeout).await {
            Ok(replies) if replies.iter().any(|r| r.is_error()) => {
                return format!("SUBSCRIBE refused: {replies:?}");
            }
            Ok(_) => {}
            Err(reason) => return reason,
        }
        tracing::debug!(sentinel = %addr, "subscribed to +switch-master");
        // A failover may have happened while no subscription was up.
        let _ = self.notify.try_send(addr.to_string());
        loop {
            let frame = match conn.next_frame().await {
                Ok(frame) => frame,
                Err(reason) => return reason,
            };
            if let Some(primary) = switched(&self.master, &frame) {
                tracing::info!(sentinel = %addr, master = %self.master, %primary, "sentinel announced +switch-master");
                // A full channel means a query is already due: it will see the switch.
                let _ = self.notify.try_send(addr.to_string());
            }
        }
    }
}
