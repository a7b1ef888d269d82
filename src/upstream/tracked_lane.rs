//! A tracked lane's last handshake step: turn tracking on, redirected to the node's
//! invalidation connection, in the lane's mode (default tracking, or the near cache's BCAST
//! with NOLOOP), and point it again when that connection comes back with a new id.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, Notify};

use super::pending::{frames_len, Pending};
use super::queue;
use super::tracking_feed::TrackingFeed;
use crate::protocol::{encode_command, Limits};

/// What the tracked lanes are called in the nodes' `CLIENT LIST`.
pub(crate) const LANE_NAME: &str = "redcar-tracked";
/// What the near cache's BCAST lanes are called in the nodes' `CLIENT LIST`.
pub(crate) const NEAR_LANE_NAME: &str = "redcar-near";

/// How a lane tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::upstream) enum Mode {
    /// Default mode: the node remembers the keys read on the lane (tracking clients, and the
    /// near cache's pattern and hot-key rules).
    Tracked,
    /// BCAST over the near cache's prefixes with NOLOOP: the node reports every write to
    /// those keys except the lane's own, so the near cache can keep what it writes itself.
    Near,
}

/// One of a node's tracked lanes: its queue, and how it redirects.
pub(in crate::upstream) struct TrackedLane {
    /// The lane's command queue, as for any pipelined connection.
    pub(crate) queue: queue::Sender<Pending>,
    /// The handshake's last step, shared with the invalidation connection's reconnects.
    pub(crate) redirect: Arc<LaneRedirect>,
}

/// The last step of a tracked lane's handshake: `CLIENT TRACKING on REDIRECT <id> ...` to the
/// node's invalidation connection, waiting (up to `connect_timeout`) for it to be connected.
pub(in crate::upstream) struct LaneRedirect {
    /// The node, for logs and the feed.
    pub(crate) addr: Arc<str>,
    /// Default tracking, or the near cache's BCAST.
    pub(crate) mode: Mode,
    /// The invalidation connection's client id, while it is connected.
    pub(crate) id: watch::Receiver<Option<u64>>,
    /// Cuts the invalidation connection's reconnect back-off short: a lane that just reached
    /// the node needs it now, not after a back-off grown while the node was down.
    pub(crate) wake: Arc<Notify>,
    /// How long a new lane connection waits for the invalidation connection's id
    /// (`upstream.connect_timeout`).
    pub(crate) timeout: Duration,
    /// Where the lane reports that the node forgot what it tracked (the lane's connection ended).
    pub(crate) feed: Arc<TrackingFeed>,
    /// A connection of this lane finished its handshake and has not ended: only such a lane is
    /// re-pointed when the invalidation connection comes back (connecting the others would
    /// register BCAST prefixes nobody uses).
    pub(crate) connected: AtomicBool,
}

impl std::fmt::Debug for LaneRedirect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneRedirect")
            .field("addr", &self.addr)
            .field("mode", &self.mode)
            .finish()
    }
}

impl LaneRedirect {
    /// Turns tracking on for the new lane connection `stream`, and names it (`CLIENT LIST`
    /// shows the lanes as `redcar-tracked` or `redcar-near`, the invalidation connections as
    /// `redcar-invalidations`).
    pub(in crate::upstream) async fn enable<S>(
        &self,
        mut stream: S,
        limits: &Limits,
    ) -> Result<S, String>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut ids = self.id.clone();
        if ids.borrow().is_none() {
            self.wake.notify_one();
        }
        let id = match tokio::time::timeout(self.timeout, ids.wait_for(Option::is_some)).await {
            Ok(Ok(id)) => id.unwrap_or_default(),
            _ => return Err("CLIENT TRACKING: no invalidation connection to the node".into()),
        };
        let name = match self.mode {
            Mode::Tracked => LANE_NAME,
            Mode::Near => NEAR_LANE_NAME,
        };
        let mut payload = BytesMut::from(&self.tracking_on(id)[..]);
        payload.extend_from_slice(&encode_command(
            [&b"CLIENT"[..], b"SETNAME", name.as_bytes()].into_iter(),
        ));
        stream
            .write_all(&payload)
            .await
            .map_err(|e| format!("CLIENT TRACKING: write failed: {e}"))?;
        stream
            .flush()
            .await
            .map_err(|e| format!("CLIENT TRACKING: write failed: {e}"))?;
        let mut input = BytesMut::with_capacity(64);
        let len = loop {
            if let Some(len) = frames_len(&input, 2, limits)? {
                break len;
            }
            match stream.read_buf(&mut input).await {
                Ok(0) => return Err("node closed the connection during CLIENT TRACKING".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("CLIENT TRACKING: read failed: {e}")),
            }
        };
        if &input[..len] != b"+OK\r\n+OK\r\n" {
            let line = String::from_utf8_lossy(&input[..len])
                .trim_end()
                .to_string();
            return Err(format!("CLIENT TRACKING refused by the node: {line}"));
        }
        // Set before the check: the invalidation connection publishes its new id before it
        // re-points the connected lanes, so either it sees this lane or this lane sees the id.
        self.connected.store(true, Ordering::SeqCst);
        if *self.id.borrow() != Some(id) {
            self.connected.store(false, Ordering::SeqCst);
            return Err("the invalidation connection changed during CLIENT TRACKING".into());
        }
        Ok(stream)
    }

    /// Whether a connection of this lane is up with tracking on (see `connected`).
    pub(in crate::upstream) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }

    /// What points a connected lane at the invalidation connection `id`, and how many replies
    /// it gets. A BCAST registration cannot be changed in place (its prefixes would overlap
    /// themselves), so a near lane turns tracking off and on again.
    pub(in crate::upstream) fn repoint(&self, id: u64) -> (Bytes, u32) {
        match self.mode {
            Mode::Tracked => (self.tracking_on(id), 1),
            Mode::Near => {
                let mut payload =
                    BytesMut::from(&b"*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$3\r\noff\r\n"[..]);
                payload.extend_from_slice(&self.tracking_on(id));
                (payload.freeze(), 2)
            }
        }
    }

    /// A lane connection ended: the node forgot the keys read on it (or its BCAST
    /// registration).
    pub(in crate::upstream) fn lost(&self) {
        self.connected.store(false, Ordering::SeqCst);
        self.feed.lost(&self.addr);
    }

    fn tracking_on(&self, id: u64) -> Bytes {
        match self.mode {
            Mode::Tracked => tracking_on(id, None),
            Mode::Near => tracking_on(id, Some(&self.feed.near_prefixes())),
        }
    }
}

