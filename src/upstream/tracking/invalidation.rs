//! A node's invalidation connection: RESP3, asks its own `CLIENT ID` (the tracked lanes'
//! REDIRECT target), then reads `invalidate` pushes until it breaks; reconnects with back-off
//! while the node's lanes exist.
//!
//! Why one connection of its own per node: Redis delivers a tracked connection's invalidations
//! either inline (RESP3 pushes mixed into its replies) or to another connection named by
//! `REDIRECT`. redcar's tracked lanes carry many clients' commands, so their invalidations go to
//! this one connection, which does nothing but read them and hand each key to the feed, which
//! finds the clients that read it. What holds: while this connection is down its published id is
//! `None`, and a tracked lane that connects meanwhile wakes it and waits for an id before turning
//! tracking on (failing its connect if none comes in time), so no lane tracks into the void; when
//! it comes back after a loss, the lanes are pointed at the new id and every tracking client is
//! told to flush, because invalidations may have been missed in between. With the heartbeat on,
//! a node that leaves 64 pings in a row unanswered is given up as stuck.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{watch, Notify};

use super::super::conn;
use super::super::node_context::NodeContext;
use super::super::pending::{frames_len, Pending, ReplyTo};
use super::super::reply_slot;
use super::super::tracked_lane::TrackedLane;
use super::super::tracking_feed::{clock_ms, minimal_cover, ProvenAt, TrackingFeed};
use crate::protocol::{encode_command, header_value, Limits};

/// The longest back-off is `reconnect_backoff` times this, as for the data connections
/// (`conn::run`): 800 ms by default.
const MAX_BACKOFF_FACTOR: u32 = 16;

/// What the invalidation connection tells the rest of the node.
pub(super) struct Published {
    /// Its client id (`None` while down): the tracked lanes' REDIRECT target.
    pub(crate) id: watch::Sender<Option<u64>>,
    /// The BCAST prefixes the node confirmed on it (empty while down).
    pub(crate) registered: watch::Sender<Vec<Bytes>>,
    /// The send time of the latest `PING` the node answered (heartbeat on).
    pub(crate) heard: Arc<ProvenAt>,
    /// Notified by a tracked lane that connected while this connection is down: retry now.
    pub(crate) wake: Arc<Notify>,
}

/// Keeps the node's invalidation connection up while its lanes exist (`lanes` upgrades), and
/// publishes what it learns in `published`.
pub(super) async fn run(
    context: Arc<NodeContext>,
    published: Published,
    lanes: Weak<[TrackedLane; 4]>,
    feed: Arc<TrackingFeed>,
) {
    let Published {
        id,
        registered,
        heard,
        wake,
    } = published;
    let addr = context.addr.clone();
    let mut backoff = context.config.reconnect_backoff;
    let max_backoff = context.config.reconnect_backoff * MAX_BACKOFF_FACTOR;
    let mut first = true;
    loop {
        if lanes.strong_count() == 0 {
            return;
        }
        let session = async {
            let mut stream =
                conn::connect(&addr, &context.config, &context.connect_limit, &context.tls).await?;
            stream = context.greet(stream).await?;
            let mut input = BytesMut::with_capacity(256);
            let client = client_id(&mut stream, &mut input, &context.limits).await?;
            id.send_replace(Some(client));
            if !std::mem::take(&mut first) {
                // The lanes still redirect to the old id: point them here, then flush what
                // was read while no one listened.
                redirect_lanes(&lanes, client).await;
                feed.lost(&addr);
            }
            tracing::debug!(node = %addr, client, "invalidation connection up");
            let mut state = Listening {
                limits: &context.limits,
                addr: &addr,
                feed: &feed,
                registered: &registered,
                acks: VecDeque::new(),
                heard: &heard,
                pings: VecDeque::new(),
            };
            state.listen(&mut stream, &mut input).await
        };
        let reason = tokio::select! {
            reason = session => reason,
            () = id.closed() => return,
        };
        let reason = reason.err().unwrap_or_else(|| "closed".to_string());
        registered.send_replace(Vec::new());
        if id.send_replace(None).is_some() {
            tracing::warn!(node = %addr, %reason, "invalidation connection lost; tracking clients are told to flush");
            feed.lost(&addr);
            backoff = context.config.reconnect_backoff;
        } else {
            tracing::debug!(node = %addr, %reason, "invalidation connection failed");
            backoff = (backoff * 2).min(max_backoff);
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = wake.notified() => {}
            () = id.closed() => return,
        }
    }
}

