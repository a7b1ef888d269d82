//! A node connection driven by a worker's event loop (`threading: per-core`): the loop reads and
//! writes its socket on its own thread, so a command from one of the loop's clients goes into the
//! write buffer in place ([`LoopConn::send`]) and its reply comes back in place (a
//! [`LoopSink`]), with no task, channel or wake-up between them. Commands from anywhere else
//! (other threads, the futures of split and fanned-out commands) come through the connection's
//! queue as with a connection task, and keep their order with the loop's own: the queue is
//! emptied into the buffer before anything is appended in place.
//!
//! Connecting (TCP, keepalive, the handshake) runs as a tokio task, as for a connection task;
//! the loop gets the established socket back by mail ([`ConnEvent`]).

use std::io::{self, Write};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::time::Instant;

use super::batch::WRITE_HIGH_WATER;
use super::loop_socket::{open, read_into, register};
use super::node_context::NodeContext;
use super::pending::{LoopWaiter, Pending};
use super::queue;
use super::wire::{fresh_once_empty, room_after_read, LoopSink, Wire, KEEP_AT_MOST, READ_CHUNK};
use super::UpstreamError;
use crate::reactor::{LoopWaker, Remote};

/// A connection for a loop to take over (posted to it when the node is made).
pub(crate) struct ConnAttach {
    /// The node's queue for this connection; the loop becomes its receiving end.
    pub(super) queue: queue::Receiver<Pending>,
    /// What every connection of the node shares (settings, metrics, health, handshake).
    pub(super) context: Arc<NodeContext>,
}

/// What a connect, run as a tokio task, tells the loop.
pub(crate) struct ConnEvent {
    /// The connection's token in the loop.
    pub(crate) token: u64,
    /// The established socket, or why the connect failed.
    result: Result<std::net::TcpStream, String>,
}

/// Where the socket is.
enum Socket {
    /// Not connected; connects on the next command.
    Closed,
    /// A connect is running (see [`ConnEvent`]).
    Connecting,
    /// Connected and registered with the loop's poll.
    Open(mio::net::TcpStream),
}

/// One node connection on a worker's event loop.
pub(crate) struct LoopConn {
    /// The node's shared settings, metrics, health and handshake.
    context: Arc<NodeContext>,
    /// Commands from outside the loop (and the loop's own futures).
    queue: queue::Receiver<Pending>,
    /// Wakes the loop for this connection when the queue gets something.
    waker: LoopWaker,
    /// The connection's token in the loop (slab key and generation).
    token: u64,
    /// Where the socket is in its life.
    socket: Socket,
    /// What is in flight, and where each reply goes.
    wire: Wire,
    /// Bytes queued for the node and not yet written.
    out: BytesMut,
    /// Bytes read from the node and not yet delivered.
    input: BytesMut,
    /// `out` grew past its normal size for a large request.
    out_grown: bool,
    /// `input` grew past its normal size for a large reply.
    input_grown: bool,
    /// Connects that failed in a row, and when the next one may be tried.
    failures: u32,
    retry_at: Instant,
    /// When the last batch was queued (the idle limit counts from it).
    last_used: Instant,
    /// The node handle is gone: once nothing is in flight, the connection ends.
    abandoned: bool,
    /// Bytes in `out` wait for a write this turn, and the loop has listed the connection for
    /// it (once per turn).
    dirty: bool,
    /// In the loop's list of connections to flush this turn.
    listed: bool,
    /// A batch was begun this turn (its commands share one clock reading).
    batching: bool,
    /// `upstream.max_in_flight_per_connection` (at least 1), taken once: the command path reads
    /// it per command.
    in_flight_cap: usize,
}

impl LoopConn {
    /// Takes over `attach` as the loop's connection `token`.
    pub(crate) fn new(attach: ConnAttach, remote: &Arc<Remote>, token: u64, key: usize) -> Self {
        let ConnAttach { queue, context } = attach;
        queue.set_home(remote.index(), key);
        let wire = Wire::new(
            context.addr.clone(),
            context.limits.clone(),
            context.metrics.clone(),
            context.health.clone(),
        );
        let now = Instant::now();
        LoopConn {
            waker: LoopWaker::new(remote, token),
            queue,
            token,
            socket: Socket::Closed,
            wire,
            out: BytesMut::new(),
            input: BytesMut::new(),
            out_grown: false,
            input_grown: false,
            failures: 0,
            retry_at: now,
            last_used: now,
            abandoned: false,
            dirty: false,
            listed: false,
            batching: false,
            in_flight_cap: context.config.max_in_flight_per_connection.max(1),
            context,
        }
    }

    /// After a failed connect, until `retry_at`. Never before one: a connection made during a
    /// loop turn (a node's first command) must not see the turn's earlier clock as back-off.
    #[inline]
    fn in_backoff(&self, now: Instant) -> bool {
        self.failures > 0 && now < self.retry_at
    }

