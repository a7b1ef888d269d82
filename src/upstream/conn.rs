//! One pipelined connection to a node: a single task that writes queued commands in batches and
//! hands each reply frame to the command waiting at the front of the in-flight queue.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use socket2::{SockRef, TcpKeepalive};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::batch::Batching;
use super::error::turned_replica;
use super::handshake::Handshake;
use super::health::Health;
use super::inbox::{Delivered, Delivery, Shared};
use super::queue;
use super::reply_slot::ReplySender;
use super::standby::{IdleTimer, Standby};
use super::stream::{FlushOnEmpty, NodeStream};
use super::{ConnectLimit, UpstreamConfig, UpstreamError, UpstreamTls};
use crate::metrics::{LocalLatency, NodeMetrics};
use crate::protocol::{reply_frame_len, Limits};

/// The RESP encoding of `ASKING`, written before a command redirected by `-ASK`.
pub const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";
const READ_CHUNK: usize = 16 * 1024;
/// A connection buffer that grew past this for a large value is replaced by a fresh one once
/// empty, so a 1 MB reply or request is not held for the connection's life.
const KEEP_AT_MOST: usize = 4 * READ_CHUNK;

/// A command waiting to be written, and where its reply goes.
pub(super) struct Pending {
    pub payload: Bytes,
    pub asking: bool,
    /// Reply frames the payload produces (1 for one command; `MULTI … EXEC` sends several). They
    /// are handed over together, as one contiguous slice.
    pub frames: u32,
    pub reply: ReplyTo,
}

/// Where a command's reply goes: its own channel, or a client session's inbox (see `inbox`).
pub(super) enum ReplyTo {
    Slot(ReplySender),
    Inbox(Delivery),
}

impl ReplyTo {
    /// Hands over one outcome on its own (failures; replies go through `Session::deliver`).
    fn send(self, outcome: Result<Bytes, UpstreamError>) {
        match self {
            ReplyTo::Slot(slot) => slot.send(outcome),
            ReplyTo::Inbox(delivery) => delivery.send(outcome),
        }
    }
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
    latency: Duration,
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

/// What every connection of one node shares: its settings, metrics and health.
pub(super) struct NodeContext {
    pub addr: Arc<str>,
    pub config: UpstreamConfig,
    pub limits: Limits,
    pub metrics: NodeMetrics,
    pub connect_limit: Arc<ConnectLimit>,
    pub health: Arc<Health>,
    /// `AUTH` and/or `READONLY` (so a replica serves reads of its primary's slots) after connecting.
    pub handshake: Handshake,
    /// `upstream.tls`: every connection is wrapped in TLS when set.
    pub tls: Option<UpstreamTls>,
    /// Set while the node serves nothing: idle connections close within a second.
    pub standby: Arc<Standby>,
}

impl NodeContext {
    /// The same node's context for connections that send `handshake` first.
    pub(super) fn with_handshake(&self, handshake: Handshake) -> NodeContext {
        NodeContext {
            addr: self.addr.clone(),
            config: self.config.clone(),
            limits: self.limits.clone(),
            metrics: self.metrics.clone(),
            connect_limit: self.connect_limit.clone(),
            health: self.health.clone(),
            handshake,
            tls: self.tls.clone(),
            standby: self.standby.clone(),
        }
    }
}

/// Starts the task and returns its queue.
pub(super) fn spawn(
    runtime: &tokio::runtime::Handle,
    context: Arc<NodeContext>,
) -> queue::Sender<Pending> {
    let (tx, rx) = queue::channel();
    runtime.spawn(run(context, rx));
    tx
}

/// Connects on demand and reconnects after failures, until every sender is gone.
async fn run(context: Arc<NodeContext>, mut rx: queue::Receiver<Pending>) {
    let NodeContext {
        addr,
        config,
        metrics,
        health,
        ..
    } = &*context;
    let mut failures: u32 = 0;
    let mut retry_at = Instant::now();
    while let Some(first) = rx.recv().await {
        if Instant::now() < retry_at {
            metrics.errors.inc();
            fail_queued(
                first,
                &mut rx,
                addr,
                "reconnect back-off after a failed connect",
            );
            continue;
        }
        let connected = match connect(addr, config, &context.connect_limit, &context.tls).await {
            Ok(stream) => context.greet(stream).await,
            Err(reason) => Err(reason),
        };
        match connected {
            Ok(stream) => {
                failures = 0;
                tracing::debug!(node = %addr, "connected");
                metrics.connections.inc();
                let mut session = Session::new(&context);
                if let Err(reason) = session
                    .serve(stream, first, &mut rx, config.idle_timeout)
                    .await
                {
                    tracing::warn!(node = %addr, %reason, "node connection closed");
                    metrics.errors.inc();
                    health.record_failure(&reason);
                    session.fail_in_flight(&reason);
                }
                metrics.connections.dec();
                context.handshake.ended();
            }
            Err(reason) => {
                failures = failures.saturating_add(1);
                let backoff = config.reconnect_backoff * 2u32.pow(failures.min(5) - 1);
                retry_at = Instant::now() + backoff;
                tracing::warn!(node = %addr, %reason, ?backoff, "connect failed");
                metrics.errors.inc();
                health.record_failure(&reason);
                fail_queued(first, &mut rx, addr, &reason);
            }
        }
    }
}

/// Length of the first `count` complete reply frames in `input`, or `None` until all are there.
pub(super) fn frames_len(
    input: &[u8],
    count: u32,
    limits: &Limits,
) -> Result<Option<usize>, String> {
    let mut end = 0;
    for _ in 0..count {
        match reply_frame_len(&input[end..], limits) {
            Ok(Some(len)) => end += len,
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("protocol error in reply: {e}")),
        }
    }
    Ok(Some(end))
}