/// What the invalidation connections are called in the nodes' `CLIENT LIST`.
pub(crate) const NAME: &str = "redcar-invalidations";

/// Names the fresh connection and asks its `CLIENT ID`.
async fn client_id<S>(stream: &mut S, input: &mut BytesMut, limits: &Limits) -> Result<u64, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut payload = BytesMut::new();
    payload.extend_from_slice(&encode_command(
        [&b"CLIENT"[..], b"SETNAME", NAME.as_bytes()].into_iter(),
    ));
    payload.extend_from_slice(b"*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n");
    stream
        .write_all(&payload)
        .await
        .map_err(|e| format!("CLIENT ID: write failed: {e}"))?;
    stream
        .flush()
        .await
        .map_err(|e| format!("CLIENT ID: write failed: {e}"))?;
    let named = next_frame(stream, input, limits).await?;
    if &named[..] != b"+OK\r\n" {
        let line = String::from_utf8_lossy(&named).trim_end().to_string();
        return Err(format!("CLIENT SETNAME refused: {line}"));
    }
    let frame = next_frame(stream, input, limits).await?;
    match header_value(&frame, b':') {
        Some((id, _)) if id > 0 => Ok(id as u64),
        _ => Err(format!(
            "CLIENT ID: unexpected reply {:?}",
            String::from_utf8_lossy(&frame).trim_end()
        )),
    }
}

/// A connected invalidation connection's side of things.
struct Listening<'a> {
    /// Parse limits for the pushes (a key in an invalidation is as big as a key can be).
    limits: &'a Limits,
    /// The node, for logs and the feed.
    addr: &'a Arc<str>,
    /// Where invalidations go: the process-wide feed, which knows who tracks what.
    feed: &'a TrackingFeed,
    /// The BCAST prefixes the node confirmed (see `Node::bcast_registered`).
    registered: &'a watch::Sender<Vec<Bytes>>,
    /// BCAST registrations sent and not yet answered, in order: the replies still owed, the
    /// cover in force once they are in, and whether the node refused one.
    acks: VecDeque<(usize, Vec<Bytes>, bool)>,
    /// Told when the node answers a heartbeat `PING`.
    heard: &'a ProvenAt,
    /// The send times of the heartbeat `PING`s not answered yet, oldest first.
    pings: VecDeque<u64>,
}

/// A heartbeat's answer (a BCAST registration is answered `+OK` or an error, never this).
const PONG: &[u8] = b"+PONG\r\n";

/// Unanswered heartbeats after which the connection is given up as stuck.
const MAX_UNANSWERED: usize = 64;