    /// The loop's token for this connection.
    #[inline]
    pub(crate) fn token(&self) -> u64 {
        self.token
    }

    /// Whether commands wait in the queue (for room, after replies came).
    #[inline]
    pub(crate) fn has_queued(&self) -> bool {
        self.queue.has_items()
    }

    /// Appends one command of a loop client, its reply to go to `to`. `Err` when it was not
    /// sent (the connection is in back-off after a failed connect); `Ok(false)` when it cannot
    /// be appended in place right now (queued commands ahead of it wait for room, or the
    /// buffer is full): the caller then sends it through the queue. `Ok(true)`: appended; the
    /// loop must [`flush`](Self::flush) this connection at the end of its turn when
    /// [`needs_listing`](Self::needs_listing) says so.
    #[inline]
    pub(crate) fn send(
        &mut self,
        payload: &[u8],
        to: LoopWaiter,
        now: Instant,
    ) -> Result<bool, UpstreamError> {
        if self.queue.has_items() && !self.pull(now) {
            return Ok(false);
        }
        if !self.has_room() {
            return Ok(false);
        }
        if let Socket::Closed = self.socket {
            if self.in_backoff(now) {
                self.context.metrics.errors.inc();
                return Err(self.not_sent("reconnect back-off after a failed connect"));
            }
        }
        self.begin_batch(now);
        self.wire.enqueue_loop(payload, to, &mut self.out);
        Ok(true)
    }

    /// Room for one more command (the write buffer's high-water mark, the in-flight cap).
    #[inline]
    fn has_room(&self) -> bool {
        self.out.len() < WRITE_HIGH_WATER && self.wire.in_flight() < self.in_flight_cap
    }

    #[inline]
    fn begin_batch(&mut self, now: Instant) {
        if !self.batching {
            self.batching = true;
            self.wire.start_batch(now);
            self.last_used = now;
        }
        self.dirty = true;
    }

    /// Takes what the queue holds into the write buffer, as room allows. Whether the queue is
    /// now empty. A connection in back-off fails what it takes (nothing was sent).
    pub(crate) fn pull(&mut self, now: Instant) -> bool {
        loop {
            if !self.has_room() {
                return !self.queue.has_items();
            }
            let mut cx = Context::from_waker(self.waker.waker());
            match self.queue.poll_recv(&mut cx) {
                Poll::Ready(Some(pending)) => self.take(pending, now),
                Poll::Ready(None) => {
                    self.abandoned = true;
                    return true;
                }
                Poll::Pending => return true,
            }
        }
    }

    fn take(&mut self, pending: Pending, now: Instant) {
        if matches!(self.socket, Socket::Closed) && self.in_backoff(now) {
            self.context.metrics.errors.inc();
            let error = self.not_sent("reconnect back-off after a failed connect");
            pending.reply.send(Err(error));
            return;
        }
        self.begin_batch(now);
        self.wire.enqueue(pending, &mut self.out);
    }

    /// The loop woke this connection (its queue got something): re-arms the waker and pulls.
    pub(crate) fn on_woken(&mut self, now: Instant) {
        self.waker.rearm();
        self.pull(now);
    }

    /// Whether the loop must list the connection for a flush at the end of its turn: true once
    /// per turn, when something was queued.
    #[inline]
    pub(crate) fn needs_listing(&mut self) -> bool {
        let list = self.dirty && !self.listed;
        self.listed |= list;
        list
    }

    /// End of the loop's turn: counts the batch, connects if needed, writes what it can.
    /// `Err` when the connection failed (the caller calls [`fail`](Self::fail)).
    pub(crate) fn flush(&mut self, remote: &Arc<Remote>) -> Result<(), String> {
        self.dirty = false;
        self.listed = false;
        if std::mem::take(&mut self.batching) {
            self.wire.count_queued();
            self.out_grown |= self.out.len() > KEEP_AT_MOST;
        }
        match &mut self.socket {
            Socket::Closed if !self.out.is_empty() => {
                self.socket = Socket::Connecting;
                self.connect(remote);
                Ok(())
            }
            Socket::Open(stream) => write_out(stream, &mut self.out, &mut self.wire).map(|()| {
                fresh_once_empty(&mut self.out, &mut self.out_grown);
            }),
            _ => Ok(()),
        }
    }

    /// Starts the connect as a tokio task on the loop's runtime; the result comes by mail.
    fn connect(&self, remote: &Arc<Remote>) {
        let context = self.context.clone();
        let remote = remote.clone();
        let token = self.token;
        tokio::spawn(async move {
            let result = open(&context).await;
            remote.post(Box::new(ConnEvent { token, result }));
        });
    }

