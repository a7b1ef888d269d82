//! The bookkeeping of one established node connection, without its I/O: commands appended to
//! the write buffer in order, each reply frame handed to the command waiting at the front, and
//! what was in flight when the connection fails. Two drivers use it: the tokio task of a
//! connection (`conn/session.rs`) and a worker's event loop (`loop_conn.rs`).
//!
//! What holds: `in_flight` lists the written-or-queued commands in the order their bytes were
//! queued, and a node answers in that order, so the front entry always owns the next reply frame; a
//! reply with nothing waiting, or a frame the parser rejects, is a broken connection (the caller
//! closes it and fails what is in flight). The byte offsets `queued` and `written` are what make a
//! failure honest: a command whose bytes never reached the socket is `NotSent` and may be retried
//! anywhere, one partly or wholly written is `Lost` and may have run. Metrics and health are
//! updated once per batch or read, not per command, to keep contended atomics off the per-command
//! path.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::time::Instant;

use super::error::turned_replica;
use super::health::Health;
use super::inbox::{Delivered, Shared};
use super::pending::{frames_len, LoopWaiter, Pending, ReplyTo, ASKING};
use super::NodeMetrics;
use super::UpstreamError;
use crate::metrics::clock::ElapsedClock;
use crate::metrics::LocalLatency;
use crate::protocol::Limits;

/// Where the replies to an event loop's own commands go (see [`LoopWaiter`]).
pub(crate) trait LoopSink {
    /// The reply to `to`'s command is the frame at the front of `frame`.
    fn reply(&mut self, to: LoopWaiter, frame: ReplyFrame<'_>);
    /// `to`'s command got no reply: the connection failed (`error` says whether it was sent).
    fn failed(&mut self, to: LoopWaiter, error: UpstreamError);
}

/// A sink for a driver that never queues loop commands (the tokio connection task).
pub(super) struct NoLoop;

impl LoopSink for NoLoop {
    fn reply(&mut self, _to: LoopWaiter, _frame: ReplyFrame<'_>) {
        debug_assert!(false, "a loop command on a task-driven connection");
    }
    fn failed(&mut self, _to: LoopWaiter, _error: UpstreamError) {
        debug_assert!(false, "a loop command on a task-driven connection");
    }
}

/// One reply frame at the front of a connection's input. The sink copies it ([`bytes`]) or
/// keeps it without a copy ([`keep`]); either way it leaves the input when this is dropped.
///
/// [`bytes`]: ReplyFrame::bytes
/// [`keep`]: ReplyFrame::keep
pub(crate) struct ReplyFrame<'a> {
    /// The connection's read buffer; the frame is its first `len` bytes.
    input: &'a mut BytesMut,
    /// The frame's length in bytes; 0 once kept, so the drop does not advance twice.
    len: usize,
}

impl ReplyFrame<'_> {
    /// The frame's bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.input[..self.len]
    }

    /// The frame as its own `Bytes` (a slice of the connection's buffer: no copy).
    pub(crate) fn keep(mut self) -> Bytes {
        let len = std::mem::take(&mut self.len);
        self.input.split_to(len).freeze()
    }
}

impl Drop for ReplyFrame<'_> {
    fn drop(&mut self) {
        self.input.advance(self.len);
    }
}

/// How much a read asks for at least (16 KiB): enough for a pipeline's worth of small replies in
/// one system call.
pub(super) const READ_CHUNK: usize = 16 * 1024;
/// A connection buffer that grew past this for a large value is replaced by a fresh one once
/// empty, so a 1 MB reply or request is not held for the connection's life.
pub(super) const KEEP_AT_MOST: usize = 4 * READ_CHUNK;

/// After a read: a buffer that grew past [`KEEP_AT_MOST`] for a large value is replaced by a
/// fresh one once empty; one nearly full gets room for the next read.
#[inline]
pub(super) fn room_after_read(input: &mut BytesMut, grown: &mut bool) {
    if !fresh_once_empty(input, grown) && input.capacity() - input.len() < 512 {
        input.reserve(READ_CHUNK);
        *grown |= input.capacity() > KEEP_AT_MOST;
    }
}

