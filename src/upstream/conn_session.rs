//! An established node connection: writes queued commands in batches, hands each reply frame to
//! the command waiting at the front of the in-flight queue, and tells what was in flight when the
//! connection fails.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use super::super::batch::Batching;
use super::super::error::turned_replica;
use super::super::health::Health;
use super::super::inbox::{Delivered, Shared};
use super::super::node_context::NodeContext;
use super::super::pending::{frames_len, Pending, ReplyTo, ASKING};
use super::super::queue;
use super::super::standby::{IdleTimer, Standby};
use super::super::stream::{FlushOnEmpty, NodeStream};
use super::super::NodeMetrics;
use super::super::UpstreamError;
use crate::metrics::clock::Since;
use crate::metrics::LocalLatency;
use crate::protocol::Limits;

const READ_CHUNK: usize = 16 * 1024;
/// A connection buffer that grew past this for a large value is replaced by a fresh one once
/// empty, so a 1 MB reply or request is not held for the connection's life.
const KEEP_AT_MOST: usize = 4 * READ_CHUNK;

/// After a read: a buffer that grew past [`KEEP_AT_MOST`] for a large value is replaced by a
/// fresh one once empty; one nearly full gets room for the next read.
#[inline]
fn room_after_read(input: &mut BytesMut, grown: &mut bool) {
    if !fresh_once_empty(input, grown) && input.capacity() - input.len() < 512 {
        input.reserve(READ_CHUNK);
        *grown |= input.capacity() > KEEP_AT_MOST;
    }
}

/// Replaces `buffer`, grown for a large value, by a fresh one once it is empty, and says a large
/// buffer was freed: the thread's heap is collected at the next quiet moment
/// (`crate::memory`), so the value's pages do not stay resident for the connection's life.
#[inline]
fn fresh_once_empty(buffer: &mut BytesMut, grown: &mut bool) -> bool {
    if !(*grown && buffer.is_empty()) {
        return false;
    }
    *grown = false;
    *buffer = BytesMut::with_capacity(READ_CHUNK);
    crate::memory::large_freed();
    true
}

/// Replies of one read bound for session inboxes, handed over per session once the read is
/// parsed (one lock and at most one wake-up per session and read).
type ForInboxes = Vec<(Arc<Shared>, u64, Delivered)>;

/// Hands over `replies`, each run of replies to the same inbox under one lock.
fn hand_over(replies: &mut ForInboxes) {
    let mut replies = replies.drain(..).peekable();
    while let Some((inbox, seq, first)) = replies.next() {
        let same = std::iter::from_fn(|| {
            replies
                .next_if(|(next, _, _)| Arc::ptr_eq(next, &inbox))
                .map(|(_, seq, delivered)| (seq, delivered))
        });
        inbox.deliver(std::iter::once((seq, first)).chain(same));
    }
}

/// Replies delivered in one read, for the node metrics.
#[derive(Default)]
struct ReplyBatch {
    count: u64,
    /// The replies' latencies added up, in nanoseconds.
    latency_ns: u64,
    /// At least one reply was not an error: the node is serving.
    answered: bool,
}

/// A written command waiting for its reply.
struct InFlight {
    reply: ReplyTo,
    /// Replies to discard before ours (the `+OK` of a leading `ASKING`).
    skip: u8,
    /// Reply frames that make up our reply.
    frames: u32,
    /// Offsets of this command's bytes in the connection's output stream, to tell after a
    /// failure whether it was ever written.
    start: u64,
    /// When its batch was queued for writing (one clock read per batch), for node latency.
    queued_at: Instant,
}

