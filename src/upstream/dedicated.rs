//! Connections lent to one client at a time — blocking commands, WATCH, pub/sub — from a pool
//! bounded over all nodes, with an explicit policy when it is exhausted.
//!
//! A shared pipelined connection must never carry a command that blocks or leaves state on the
//! connection: every other client's replies would queue behind it, or inherit its state. Those
//! commands borrow a [`Dedicated`] connection instead. Given back clean, a connection waits (FIFO,
//! per node) for the next borrower; dropped while a reply is still owed, it is closed, which is
//! also how Redis learns that a blocked client went away.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::conn::connect;
use super::pending::frames_len;
use super::stream::NodeStream;
use super::UpstreamMetrics;
use super::{ConnectLimit, Exhausted, UpstreamConfig, UpstreamError, UpstreamTls};
use crate::metrics::Metrics;
use crate::protocol::{Limits, Protocol};

/// How much a read asks for at least (16 KiB), as for the pipelined connections.
const READ_CHUNK: usize = 16 * 1024;
/// A lent connection's input that grew past this for a large reply starts afresh once that reply
/// is taken, instead of keeping the allocation while the connection is lent (a subscriber's,
/// for its whole life).
const KEEP_AT_MOST: usize = 4 * READ_CHUNK;

/// The pool. One per proxy, shared by every session.
pub(crate) struct DedicatedPool {
    /// Shared with the lent connections, which give themselves back to it.
    shared: Arc<Shared>,
}

/// The pool's state, shared by the pool and every connection it lent (a lent connection gives
/// itself back through it, so the pool outlives no borrower and vice versa).
struct Shared {
    /// `upstream.*` as at start: connect and handshake timeouts, and `dedicated.{max, exhausted,
    /// wait_timeout, idle_timeout}`.
    config: UpstreamConfig,
    /// Parse limits for the replies read on lent connections.
    limits: Limits,
    /// The pool's gauges and counter (taken from the hub once).
    metrics: Arc<UpstreamMetrics>,
    /// One permit per open dedicated connection, busy or idle.
    permits: Arc<Semaphore>,
    /// New connections per second per node, shared with the pipelined connections.
    connect_limit: Arc<ConnectLimit>,
    /// AUTH on each new connection, when upstream credentials are configured; for RESP3
    /// clients' connections also `HELLO 3`.
    handshake: super::Handshake,
    /// The same for `HELLO 3` connections, for RESP3 clients: a connection's protocol is fixed by
    /// its handshake, so idle connections are kept per protocol.
    handshake3: super::Handshake,
    /// `upstream.tls`, when on.
    tls: Option<UpstreamTls>,
    /// Borrowers waiting for a permit.
    waiters: AtomicUsize,
    /// Idle connections by node and RESP version, oldest first.
    idle: Mutex<HashMap<IdleKey, VecDeque<Idle>>>,
}

/// A node and the RESP version its connection speaks.
type IdleKey = (Arc<str>, Protocol);

struct Idle {
    /// The connection, handshaken and with nothing owed.
    stream: NodeStream,
    /// Keeps its place in the bound while idle: an idle connection counts against `dedicated.max`
    /// like a busy one.
    permit: OwnedSemaphorePermit,
    /// When it was given back; past `dedicated.idle_timeout` it is closed instead of lent.
    since: Instant,
}

/// A connection lent to one client. Not `Clone`: exactly one owner talks on it.
pub(crate) struct Dedicated {
    /// The node connection, lent to this one borrower.
    stream: NodeStream,
    /// Bytes read and not yet handed out as a reply.
    input: BytesMut,
    /// `input` grew past [`KEEP_AT_MOST`] for a large reply.
    grown: bool,
    /// The node, for errors and for keying the idle list when given back.
    addr: Arc<str>,
    /// The RESP version the handshake set; the connection is only ever lent again to a client of
    /// the same version.
    protocol: Protocol,
    /// Held for as long as the connection is open, lent or idle; dropping the connection frees its
    /// place.
    permit: OwnedSemaphorePermit,
    /// The pool, to give the connection back to.
    shared: Arc<Shared>,
    /// Keeps the busy gauge up while lent.
    _busy: LentGauge,
}