/// Replaces `buffer`, grown for a large value, by a fresh one once it is empty, and says a large
/// buffer was freed: the thread's heap is collected at the next quiet moment
/// (`crate::memory`), so the value's pages do not stay resident for the connection's life.
#[inline]
pub(super) fn fresh_once_empty(buffer: &mut BytesMut, grown: &mut bool) -> bool {
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
    /// Reply frames delivered (a multi-frame entry counts each of its frames).
    count: u64,
    /// The replies' latencies added up, in nanoseconds.
    latency_ns: u64,
    /// At least one reply was not an error: the node is serving.
    answered: bool,
}

/// A written command waiting for its reply.
struct InFlight {
    /// Where the reply goes: a reply slot, a session inbox, or the event loop's own client.
    reply: ReplyTo,
    /// Replies to discard before ours (the `+OK` of a leading `ASKING`).
    skip: u8,
    /// Reply frames that make up our reply.
    frames: u32,
    /// Offset of this command's bytes in the connection's output stream, to tell after a
    /// failure whether it was ever written.
    start: u64,
    /// When its batch was queued for writing (one clock read per batch), for node latency.
    queued_at: Instant,
}

/// What one established connection keeps about the commands it carries.
pub(super) struct Wire {
    /// The node's address, for errors.
    addr: Arc<str>,
    /// Frame size and depth limits for parsing the node's replies: a node is trusted, but a corrupt
    /// stream must fail the connection, not exhaust memory.
    limits: Limits,
    /// The commands queued and not yet answered, oldest first.
    in_flight: VecDeque<InFlight>,
    /// Bytes queued into the write buffer over the connection's life.
    queued: u64,
    /// Bytes actually written to the socket over the connection's life.
    written: u64,
    /// Commands queued since the metrics last counted them (see [`count_queued`]).
    ///
    /// [`count_queued`]: Wire::count_queued
    uncounted: u64,
    /// The node's series (requests, in flight, replies, latency), shared by all its connections.
    metrics: NodeMetrics,
    /// The node's health: fed latency and successes per read, failures by the driver.
    health: Arc<Health>,
    /// The clock read for the batch being queued.
    batch_at: Instant,
    /// Replies of the read being parsed that go to session inboxes (kept for its capacity).
    for_inboxes: ForInboxes,
    /// The node's latency histogram, fed once per read (see `LocalLatency`). Kept, not made
    /// per read: a fresh one is 680 bytes to zero for every read.
    duration: LocalLatency,
    /// The last replies said the node turned replica (see [`turned_replica`]): nothing still
    /// in flight behind them can have been applied.
    demoted: bool,
}

impl Wire {
    /// One per established connection; a reconnect makes a new one, so offsets and the demoted mark
    /// never carry over from a previous connection.
    pub(super) fn new(
        addr: Arc<str>,
        limits: Limits,
        metrics: NodeMetrics,
        health: Arc<Health>,
    ) -> Wire {
        Wire {
            addr,
            limits,
            in_flight: VecDeque::new(),
            queued: 0,
            written: 0,
            uncounted: 0,
            metrics,
            health,
            batch_at: Instant::now(),
            for_inboxes: Vec::new(),
            duration: LocalLatency::default(),
            demoted: false,
        }
    }

    /// Commands written and not yet answered.
    #[inline]
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Starts a batch: the commands queued from now on share this clock reading.
    #[inline]
    pub(super) fn start_batch(&mut self, now: Instant) {
        self.batch_at = now;
    }

    /// Appends `pending` to `out`.
    ///
    /// A leading `ASKING` (a redirect's one-shot permission) is written in front of the payload,
    /// and its `+OK` is skipped on the way back, so the waiter sees only its own reply. An entry of
    /// several frames (a batch of split parts) waits for all of them and gets them as one reply.
    pub(super) fn enqueue(&mut self, pending: Pending, out: &mut BytesMut) {
        let start = self.queued;
        if pending.asking {
            out.extend_from_slice(ASKING);
        }
        out.extend_from_slice(&pending.payload);
        self.queued +=
            (pending.payload.len() + if pending.asking { ASKING.len() } else { 0 }) as u64;
        self.uncounted += u64::from(pending.frames.max(1));
        self.in_flight.push_back(InFlight {
            reply: pending.reply,
            skip: u8::from(pending.asking),
            frames: pending.frames.max(1),
            start,
            queued_at: self.batch_at,
        });
    }