    /// A connect finished: the socket is registered as `token` with `registry` and what waits
    /// is written; or everything waiting fails (nothing was sent) and the next connect waits
    /// for the back-off.
    pub(crate) fn on_connected(
        &mut self,
        event: ConnEvent,
        registry: &mio::Registry,
        sink: &mut impl LoopSink,
    ) {
        let context = self.context.clone();
        let stream = match event.result.and_then(|s| register(s, registry, self.token)) {
            Ok(stream) => stream,
            Err(reason) => {
                self.failures = self.failures.saturating_add(1);
                let backoff = context.config.reconnect_backoff * 2u32.pow(self.failures.min(5) - 1);
                self.retry_at = Instant::now() + backoff;
                tracing::warn!(node = %context.addr, %reason, ?backoff, "connect failed");
                context.metrics.errors.inc();
                context.health.record_failure(&reason);
                self.socket = Socket::Closed;
                self.reset(&reason, sink);
                return;
            }
        };
        self.failures = 0;
        tracing::debug!(node = %context.addr, "connected");
        context.metrics.connections.inc();
        self.socket = Socket::Open(stream);
        self.dirty = !self.out.is_empty();
        self.last_used = Instant::now();
    }

    /// The socket is readable: hands every complete reply over. `Err` when the connection
    /// failed (the caller calls [`fail`](Self::fail)).
    pub(crate) fn on_readable(
        &mut self,
        now: Instant,
        sink: &mut impl LoopSink,
    ) -> Result<(), String> {
        let Socket::Open(stream) = &mut self.socket else {
            return Ok(());
        };
        loop {
            match read_into(stream, &mut self.input) {
                Ok(0) => return Err("node closed the connection".to_string()),
                Ok(n) => {
                    self.wire.deliver(&mut self.input, now, sink)?;
                    room_after_read(&mut self.input, &mut self.input_grown);
                    // A short read emptied the socket: the next arrival is a new event.
                    if n < READ_CHUNK {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
    }

    /// The socket has room again: writes what waits.
    pub(crate) fn on_writable(&mut self) -> Result<(), String> {
        match &mut self.socket {
            Socket::Open(stream) if !self.out.is_empty() => {
                write_out(stream, &mut self.out, &mut self.wire)
            }
            _ => Ok(()),
        }
    }

    /// The connection failed: everything in flight hears why, the socket is closed, and the
    /// next command connects again.
    pub(crate) fn fail(
        &mut self,
        reason: &str,
        registry: &mio::Registry,
        sink: &mut impl LoopSink,
    ) {
        let context = self.context.clone();
        tracing::warn!(node = %context.addr, %reason, "node connection closed");
        context.metrics.errors.inc();
        context.health.record_failure(reason);
        self.close(registry);
        self.reset(reason, sink);
    }

    /// Closes an open socket (the connection gauge and the handshake's count follow).
    fn close(&mut self, registry: &mio::Registry) {
        if let Socket::Open(mut stream) = std::mem::replace(&mut self.socket, Socket::Closed) {
            let _ = registry.deregister(&mut stream);
            self.context.metrics.connections.dec();
            self.context.handshake.ended();
        }
    }

    /// Fails what is in flight and what the queue holds, and empties the buffers.
    fn reset(&mut self, reason: &str, sink: &mut impl LoopSink) {
        self.batching = false;
        self.wire.count_queued();
        self.wire.fail_in_flight(reason, sink);
        self.out.clear();
        self.input.clear();
        self.wire.discard_unwritten();
        let error = self.not_sent(reason);
        while let Some(pending) = self.queue.try_recv() {
            pending.reply.send(Err(error.clone()));
        }
    }

    fn not_sent(&self, reason: &str) -> UpstreamError {
        UpstreamError::NotSent {
            addr: self.context.addr.clone(),
            reason: reason.to_string(),
        }
    }

    /// Looked at now and then: closes a connection idle past `upstream.idle_timeout` (a second
    /// on standby). Whether the connection is over for good (its node is gone and nothing is
    /// left in flight): the loop then drops it.
    pub(crate) fn tick(&mut self, now: Instant, registry: &mio::Registry) -> bool {
        let quiet = self.wire.in_flight() == 0 && self.out.is_empty();
        if !quiet {
            return false;
        }
        if self.abandoned {
            self.close(registry);
            return true;
        }
        if let Socket::Open(_) = self.socket {
            let limit = (self.context.standby).idle_limit(self.context.config.idle_timeout);
            if limit.is_some_and(|limit| now.saturating_duration_since(self.last_used) >= limit) {
                tracing::debug!(node = %self.context.addr, standby = self.context.standby.is_on(), "closing idle node connection");
                self.close(registry);
            }
        }
        false
    }
}

/// Writes as much of `out` as the socket takes now.
fn write_out(
    stream: &mut mio::net::TcpStream,
    out: &mut BytesMut,
    wire: &mut Wire,
) -> Result<(), String> {
    while !out.is_empty() {
        match stream.write(out) {
            Ok(0) => return Err("write failed: the node took nothing".to_string()),
            Ok(n) => {
                out.advance(n);
                wire.wrote(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("write failed: {e}")),
        }
    }
    Ok(())
}