/// `CLIENT TRACKING on REDIRECT <id>`, and with `bcast` (the minimal cover of the prefixes;
/// empty or `""`: every key) `BCAST [PREFIX p ...] NOLOOP`.
fn tracking_on(id: u64, bcast: Option<&[Bytes]>) -> Bytes {
    let id = id.to_string();
    let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"on", b"REDIRECT", id.as_bytes()];
    if let Some(prefixes) = bcast {
        args.push(b"BCAST");
        // `""` covers every key: BCAST without a prefix (a cover holding it holds nothing else).
        for prefix in prefixes.iter().filter(|p| !p.is_empty()) {
            args.push(b"PREFIX");
            args.push(prefix);
        }
        args.push(b"NOLOOP");
    }
    encode_command(args.into_iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracked_lane_redirects_to_the_invalidation_connection() {
        assert_eq!(
            &tracking_on(42, None)[..],
            b"*5\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\non\r\n$8\r\nREDIRECT\r\n$2\r\n42\r\n"
        );
    }

    #[test]
    fn a_near_lane_registers_the_prefixes_in_bcast_with_noloop() {
        let prefixes = [Bytes::from_static(b"a:"), Bytes::from_static(b"b")];
        let command = tracking_on(7, Some(&prefixes));
        assert_eq!(
            &command[..],
            &b"*11\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\non\r\n$8\r\nREDIRECT\r\n$1\r\n7\r\n\
               $5\r\nBCAST\r\n$6\r\nPREFIX\r\n$2\r\na:\r\n$6\r\nPREFIX\r\n$1\r\nb\r\n$6\r\nNOLOOP\r\n"[..]
        );
        let every = tracking_on(7, Some(&[Bytes::new()]));
        assert!(every.ends_with(b"$5\r\nBCAST\r\n$6\r\nNOLOOP\r\n"));
    }

    fn lane(mode: Mode, feed: Arc<TrackingFeed>) -> LaneRedirect {
        LaneRedirect {
            addr: Arc::from("127.0.0.1:1"),
            mode,
            id: watch::channel(None).1,
            wake: Arc::new(Notify::new()),
            timeout: Duration::from_secs(1),
            feed,
            connected: AtomicBool::new(false),
        }
    }

    #[test]
    fn a_near_lane_is_repointed_by_turning_tracking_off_and_on_with_its_prefixes() {
        let feed = Arc::new(TrackingFeed::default());
        feed.set_near_prefixes(vec![Bytes::from_static(b"ab"), Bytes::from_static(b"a")]);
        let (tracked, frames) = lane(Mode::Tracked, feed.clone()).repoint(9);
        assert_eq!((tracked, frames), (tracking_on(9, None), 1));
        let (near, frames) = lane(Mode::Near, feed).repoint(9);
        assert_eq!(frames, 2);
        assert!(near.starts_with(b"*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$3\r\noff\r\n"));
        // The minimal cover: `ab` is inside `a` (overlapping prefixes are refused by Redis).
        assert!(near.ends_with(&tracking_on(9, Some(&[Bytes::from_static(b"a")]))));
    }
}