impl Listening<'_> {
    /// Reads pushes until the connection fails; each `invalidate` goes to the feed. Registers
    /// the BCAST prefixes clients want as they change (the replies come back among the pushes,
    /// and confirm the registration once all of one are in).
    async fn listen<S>(&mut self, stream: &mut S, input: &mut BytesMut) -> Result<(), String>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut wanted = self.feed.bcast();
        wanted.mark_changed();
        let mut sent: Vec<Bytes> = Vec::new();
        let mut feed_open = true;
        let beat = self.feed.heartbeat();
        let mut heartbeat = tokio::time::interval(beat.unwrap_or(Duration::from_secs(3600)));
        heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            while let Some(len) = frames_len(input, 1, self.limits)? {
                let frame = input.split_to(len).freeze();
                match parse_invalidation(&frame) {
                    Some(keys) => self.feed.deliver(self.addr, keys),
                    None if frame.first() == Some(&b'>') => {}
                    None if &frame[..] == PONG && !self.pings.is_empty() => {
                        if let Some(sent) = self.pings.pop_front() {
                            self.heard.answered(sent);
                        }
                    }
                    None => self.acked(&frame),
                }
            }
            tokio::select! {
                _ = heartbeat.tick(), if beat.is_some() => {
                    if self.pings.len() >= MAX_UNANSWERED {
                        return Err("the node stopped answering heartbeats".into());
                    }
                    self.pings.push_back(clock_ms());
                    stream.write_all(b"*1\r\n$4\r\nPING\r\n").await.map_err(|e| format!("write failed: {e}"))?;
                    stream.flush().await.map_err(|e| format!("write failed: {e}"))?;
                }
                read = stream.read_buf(input) => match read {
                    Ok(0) => return Err("closed by the node".into()),
                    Ok(_) => {}
                    Err(e) => return Err(format!("read failed: {e}")),
                },
                changed = wanted.changed(), if feed_open => {
                    feed_open = changed.is_ok();
                    let want = wanted.borrow_and_update().clone();
                    if let Some((payload, now, replies)) = bcast_commands(&sent, &want) {
                        stream.write_all(&payload).await.map_err(|e| format!("write failed: {e}"))?;
                        stream.flush().await.map_err(|e| format!("write failed: {e}"))?;
                        self.acks.push_back((replies, now.clone(), false));
                        sent = now;
                    }
                }
            }
        }
    }

    /// A reply to a BCAST registration (the connection sends nothing else after its handshake).
    fn acked(&mut self, frame: &[u8]) {
        let Some((owed, _, refused)) = self.acks.front_mut() else {
            return;
        };
        if frame.first() == Some(&b'-') {
            tracing::warn!(
                node = %self.addr,
                reply = %String::from_utf8_lossy(frame).trim_end(),
                "BCAST registration refused"
            );
            *refused = true;
        }
        *owed = owed.saturating_sub(1);
        if *owed == 0 {
            if let Some((_, now, false)) = self.acks.pop_front() {
                self.registered.send_replace(now);
            }
        }
    }
}

/// What to send so the connection broadcasts every prefix of `want` (a minimal cover), given
/// those `registered` already, and what is registered after it; `None` when nothing is to do.
/// New prefixes are added to those in force; one that would overlap a registered one (Redis
/// refuses overlaps) makes the registration start again: `off`, then `on` with all of `want`,
/// pipelined, so no write runs in between. The last item: how many replies the node owes.
///
/// Registrations are pipelined on this connection, which carries nothing else after its
/// handshake, so the replies can be matched to them by order.
fn bcast_commands(registered: &[Bytes], want: &[Bytes]) -> Option<(Bytes, Vec<Bytes>, usize)> {
    let new: Vec<&Bytes> = want
        .iter()
        .filter(|p| !registered.iter().any(|q| p.starts_with(q)))
        .collect();
    if new.is_empty() {
        return None;
    }
    let overlap = new
        .iter()
        .any(|p| registered.iter().any(|q| q.starts_with(p)));
    let mut payload = BytesMut::new();
    let (list, now): (Vec<&Bytes>, Vec<Bytes>) = if overlap {
        payload.extend_from_slice(b"*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$3\r\noff\r\n");
        (want.iter().collect(), want.to_vec())
    } else {
        let mut now: Vec<Bytes> = registered.to_vec();
        now.extend(new.iter().map(|p| (*p).clone()));
        (new, minimal_cover(now))
    };
    let mut args: Vec<&[u8]> = vec![b"CLIENT", b"TRACKING", b"on", b"BCAST"];
    // `""` (every key) is BCAST without a prefix; a cover holding it holds nothing else.
    for prefix in list.iter().filter(|p| !p.is_empty()) {
        args.push(b"PREFIX");
        args.push(prefix);
    }
    payload.extend_from_slice(&encode_command(args.into_iter()));
    Some((payload.freeze(), now, 1 + usize::from(overlap)))
}