/// The first `len` bytes of `input`: a reply. After a large one (`grown`), the input starts again
/// empty instead of holding on to the rest of the reply's allocation, and the thread's heap is
/// collected at the next quiet moment (`crate::memory`).
fn take_reply(input: &mut BytesMut, grown: &mut bool, len: usize) -> Bytes {
    let reply = input.split_to(len).freeze();
    if *grown && input.is_empty() {
        *grown = false;
        *input = BytesMut::new();
        crate::memory::large_freed();
    }
    reply
}

/// Counts a lent connection in the busy gauge for as long as it is lent.
struct LentGauge(Arc<UpstreamMetrics>);

impl Drop for LentGauge {
    fn drop(&mut self) {
        self.0.dedicated_busy.dec();
    }
}

impl DedicatedPool {
    /// One per proxy, made at start-up; `handshakes` are the RESP2 and RESP3 handshakes, in that
    /// order. The bound is fixed at start (`dedicated.max`): a reload does not resize it.
    pub(crate) fn new(
        config: UpstreamConfig,
        limits: Limits,
        metrics: Arc<Metrics>,
        connect_limit: Arc<ConnectLimit>,
        handshakes: [super::Handshake; 2],
        tls: Option<UpstreamTls>,
    ) -> DedicatedPool {
        let [handshake, handshake3] = handshakes;
        let permits = Arc::new(Semaphore::new(config.dedicated.max));
        DedicatedPool {
            shared: Arc::new(Shared {
                config,
                limits,
                metrics: metrics.group(),
                permits,
                connect_limit,
                handshake,
                handshake3,
                tls,
                waiters: AtomicUsize::new(0),
                idle: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A connection to `addr` speaking `protocol`: an idle one if there is one, else a new one
    /// within the bound. When the pool is exhausted, waits or fails as
    /// `upstream.dedicated.exhausted` says.
    ///
    /// The error is `Exhausted` when the pool is full and the policy says fail (or the wait timed
    /// out), and `NotSent` when connecting or the handshake failed: in both cases nothing reached
    /// the node, so the caller may tell the client plainly.
    pub(crate) async fn acquire(
        &self,
        addr: &Arc<str>,
        protocol: Protocol,
    ) -> Result<Dedicated, UpstreamError> {
        let shared = &self.shared;
        let key = (addr.clone(), protocol);
        if let Some(idle) = shared.take_idle(&key) {
            return Ok(shared.lend(idle.stream, key, idle.permit));
        }
        let permit = match shared.permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                // Full, but perhaps of idle connections to other nodes: close the oldest.
                shared.close_oldest_idle();
                self.wait_permit().await?
            }
        };
        let handshake = match protocol {
            Protocol::Resp2 => &shared.handshake,
            Protocol::Resp3 => &shared.handshake3,
        };
        let connected =
            match connect(addr, &shared.config, &shared.connect_limit, &shared.tls).await {
                Ok(stream) => handshake.run(stream, &shared.limits, None).await,
                Err(reason) => Err(reason),
            };
        let stream = connected.map_err(|reason| UpstreamError::NotSent {
            addr: addr.clone(),
            reason,
        })?;
        Ok(shared.lend(stream, key, permit))
    }

    /// With `exhausted: fail`, fails at once; with `wait`, waits up to `dedicated.wait_timeout`.
    /// Every failure counts in `dedicated_exhausted`. The first `try_acquire` repeats the caller's,
    /// because an idle connection closed there may have freed a permit.
    async fn wait_permit(&self) -> Result<OwnedSemaphorePermit, UpstreamError> {
        let shared = &self.shared;
        let dedicated = &shared.config.dedicated;
        let exhausted = || {
            shared.metrics.dedicated_exhausted.inc();
            UpstreamError::Exhausted {
                reason: format!(
                    "all {} dedicated connections are busy (upstream.dedicated.max); \
                     blocking commands, WATCH and subscriptions need one each",
                    dedicated.max
                ),
            }
        };
        if let Ok(permit) = shared.permits.clone().try_acquire_owned() {
            return Ok(permit);
        }
        if dedicated.exhausted == Exhausted::Fail {
            return Err(exhausted());
        }
        // While anyone waits, connections given back are closed rather than kept idle, so their
        // permits come here.
        shared.waiters.fetch_add(1, Ordering::SeqCst);
        shared.close_oldest_idle();
        let waited = tokio::time::timeout(
            dedicated.wait_timeout,
            shared.permits.clone().acquire_owned(),
        )
        .await;
        shared.waiters.fetch_sub(1, Ordering::SeqCst);
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(exhausted()),
        }
    }
}

impl Shared {
    /// Wraps a connection for a borrower; the busy gauge counts it until it is dropped or given
    /// back.
    fn lend(
        self: &Arc<Self>,
        stream: NodeStream,
        (addr, protocol): IdleKey,
        permit: OwnedSemaphorePermit,
    ) -> Dedicated {
        self.metrics.dedicated_busy.inc();
        Dedicated {
            stream,
            input: BytesMut::with_capacity(READ_CHUNK),
            grown: false,
            addr,
            protocol,
            permit,
            shared: self.clone(),
            _busy: LentGauge(self.metrics.clone()),
        }
    }

