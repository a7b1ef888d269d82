//! What a session keeps once it tracked or could receive invalidations: its tracking mode, its
//! mailbox, and a `CLIENT TRACKING on BCAST` reply waiting for the primaries to confirm.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};

use super::command::{Switch, TrackingMode};
use super::{Mailbox, Tracking, TrackingEvent, Tracks};
use crate::downstream::handover::TrackingRecord;
use crate::protocol::Protocol;
use crate::router::redcar_error;

/// A reply that becomes available later (the BCAST confirmation), run as the session's next call.
type Waiting = Pin<Box<dyn Future<Output = Bytes> + Send>>;

/// What a session keeps once it tracked or could receive invalidations (boxed in its
/// `ClientState`; `None` there for every other session).
pub(crate) struct ClientTracking {
    /// The process-wide tracking table: who read which key, and the sessions' mailboxes.
    pub(super) hub: Arc<Tracking>,
    /// The session's client id, the table's key for it.
    pub(super) id: u64,
    /// Where the table drops invalidations for this session (or for the clients that redirect to
    /// it).
    mailbox: Arc<Mailbox>,
    /// The mode while tracking is on; `None` while off (the session may still receive others'
    /// redirected invalidations).
    pub(super) mode: Option<TrackingMode>,
    /// `CLIENT TRACKING on BCAST`'s reply, once every primary confirmed the prefixes (the
    /// session runs it as its next call, see [`take_wait`](super::take_wait)). In a mutex only to be `Sync`, as
    /// the session's state must be (never locked but to be taken out).
    pub(super) pending: Option<Mutex<Waiting>>,
    /// Set by `pending` when the nodes did not confirm: tracking is off for this session.
    refused: Arc<AtomicBool>,
}

// === impl ClientTracking ===

impl ClientTracking {
    /// Joins the table at once, so invalidations redirected to this session find its mailbox.
    pub(super) fn new(hub: &Arc<Tracking>, id: u64) -> ClientTracking {
        ClientTracking {
            hub: hub.clone(),
            id,
            mailbox: hub.join(id),
            mode: None,
            pending: None,
            refused: Arc::default(),
        }
    }

    /// A client that tracked in the previous process (an upgrade): tracking on again with the
    /// same options, and, since this process never saw which keys it read, one null
    /// invalidation, so the client flushes its cache (what Redis tells a client whose tracking
    /// state was lost). No reply is owed: the client asked in the other process.
    pub(crate) fn restore(hub: &Arc<Tracking>, id: u64, record: &TrackingRecord) -> ClientTracking {
        let mut tracking = ClientTracking::new(hub, id);
        tracking.switch(Switch {
            on: true,
            redirect: record.redirect,
            bcast: record.bcast,
            optin: record.optin,
            optout: record.optout,
            noloop: record.noloop,
            prefixes: record.prefixes.clone(),
        });
        tracking.pending = None;
        hub.flush_client(id);
        tracking
    }

    /// Its tracking options for an upgrade's record (`None` while tracking is off).
    pub(crate) fn record(&self) -> Option<TrackingRecord> {
        let mode = self.mode.as_ref()?;
        // BCAST without a prefix is kept as the one empty prefix; `switch` adds it back.
        let prefixes = mode
            .prefixes
            .iter()
            .filter(|p| !p.is_empty())
            .cloned()
            .collect();
        Some(TrackingRecord {
            redirect: mode.redirect,
            bcast: mode.bcast,
            optin: mode.optin,
            optout: mode.optout,
            noloop: mode.noloop,
            prefixes,
        })
    }

    /// Tracking was refused after the fact (see `refused`): off from now on.
    pub(super) fn settle(&mut self) {
        if self.refused.swap(false, Ordering::Relaxed) {
            self.off();
        }
    }

    /// The reply to `CLIENT TRACKING on BCAST` waits until every primary confirmed the
    /// session's prefixes: a write sent after it reaches a node that broadcasts it.
    fn confirm(&mut self, prefixes: Vec<Bytes>) {
        let wait = self.hub.bcast_confirmed(prefixes);
        let hub = self.hub.clone();
        let id = self.id;
        let refused = self.refused.clone();
        self.pending = Some(Mutex::new(Box::pin(async move {
            match wait.await {
                Ok(()) => Bytes::from_static(b"+OK\r\n"),
                Err(reason) => {
                    refused.store(true, Ordering::Relaxed);
                    hub.set_tracks(id, None);
                    tracing::warn!(client = id, %reason, "CLIENT TRACKING on BCAST refused");
                    redcar_error(format!("CLIENT TRACKING: {reason}; tracking stays off"))
                }
            }
        })));
    }

    /// Tracking is on: the session's commands take the nodes' tracked lanes.
    pub(crate) fn is_on(&self) -> bool {
        self.mode.is_some()
    }

    /// `CLIENT TRACKING off`, and RESET.
    pub(crate) fn off(&mut self) {
        if self.mode.take().is_some() {
            self.hub.set_tracks(self.id, None);
        }
    }

    /// Ready once invalidations wait to be written.
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.mailbox.poll_ready(cx)
    }

    /// The waiting invalidations, as `client` gets them (see `frames`).
    pub(crate) fn take_frames(&self, protocol: Protocol, subscribed: bool) -> Bytes {
        let events: Vec<TrackingEvent> = self.mailbox.take();
        let mut out = BytesMut::new();
        super::write_events(&mut out, &events, protocol, subscribed);
        out.freeze()
    }

    pub(super) fn switch(&mut self, switch: Switch) {
        if !switch.on {
            return self.off();
        }
        let mut mode = self.mode.take().unwrap_or_default();
        let mut prefixes = std::mem::take(&mut mode.prefixes);
        if switch.bcast {
            if switch.prefixes.is_empty() && !prefixes.iter().any(Bytes::is_empty) {
                prefixes.push(Bytes::new());
            }
            prefixes.extend(switch.prefixes);
            prefixes.sort();
        }
        let mode = TrackingMode {
            redirect: switch.redirect,
            bcast: switch.bcast,
            optin: switch.optin,
            optout: switch.optout,
            noloop: switch.noloop,
            caching: false,
            prefixes,
        };
        let tracks = Tracks {
            redirect: mode.redirect,
            prefixes: mode.bcast.then(|| mode.prefixes.clone()),
            broken: false,
        };
        self.hub.started(&tracks);
        let bcast = tracks.prefixes.clone();
        self.hub.set_tracks(self.id, Some(tracks));
        self.mode = Some(mode);
        if let Some(prefixes) = bcast {
            self.confirm(prefixes);
        }
    }
}

impl Drop for ClientTracking {
    fn drop(&mut self) {
        self.hub.leave(self.id);
    }
}