/// The state of one established connection.
pub(super) struct Session {
    addr: Arc<str>,
    limits: Limits,
    in_flight: VecDeque<InFlight>,
    /// Bytes queued into the write buffer over the connection's life.
    queued: u64,
    /// Bytes actually written to the socket over the connection's life.
    written: u64,
    metrics: NodeMetrics,
    health: Arc<Health>,
    /// The clock read for the batch being queued.
    batch_at: Instant,
    /// When to take more commands and when to write them (in-flight cap, flush window).
    batching: Batching,
    /// Replies of the read being parsed that go to session inboxes (kept for its capacity).
    for_inboxes: ForInboxes,
    /// The node's latency histogram, fed once per read (see `LocalLatency`). Kept, not made
    /// per read: a fresh one is 680 bytes to zero for every read.
    duration: LocalLatency,
    /// The node's standby flag: shortens how long this connection may stay idle.
    standby: Arc<Standby>,
    /// The last replies said the node turned replica (see [`turned_replica`]): nothing still
    /// in flight behind them can have been applied.
    demoted: bool,
}

impl Session {
    pub(super) fn new(context: &NodeContext) -> Session {
        Session {
            addr: context.addr.clone(),
            limits: context.limits.clone(),
            in_flight: VecDeque::new(),
            queued: 0,
            written: 0,
            metrics: context.metrics.clone(),
            health: context.health.clone(),
            batch_at: Instant::now(),
            batching: Batching::new(&context.config, context.metrics.in_flight_capped.clone()),
            for_inboxes: Vec::new(),
            duration: LocalLatency::default(),
            standby: context.standby.clone(),
            demoted: false,
        }
    }

    /// Runs until the connection fails (Err) or the queue closes and all replies are in (Ok).
    /// Plain TCP gets its owned halves (no lock, no flush); TLS is split through a lock and
    /// flushed after each write, since rustls may hold encrypted records back.
    pub(super) async fn serve(
        &mut self,
        stream: NodeStream,
        first: Pending,
        rx: &mut queue::Receiver<Pending>,
        idle_timeout: Duration,
    ) -> Result<(), String> {
        match stream {
            NodeStream::Tcp(tcp) => {
                let (reader, writer) = tcp.into_split();
                self.serve_halves::<_, _, false>(reader, writer, first, rx, idle_timeout)
                    .await
            }
            NodeStream::Tls(tls) => {
                let (reader, writer) = tokio::io::split(tls);
                let writer = FlushOnEmpty(writer);
                self.serve_halves::<_, _, true>(reader, writer, first, rx, idle_timeout)
                    .await
            }
        }
    }