    /// The oldest live idle connection to `addr`; expired or closed ones are dropped on the way.
    fn take_idle(&self, key: &IdleKey) -> Option<Idle> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let queue = idle.get_mut(key)?;
        let max_idle = self.config.dedicated.idle_timeout;
        while let Some(conn) = queue.pop_front() {
            self.metrics.dedicated_idle.dec();
            if conn.since.elapsed() < max_idle && is_open(&conn.stream) {
                return Some(conn);
            }
        }
        None
    }

    /// Closes the longest-idle connection to any node; false when none is idle.
    fn close_oldest_idle(&self) -> bool {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let oldest = idle
            .iter()
            .filter_map(|(addr, queue)| Some((addr.clone(), queue.front()?.since)))
            .min_by_key(|(_, since)| *since);
        let Some((addr, _)) = oldest else {
            return false;
        };
        if let Some(queue) = idle.get_mut(&addr) {
            queue.pop_front();
            self.metrics.dedicated_idle.dec();
        }
        true
    }

    /// Keeps a connection given back clean, after dropping the ones idle too long.
    ///
    /// Not kept (just dropped, freeing its permit) when idle connections are off (`idle_timeout` 0)
    /// or someone waits for a permit, so a waiter gets the place at once instead of an idle
    /// connection to some other node holding it. The sweep of expired idle connections runs here,
    /// on give-back, so the pool needs no timer task.
    fn give_back(&self, key: IdleKey, stream: NodeStream, permit: OwnedSemaphorePermit) {
        let max_idle = self.config.dedicated.idle_timeout;
        if max_idle.is_zero() || self.waiters.load(Ordering::SeqCst) > 0 {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        for queue in idle.values_mut() {
            while queue.front().is_some_and(|c| c.since.elapsed() >= max_idle) {
                queue.pop_front();
                self.metrics.dedicated_idle.dec();
            }
        }
        idle.retain(|_, queue| !queue.is_empty());
        idle.entry(key).or_default().push_back(Idle {
            stream,
            permit,
            since: Instant::now(),
        });
        self.metrics.dedicated_idle.inc();
    }
}

/// An idle connection is usable only if the node has not closed it (Redis's `timeout`). Probes
/// the TCP socket even under TLS: an idle node sends nothing, so any byte (a close_notify) or
/// EOF means it is going away, and such a connection is dropped, never read from again.
fn is_open(stream: &NodeStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.tcp().try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

impl Dedicated {
    /// The node this connection talks to.
    pub(crate) fn addr(&self) -> &Arc<str> {
        &self.addr
    }

    /// Writes `payload` (one or more encoded commands). A failure here may leave part of it
    /// written, so it counts as possibly executed.
    pub(crate) async fn send(&mut self, payload: &[u8]) -> Result<(), UpstreamError> {
        let written = match self.stream.write_all(payload).await {
            // TLS holds the records until flushed; for TCP this does nothing.
            Ok(()) => self.stream.flush().await,
            Err(e) => Err(e),
        };
        written.map_err(|e| self.lost(format!("write failed: {e}")))
    }

    /// Reads the next `frames` reply frames, as one slice.
    ///
    /// Grows the input as needed; a reply beyond the parse limits, a read error or the node closing
    /// the connection fails with `Lost`: the command may have run, and the connection must be
    /// dropped, not given back.
    pub(crate) async fn receive(&mut self, frames: u32) -> Result<Bytes, UpstreamError> {
        loop {
            match frames_len(&self.input, frames, &self.shared.limits) {
                Ok(Some(len)) => return Ok(take_reply(&mut self.input, &mut self.grown, len)),
                Ok(None) => {}
                Err(reason) => return Err(self.lost(reason)),
            }
            if self.input.capacity() - self.input.len() < 1024 {
                self.input.reserve(READ_CHUNK);
                self.grown |= self.input.capacity() > KEEP_AT_MOST;
            }
            match self.stream.read_buf(&mut self.input).await {
                Ok(0) => return Err(self.lost("node closed the connection".to_string())),
                Ok(_) => {}
                Err(e) => return Err(self.lost(format!("read failed: {e}"))),
            }
        }
    }

    /// [`send`](Self::send), then [`receive`](Self::receive).
    pub(crate) async fn request(
        &mut self,
        payload: &[u8],
        frames: u32,
    ) -> Result<Bytes, UpstreamError> {
        self.send(payload).await?;
        self.receive(frames).await
    }

    /// Gives the connection back for reuse. Only call it when no reply is owed and no state is
    /// left on the connection (no WATCH, no subscription); otherwise just drop it.
    pub(crate) fn release(self) {
        if !self.input.is_empty() {
            return; // unexpected bytes: not clean, close it
        }
        let Dedicated {
            stream,
            addr,
            protocol,
            permit,
            shared,
            ..
        } = self;
        shared.give_back((addr, protocol), stream, permit);
    }

    /// A `Lost` error for this node: whatever was sent may have run.
    fn lost(&self, reason: String) -> UpstreamError {
        UpstreamError::Lost {
            addr: self.addr.clone(),
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_reply_leaves_the_input_empty_and_asks_for_its_memory_back() {
        let freed = crate::memory::freed_here();
        let mut input = BytesMut::with_capacity(READ_CHUNK);
        let mut grown = false;
        let reply = b"+OK\r\n";
        input.extend_from_slice(reply);
        assert_eq!(&take_reply(&mut input, &mut grown, reply.len())[..], reply);
        assert!(input.capacity() > 0, "a small reply: the buffer is kept");
        assert_eq!(crate::memory::freed_here(), freed);

        let large = vec![b'm'; 1 << 20];
        input.extend_from_slice(&large);
        grown = input.capacity() > KEEP_AT_MOST;
        input.extend_from_slice(b"+OK\r\n");
        let taken = take_reply(&mut input, &mut grown, large.len());
        assert_eq!(taken.len(), large.len());
        assert!(
            grown,
            "another reply follows in the same allocation: not yet"
        );
        assert_eq!(take_reply(&mut input, &mut grown, 5).len(), 5);
        assert_eq!(
            input.capacity(),
            0,
            "nothing of the large reply's allocation is kept"
        );
        assert!(!grown);
        assert_eq!(crate::memory::freed_here(), freed + 1);
    }
}
