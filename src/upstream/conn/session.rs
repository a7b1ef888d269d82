//! An established node connection: writes queued commands in batches, hands each reply frame to
//! the command waiting at the front of the in-flight queue, and tells what was in flight when the
//! connection fails.
//!
//! The loop favours reading (`biased`): replies free in-flight room and their waiters, and a
//! node that answers must never wait on redcar's writes. What holds: at most
//! `upstream.max_in_flight_per_connection` commands are in flight on the connection (more wait
//! in its queue until replies make room); a batch waits for company at most
//! `upstream.flush_interval`; the buffers return to their normal size once a large value has
//! passed, so one 100 MB reply does not pin 100 MB for the connection's life. A session ends `Ok`
//! only when its queue closed and nothing is owed, or after `upstream.idle_timeout` with nothing
//! in flight; any other end is an error that fails what was in flight.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use super::super::batch::Batching;
use super::super::node_context::NodeContext;
use super::super::pending::Pending;
use super::super::queue;
use super::super::standby::{IdleTimer, Standby};
use super::super::stream::{FlushOnEmpty, NodeStream};
use super::super::wire::{
    fresh_once_empty, room_after_read, NoLoop, Wire, KEEP_AT_MOST, READ_CHUNK,
};

/// The state of one established connection.
pub(super) struct Session {
    /// The node, for logs.
    addr: Arc<str>,
    /// What is in flight, and where each reply goes.
    wire: Wire,
    /// When to take more commands and when to write them (in-flight cap, flush window).
    batching: Batching,
    /// The node's standby flag: shortens how long this connection may stay idle.
    standby: Arc<Standby>,
    /// The clock read for the batch being queued (the idle timer counts from it).
    batch_at: Instant,
}

impl Session {
    /// One per established connection, so no state of a failed connection survives into the next.
    pub(super) fn new(context: &NodeContext) -> Session {
        Session {
            addr: context.addr.clone(),
            wire: Wire::new(
                context.addr.clone(),
                context.limits.clone(),
                context.metrics.clone(),
                context.health.clone(),
            ),
            batching: Batching::new(&context.config, context.metrics.in_flight_capped.clone()),
            standby: context.standby.clone(),
            batch_at: Instant::now(),
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
        self.wire.start_batch(self.batch_at);
        // `upstream.idle_timeout` (a second on standby): unused for that long, the connection is
        // closed; the next command for it connects again. The timer is re-armed only when it
        // fires (from the last batch's time) or the standby flag changes, not on every batch.
        let mut idle = IdleTimer::new(&self.standby, idle_timeout);
        self.wire.enqueue(first, &mut out);
        self.wire.count_queued();
        loop {
            if !open && out.is_empty() && self.wire.in_flight() == 0 {
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
                        Ok(_) => self.wire.deliver(&mut input, Instant::now(), &mut NoLoop)?,
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
                next = rx.recv(), if open && self.batching.has_room(out.len(), self.wire.in_flight()) => match next {
                    Some(pending) => self.queue_batch(pending, rx, &mut out, &mut out_grown).await,
                    None => {
                        open = false;
                        self.batching.release();
                    }
                },
                // `upstream.flush_interval`: the batch waited long enough for company.
                () = self.batching.window(), if self.batching.holding() => self.batching.release(),
                // Polled only while nothing is in flight: no timer work under load.
                () = idle.expired(self.batch_at), if self.wire.in_flight() == 0 && out.is_empty() => {
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
        let fresh = out.is_empty();
        self.batch_at = Instant::now();
        self.wire.start_batch(self.batch_at);
        self.wire.enqueue(pending, out);
        self.take_queued(rx, out);
        // End of the turn: let the sessions that are ready right now queue their commands too.
        tokio::task::yield_now().await;
        self.take_queued(rx, out);
        self.wire.count_queued();
        self.batching
            .queued(fresh, out.len(), self.wire.in_flight());
        *out_grown |= out.len() > KEEP_AT_MOST;
    }

    /// Accounts for `n` bytes the writer took from `out`: they count as written (which tells
    /// after a failure what may have run), and a buffer grown for a large request is let go
    /// once empty.
    #[inline]
    fn wrote(&mut self, n: usize, out: &mut BytesMut, out_grown: &mut bool) {
        out.advance(n);
        self.wire.wrote(n);
        fresh_once_empty(out, out_grown);
    }

    /// Coalesce: takes everything already queued into the same write.
    fn take_queued(&mut self, rx: &mut queue::Receiver<Pending>, out: &mut BytesMut) {
        while self.batching.has_room(out.len(), self.wire.in_flight()) {
            match rx.try_recv() {
                Some(pending) => self.wire.enqueue(pending, out),
                None => break,
            }
        }
    }

    /// After a connection failure: commands never written may be retried; the rest may have run.
    pub(super) fn fail_in_flight(&mut self, reason: &str) {
        self.wire.fail_in_flight(reason, &mut NoLoop);
    }
}