    /// The connection's loop over one reader and one writer. With `FLUSH` (TLS), the writer is
    /// flushed by an empty write ([`FlushOnEmpty`]) once all queued bytes are written, so plain
    /// TCP runs exactly the same `write` future as before TLS existed.
    async fn serve_halves<R, W, const FLUSH: bool>(
        &mut self,
        mut reader: R,
        mut writer: W,
        first: Pending,
        rx: &mut queue::Receiver<Pending>,
        idle_timeout: Duration,
    ) -> Result<(), String>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        // Bytes handed to the writer that it may still hold (TLS records not yet sent).
        let mut unflushed = false;
        let mut out = BytesMut::with_capacity(READ_CHUNK);
        let mut input = BytesMut::with_capacity(READ_CHUNK);
        // The buffers grew for a large value (capacity alone cannot tell once they are used up).
        let (mut out_grown, mut input_grown) = (false, false);
        let mut open = true;
        self.batch_at = Instant::now();
        // `upstream.idle_timeout` (a second on standby): unused for that long, the connection is
        // closed; the next command for it connects again. The timer is re-armed only when it
        // fires (from the last batch's time) or the standby flag changes, not on every batch.
        let mut idle = IdleTimer::new(&self.standby, idle_timeout);
        let before = self.in_flight.len();
        self.enqueue(first, &mut out);
        self.count_queued(before);
        loop {
            if !open && out.is_empty() && self.in_flight.is_empty() {
                return Ok(());
            }
            // TLS: what was written must reach the node before the loop waits for anything
            // else — everything queued is written, or the flush window holds the rest.
            let flush_now = FLUSH && unflushed && (out.is_empty() || !self.batching.may_write());
            tokio::select! {
                biased;
                read = reader.read_buf(&mut input) => {
                    match read {
                        Ok(0) => return Err("node closed the connection".to_string()),
                        Ok(_) => self.deliver(&mut input)?,
                        Err(e) => return Err(format!("read failed: {e}")),
                    }
                    room_after_read(&mut input, &mut input_grown);
                }
                wrote = writer.write(if flush_now { &[] } else { &out[..] }),
                    if flush_now || (!out.is_empty() && self.batching.may_write()) =>
                {
                    let n = wrote.map_err(|e| format!("write failed: {e}"))?;
                    if !flush_now {
                        self.wrote(n, &mut out, &mut out_grown);
                    }
                    // A flush leaves nothing held; written bytes may be (TLS).
                    unflushed = FLUSH && !flush_now;
                }
                next = rx.recv(), if open && self.batching.has_room(out.len(), self.in_flight.len()) => match next {
                    Some(pending) => self.queue_batch(pending, rx, &mut out, &mut out_grown).await,
                    None => {
                        open = false;
                        self.batching.release();
                    }
                },
                // `upstream.flush_interval`: the batch waited long enough for company.
                () = self.batching.window(), if self.batching.holding() => self.batching.release(),
                // Polled only while nothing is in flight: no timer work under load.
                () = idle.expired(self.batch_at), if self.in_flight.is_empty() && out.is_empty() => {
                    tracing::debug!(node = %self.addr, standby = self.standby.is_on(), "closing idle node connection");
                    return Ok(());
                }
            }
        }
    }

    /// Queues one batch into `out` after `pending` woke the loop: `pending`, everything queued
    /// behind it, and what the sessions ready right now queue during one yield, so many clients
    /// share one write syscall. One clock read and one metrics update per batch, not per command.
    async fn queue_batch(
        &mut self,
        pending: Pending,
        rx: &mut queue::Receiver<Pending>,
        out: &mut BytesMut,
        out_grown: &mut bool,
    ) {
        let before = self.in_flight.len();
        let fresh = out.is_empty();
        self.batch_at = Instant::now();
        self.enqueue(pending, out);
        self.take_queued(rx, out);
        // End of the turn: let the sessions that are ready right now queue their commands too.
        tokio::task::yield_now().await;
        self.take_queued(rx, out);
        self.count_queued(before);
        self.batching.queued(fresh, out.len(), self.in_flight.len());
        *out_grown |= out.len() > KEEP_AT_MOST;
    }

    /// Accounts for `n` bytes the writer took from `out`: they count as written (which tells
    /// after a failure what may have run), and a buffer grown for a large request is let go
    /// once empty.
    #[inline]
    fn wrote(&mut self, n: usize, out: &mut BytesMut, out_grown: &mut bool) {
        out.advance(n);
        self.written += n as u64;
        fresh_once_empty(out, out_grown);
    }

    /// Coalesce: takes everything already queued into the same write.
    fn take_queued(&mut self, rx: &mut queue::Receiver<Pending>, out: &mut BytesMut) {
        while self.batching.has_room(out.len(), self.in_flight.len()) {
            match rx.try_recv() {
                Some(pending) => self.enqueue(pending, out),
                None => break,
            }
        }
    }

    fn enqueue(&mut self, pending: Pending, out: &mut BytesMut) {
        let start = self.queued;
        if pending.asking {
            out.extend_from_slice(ASKING);
        }
        out.extend_from_slice(&pending.payload);
        self.queued +=
            (pending.payload.len() + if pending.asking { ASKING.len() } else { 0 }) as u64;
        self.in_flight.push_back(InFlight {
            reply: pending.reply,
            skip: u8::from(pending.asking),
            frames: pending.frames.max(1),
            start,
            queued_at: self.batch_at,
        });
    }

    /// Counts the commands queued from in-flight entry `from` on (an entry of several frames is
    /// that many commands). Metrics are updated once per batch, not per command: fewer
    /// contended atomic operations.
    fn count_queued(&self, from: usize) {
        let commands: u64 = self
            .in_flight
            .range(from..)
            .map(|f| u64::from(f.frames))
            .sum();
        self.metrics.requests.inc_by(commands);
        self.metrics.all_requests.inc_by(commands);
        self.metrics.in_flight.inc_by(commands as i64);
    }

    /// Hands every complete reply frame in `input` to the oldest waiting command.
    fn deliver(&mut self, input: &mut BytesMut) -> Result<(), String> {
        let mut batch = ReplyBatch::default();
        let result = self.deliver_frames(input, Since::new(Instant::now()), &mut batch);
        hand_over(&mut self.for_inboxes);
        let latency = Duration::from_nanos(batch.latency_ns);
        self.metrics.record_replies(batch.count, latency);
        self.duration.flush_into(&self.metrics.duration);
        if batch.count > 0 {
            self.health
                .observe_latency(latency / u32::try_from(batch.count).unwrap_or(u32::MAX));
        }
        if batch.answered {
            self.health.record_success();
        }
        result
    }

    fn deliver_frames(
        &mut self,
        input: &mut BytesMut,
        mut now: Since,
        batch: &mut ReplyBatch,
    ) -> Result<(), String> {
        loop {
            // A push is never a reply: a tracked lane whose invalidation connection was lost
            // gets Redis's `tracking-redir-broken` (see `tracking`); nothing else pushes here.
            if input.first() == Some(&b'>') {
                match frames_len(input, 1, &self.limits)? {
                    Some(len) => input.advance(len),
                    None => return Ok(()),
                }
                continue;
            }
            let Some(front) = self.in_flight.front_mut() else {
                if input.is_empty() {
                    return Ok(());
                }
                return Err("reply with no command waiting for it".to_string());
            };
            while front.skip > 0 {
                match frames_len(input, 1, &self.limits)? {
                    Some(len) => input.advance(len),
                    None => return Ok(()),
                }
                front.skip -= 1;
            }
            let Some(len) = frames_len(input, front.frames, &self.limits)? else {
                return Ok(());
            };
            let frame = input.split_to(len).freeze();
            // Errors after the role change (-MOVED, -READONLY) keep the mark; a success clears it.
            self.demoted = turned_replica(&frame) || (self.demoted && frame.first() == Some(&b'-'));
            if let Some(done) = self.in_flight.pop_front() {
                // The commands of one batch share `queued_at`: measured once (see `Since`).
                let elapsed = now.nanos(done.queued_at);
                self.duration.observe_ns(elapsed);
                batch.count += u64::from(done.frames);
                let latency = elapsed.saturating_mul(u64::from(done.frames));
                batch.latency_ns = batch.latency_ns.saturating_add(latency);
                batch.answered |= frame.first() != Some(&b'-');
                // The waiter may have given up (deadline); its reply is dropped.
                match done.reply {
                    ReplyTo::Slot(slot) => slot.send(Ok(frame)),
                    ReplyTo::Inbox(delivery) => {
                        if let Some((inbox, seq)) = delivery.take() {
                            self.for_inboxes.push((inbox, seq, Ok(Ok(frame))));
                        }
                    }
                }
            }
        }
    }

    /// After a connection failure: commands never written may be retried; the rest may have run.
    pub(super) fn fail_in_flight(&mut self, reason: &str) {
        let commands: u64 = self.in_flight.iter().map(|f| u64::from(f.frames)).sum();
        self.metrics.in_flight.dec_by(commands as i64);
        for waiting in self.in_flight.drain(..) {
            let error = if waiting.start >= self.written || self.demoted {
                UpstreamError::NotSent {
                    addr: self.addr.clone(),
                    reason: reason.to_string(),
                }
            } else {
                UpstreamError::Lost {
                    addr: self.addr.clone(),
                    reason: reason.to_string(),
                }
            };
            waiting.reply.send(Err(error));
        }
    }
}

#[cfg(test)]
#[path = "conn_session_tests.rs"]
mod tests;