/// The next complete frame, reading as needed.
///
/// Used only during the handshake (`CLIENT SETNAME`, `CLIENT ID`), before any push can arrive.
async fn next_frame<S>(
    stream: &mut S,
    input: &mut BytesMut,
    limits: &Limits,
) -> Result<Bytes, String>
where
    S: AsyncRead + Unpin,
{
    loop {
        if let Some(len) = frames_len(input, 1, limits)? {
            return Ok(input.split_to(len).freeze());
        }
        match stream.read_buf(input).await {
            Ok(0) => return Err("closed by the node".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("read failed: {e}")),
        }
    }
}

/// Points every connected lane at the invalidation connection `id` (queued behind what they
/// carry). A lane whose node refuses closes (`QUIT`): it reconnects through its handshake, and
/// its end flushes what it tracked.
async fn redirect_lanes(lanes: &Weak<[TrackedLane; 4]>, id: u64) {
    let Some(lanes) = lanes.upgrade() else {
        return;
    };
    let mut waiting = Vec::new();
    for (i, lane) in lanes.iter().enumerate() {
        if !lane.redirect.is_connected() {
            continue;
        }
        let (reply, receive) = reply_slot::channel();
        let (payload, frames) = lane.redirect.repoint(id);
        let pending = Pending {
            payload,
            asking: false,
            frames,
            reply: ReplyTo::Slot(reply),
        };
        if lane.queue.send(pending).is_ok() {
            waiting.push((i, frames, receive));
        }
    }
    let lanes = Arc::downgrade(&lanes);
    for (i, frames, receive) in waiting {
        // A lane that fails here reconnects through its handshake, which redirects it too.
        let Ok(Ok(reply)) = receive.await else {
            continue;
        };
        if reply.chunks(5).len() == frames as usize && reply.chunks(5).all(|r| r == b"+OK\r\n") {
            continue;
        }
        tracing::warn!(reply = %String::from_utf8_lossy(&reply).trim_end(), "a tracked lane refused to follow the invalidation connection; closing it");
        if let Some(lane) = lanes.upgrade().as_ref().and_then(|l| l.get(i)) {
            let (quit, _) = reply_slot::channel();
            let _ = lane.queue.send(Pending {
                payload: Bytes::from_static(b"*1\r\n$4\r\nQUIT\r\n"),
                asking: false,
                frames: 1,
                reply: ReplyTo::Slot(quit),
            });
        }
    }
}

/// The keys of an `invalidate` push (`>2 $10 invalidate *N $.. ..`): `Some(None)` for the null
/// one (the node flushed, or cannot tell which keys), `None` when `frame` is not one.
///
/// Pushes other than `invalidate` (none are expected here) are `None` and ignored by the caller.
/// The key count is trusted only as far as the bytes go: a count larger than the frame is `None`,
/// not an allocation of that size.
fn parse_invalidation(frame: &[u8]) -> Option<Option<Vec<Bytes>>> {
    let (2, at) = header_value(frame, b'>')? else {
        return None;
    };
    let mut rest = frame.get(at..)?;
    let (10, at) = header_value(rest, b'$')? else {
        return None;
    };
    if rest.get(at..at + 10)? != b"invalidate" {
        return None;
    }
    rest = rest.get(at + 12..)?;
    if rest.starts_with(b"_\r\n") || rest.starts_with(b"$-1\r\n") || rest.starts_with(b"*-1\r\n") {
        return Some(None);
    }
    let (count, at) = header_value(rest, b'*')?;
    let mut rest = Bytes::copy_from_slice(rest.get(at..)?);
    let mut keys = Vec::with_capacity(usize::try_from(count).ok()?.min(1024));
    for _ in 0..count {
        let (len, at) = header_value(&rest, b'$')?;
        let len = usize::try_from(len).ok()?;
        if rest.len() < at + len + 2 {
            return None;
        }
        rest.advance(at);
        keys.push(rest.split_to(len));
        rest.advance(2);
    }
    Some(Some(keys))
}

#[cfg(test)]
#[path = "invalidation_tests.rs"]
mod tests;