    /// Appends one command of an event loop's client to `out`; its reply goes to `to`.
    #[inline]
    pub(super) fn enqueue_loop(&mut self, payload: &[u8], to: LoopWaiter, out: &mut BytesMut) {
        let start = self.queued;
        out.extend_from_slice(payload);
        self.queued += payload.len() as u64;
        self.uncounted += 1;
        self.in_flight.push_back(InFlight {
            reply: ReplyTo::Loop(to),
            skip: 0,
            frames: 1,
            start,
            queued_at: self.batch_at,
        });
    }

    /// Counts the commands queued since the last count (an entry of several frames is that
    /// many commands). Metrics are updated once per batch, not per command: fewer contended
    /// atomic operations.
    pub(super) fn count_queued(&mut self) {
        let commands = std::mem::take(&mut self.uncounted);
        if commands == 0 {
            return;
        }
        self.metrics.requests.inc_by(commands);
        self.metrics.all_requests.inc_by(commands);
        self.metrics.in_flight.inc_by(commands as i64);
    }

    /// `n` more bytes reached the socket (which tells after a failure what may have run).
    #[inline]
    pub(super) fn wrote(&mut self, n: usize) {
        self.written += n as u64;
    }

    /// After a failure has failed everything in flight: what was never written is dropped
    /// with its buffer, so the next connection's offsets start even.
    pub(super) fn discard_unwritten(&mut self) {
        self.written = self.queued;
    }

    /// Hands every complete reply frame in `input` to the oldest waiting command; replies to
    /// loop commands go to `sink`.
    ///
    /// Called by the driver after every read. Incomplete frames stay in `input` for the next read.
    /// Metrics, health and the inbox hand-over happen once per call, after all complete frames were
    /// parsed. An `Err` means the stream cannot be trusted any more (an unparsable frame, or a
    /// reply nobody waits for): the driver must close the connection.
    pub(super) fn deliver(
        &mut self,
        input: &mut BytesMut,
        now: Instant,
        sink: &mut impl LoopSink,
    ) -> Result<(), String> {
        let mut batch = ReplyBatch::default();
        let result = self.deliver_frames(input, ElapsedClock::new(now), &mut batch, sink);
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

    /// The parsing loop of [`Wire::deliver`]; `now` is read at most once for the whole read
    /// (`metrics::clock`), since the commands of one batch share one queue time.
    fn deliver_frames(
        &mut self,
        input: &mut BytesMut,
        mut now: ElapsedClock,
        batch: &mut ReplyBatch,
        sink: &mut impl LoopSink,
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
            let frame = &input[..len];
            // Errors after the role change (-MOVED, -READONLY) keep the mark; a success clears it.
            self.demoted = turned_replica(frame) || (self.demoted && frame.first() == Some(&b'-'));
            let answered = frame.first() != Some(&b'-');
            let Some(done) = self.in_flight.pop_front() else {
                return Ok(());
            };
            // The commands of one batch share `queued_at`: measured once (see `ElapsedClock`).
            let elapsed = now.nanos(done.queued_at);
            self.duration.observe_ns(elapsed);
            batch.count += u64::from(done.frames);
            let latency = elapsed.saturating_mul(u64::from(done.frames));
            batch.latency_ns = batch.latency_ns.saturating_add(latency);
            batch.answered |= answered;
            // The waiter may have given up (deadline); its reply is dropped.
            match done.reply {
                ReplyTo::Loop(to) => sink.reply(to, ReplyFrame { input, len }),
                ReplyTo::Slot(slot) => slot.send(Ok(input.split_to(len).freeze())),
                ReplyTo::Inbox(delivery) => {
                    let frame = input.split_to(len).freeze();
                    if let Some((inbox, seq)) = delivery.take() {
                        self.for_inboxes.push((inbox, seq, Ok(Ok(frame))));
                    }
                }
            }
        }
    }

    /// After a connection failure: commands never written may be retried; the rest may have
    /// run. Every waiter hears why.
    pub(super) fn fail_in_flight(&mut self, reason: &str, sink: &mut impl LoopSink) {
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
            match waiting.reply {
                ReplyTo::Loop(to) => sink.failed(to, error),
                reply => reply.send(Err(error)),
            }
        }
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