/// Fails `first` and everything already queued behind it: none of it was sent.
fn fail_queued(first: Pending, rx: &mut queue::Receiver<Pending>, addr: &Arc<str>, reason: &str) {
    let error = UpstreamError::NotSent {
        addr: addr.clone(),
        reason: reason.to_string(),
    };
    first.reply.send(Err(error.clone()));
    while let Some(pending) = rx.try_recv() {
        pending.reply.send(Err(error.clone()));
    }
}

/// A new connection to `addr`: TCP within `connect_timeout`, then TLS (within as long again)
/// when `upstream.tls` is on.
pub(super) async fn connect(
    addr: &str,
    config: &UpstreamConfig,
    limit: &ConnectLimit,
    tls: &Option<UpstreamTls>,
) -> Result<NodeStream, String> {
    if let Err(wait) = limit.admit(addr, config.connect_timeout).await {
        return Err(format!(
            "connect rate limit reached (upstream.max_connects_per_second = {}; next slot in {wait:?})",
            config.max_connects_per_second
        ));
    }
    let stream = match tokio::time::timeout(config.connect_timeout, TcpStream::connect(addr)).await
    {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(format!("connect failed: {e}")),
        Err(_) => {
            return Err(format!(
                "connect timed out after {:?}",
                config.connect_timeout
            ))
        }
    };
    // Small commands must not wait for Nagle; we batch ourselves.
    stream
        .set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    if !config.tcp_keepalive.is_zero() {
        let mut keepalive = TcpKeepalive::new()
            .with_time(config.tcp_keepalive)
            .with_interval(config.keepalive_interval());
        // Unset leaves the OS's probe count alone.
        if let Some(probes) = config.tcp_keepalive_probes {
            keepalive = keepalive.with_retries(probes);
        }
        SockRef::from(&stream)
            .set_tcp_keepalive(&keepalive)
            .map_err(|e| format!("TCP keepalive: {e}"))?;
    }
    match tls {
        None => Ok(NodeStream::Tcp(stream)),
        Some(tls) => {
            let stream = tls.handshake(addr, stream, config.connect_timeout).await?;
            Ok(NodeStream::Tls(Box::new(stream)))
        }
    }
}

/// The state of one established connection.
struct Session {
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
    fn new(context: &NodeContext) -> Session {
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
    async fn serve(
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
                    if input.is_empty() && std::mem::take(&mut input_grown) {
                        input = BytesMut::with_capacity(READ_CHUNK);
                    } else if input.capacity() - input.len() < 512 {
                        input.reserve(READ_CHUNK);
                        input_grown |= input.capacity() > KEEP_AT_MOST;
                    }
                }
                wrote = writer.write(if flush_now { &[] } else { &out[..] }),
                    if flush_now || (!out.is_empty() && self.batching.may_write()) =>
                {
                    let n = wrote.map_err(|e| format!("write failed: {e}"))?;
                    if flush_now {
                        unflushed = false;
                    } else {
                        out.advance(n);
                        self.written += n as u64;
                        unflushed = FLUSH;
                        if out.is_empty() && std::mem::take(&mut out_grown) {
                            out = BytesMut::with_capacity(READ_CHUNK);
                        }
                    }
                }
                next = rx.recv(), if open && self.batching.has_room(out.len(), self.in_flight.len()) => match next {
                    Some(pending) => {
                        let before = self.in_flight.len();
                        let fresh = out.is_empty();
                        self.batch_at = Instant::now();
                        self.enqueue(pending, &mut out);
                        self.take_queued(rx, &mut out);
                        // End of the turn: let the sessions that are ready right now queue their
                        // commands too, so many clients share one write syscall.
                        tokio::task::yield_now().await;
                        self.take_queued(rx, &mut out);
                        self.count_queued(before);
                        self.batching.queued(fresh, out.len(), self.in_flight.len());
                        out_grown |= out.len() > KEEP_AT_MOST;
                    }
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
        let now = Instant::now();
        let mut batch = ReplyBatch::default();
        let result = self.deliver_frames(input, now, &mut batch);
        hand_over(&mut self.for_inboxes);
        self.metrics.record_replies(batch.count, batch.latency);
        self.duration.flush_into(&self.metrics.duration);
        if batch.count > 0 {
            self.health
                .observe_latency(batch.latency / u32::try_from(batch.count).unwrap_or(u32::MAX));
        }
        if batch.answered {
            self.health.record_success();
        }
        result
    }

    fn deliver_frames(
        &mut self,
        input: &mut BytesMut,
        now: Instant,
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
                let elapsed = now.saturating_duration_since(done.queued_at);
                self.duration.observe(elapsed.as_secs_f64());
                batch.count += u64::from(done.frames);
                batch.latency += elapsed * done.frames;
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
    fn fail_in_flight(&mut self, reason: &str) {
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
#[path = "conn_tests.rs"]
mod tests;
