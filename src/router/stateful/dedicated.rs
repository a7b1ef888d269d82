//! Commands that need a connection of their own: blocking commands (BLPOP, XREAD BLOCK …) and
//! WATCH, which leaves state on the connection until EXEC, DISCARD or UNWATCH. They borrow a
//! connection from the bounded dedicated pool; a shared pipelined connection never carries them.
//!
//! What holds: a connection goes back to the pool only clean, meaning its last reply was read and
//! nothing is left on it (no WATCH, no blocked command); any other ending (a timeout, an error, the
//! client gone) drops the connection, which is also how the node learns to unblock or unwatch. A
//! WATCH stays pinned to one slot of one backend for the life of the transaction, because the node
//! that holds the watch is the only one that can honour it; keys of another slot or backend are
//! refused with CROSSSLOT instead of silently watching on a second node.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::transaction::{tx_verdict, TxVerdict};
use crate::protocol::{reply_frame_len, Limits, Protocol};
use crate::router::forward::{
    classify, lost_write, pause_before_retry, AttemptTarget, Call, Outcome, Verdict,
};
use crate::router::reply::{error_with_prefix, redcar_error};
use crate::router::{RouteTarget, Stateful};
use crate::upstream::{Dedicated, ASKING};

/// Sent to end a watch before the connection is given back.
const UNWATCH: &[u8] = b"*1\r\n$7\r\nUNWATCH\r\n";
/// EXEC's reply when a watched key changed; also what redcar answers when a watched transaction
/// cannot run because its slot moved (nothing ran, and the client retries).
const NIL_ARRAY: &[u8] = b"*-1\r\n";

/// A client's WATCH: the dedicated connection that holds it and the slot watched. The session
/// runs commands that use it one at a time, so the lock is never contended; it only lets the
/// command's future own the connection while it runs.
#[derive(Clone, Default)]
pub(crate) struct WatchedConn(Arc<Mutex<Option<Pinned>>>);

/// What a client's WATCH holds between commands.
struct Pinned {
    /// The slot of the watched keys; every later WATCH and the EXEC must use it.
    slot: u16,
    /// A prefix route's backend (`None`: the catch-all backend).
    backend: Option<Arc<RouteTarget>>,
    /// The connection the watch lives on, lent until EXEC, DISCARD or UNWATCH.
    conn: Dedicated,
}

/// Two backends are the same only if they are the same route target (by identity).
fn same_backend(a: &Option<Arc<RouteTarget>>, b: &Option<Arc<RouteTarget>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

impl WatchedConn {
    /// The watched slot; `None` when nothing is watched. Asked between commands only.
    pub(crate) fn slot(&self) -> Option<u16> {
        self.0.try_lock().ok()?.as_ref().map(|p| p.slot)
    }
}

impl<'r> Stateful<'r> {
    /// A blocking command on a dedicated connection to the owner of `slot`. It may block for
    /// `timeout` (its own; `None`: forever) plus `op_timeout` for the node to answer. If the
    /// client goes away first, the connection is closed, which unblocks it on the node.
    pub(crate) fn blocking(
        self,
        payload: Bytes,
        slot: u16,
        write: bool,
        timeout: Option<Duration>,
        protocol: Protocol,
    ) -> Call<'r> {
        self.blocking_on(None, payload, slot, write, timeout, protocol)
    }

    /// [`blocking`](Self::blocking) in a route's backend (`None`: the catch-all backend).
    pub(in crate::router) fn blocking_on(
        self,
        backend: Option<Arc<RouteTarget>>,
        payload: Bytes,
        slot: u16,
        write: bool,
        timeout: Option<Duration>,
        protocol: Protocol,
    ) -> Call<'r> {
        Call::slow(async move {
            let patience = timeout.map(|t| t + self.fwd.core.op_timeout());
            match self
                .on_dedicated(backend, &payload, slot, write, patience, protocol)
                .await
            {
                Ok((conn, reply)) => {
                    conn.release();
                    reply
                }
                Err(reply) => reply,
            }
        })
    }

    /// WATCH in a route's backend (`None`: the catch-all backend): on the watch's connection,
    /// or a new one to the owner of `slot`, which then stays with the client until EXEC,
    /// DISCARD or UNWATCH.
    pub(crate) fn watch_on(
        self,
        watch: WatchedConn,
        backend: Option<Arc<RouteTarget>>,
        payload: Bytes,
        slot: u16,
        protocol: Protocol,
    ) -> Call<'r> {
        Call::slow(async move {
            let mut pinned = watch.0.lock().await;
            if let Some(current) = pinned.as_mut() {
                if !same_backend(&current.backend, &backend) {
                    return error_with_prefix(
                        "CROSSSLOT ",
                        "Keys in request don't hash to the same slot (redcar: all WATCH keys \
                         of a transaction must belong to one backend of routes:)",
                    );
                }
                if current.slot != slot {
                    return error_with_prefix(
                        "CROSSSLOT ",
                        format_args!(
                            "Keys in request don't hash to the same slot (redcar: all WATCH keys \
                             of a transaction must be in one slot; slot {} is already watched)",
                            current.slot
                        ),
                    );
                }
                let deadline = Instant::now() + self.fwd.core.op_timeout();
                return match tokio::time::timeout_at(deadline, current.conn.request(&payload, 1))
                    .await
                {
                    Ok(Ok(reply)) => reply,
                    Ok(Err(e)) => {
                        *pinned = None;
                        redcar_error(format_args!("{e}; the watch is lost"))
                    }
                    Err(_) => {
                        *pinned = None;
                        redcar_error("timed out waiting for WATCH; the watch is lost")
                    }
                };
            }
            match self
                .on_dedicated(backend.clone(), &payload, slot, false, None, protocol)
                .await
            {
                Ok((conn, reply)) => {
                    if reply.starts_with(b"+OK") {
                        *pinned = Some(Pinned {
                            slot,
                            backend,
                            conn,
                        });
                    } else {
                        conn.release();
                    }
                    reply
                }
                Err(reply) => reply,
            }
        })
    }

    /// UNWATCH (and DISCARD, which also ends a watch): the connection is given back clean.
    /// Answers `reply` (the client's command's own success reply).
    pub(crate) fn unwatch(self, watch: WatchedConn, reply: &'static [u8]) -> Call<'r> {
        Call::slow(async move {
            let Some(mut pinned) = watch.0.lock().await.take() else {
                return Bytes::from_static(reply);
            };
            let deadline = Instant::now() + self.fwd.core.op_timeout();
            let done = tokio::time::timeout_at(deadline, pinned.conn.request(UNWATCH, 1)).await;
            if matches!(&done, Ok(Ok(ok)) if ok.starts_with(b"+OK")) {
                pinned.conn.release();
            }
            // Otherwise the connection is dropped, which ends the watch on the node just as well.
            Bytes::from_static(reply)
        })
    }

    /// EXEC after WATCH: the whole `MULTI … EXEC` on the watch's connection, which is then given
    /// back (EXEC ends the watch). A transaction refused because the slot moved gets the nil
    /// reply of a failed WATCH: nothing ran, and the client's retry loop will watch again,
    /// reaching the new owner.
    pub(crate) fn exec_watched(
        self,
        watch: WatchedConn,
        payload: Bytes,
        frames: u32,
        slot: Option<u16>,
        backend: Option<Arc<RouteTarget>>,
    ) -> Call<'r> {
        Call::slow(async move {
            let Some(mut pinned) = watch.0.lock().await.take() else {
                return redcar_error("the watch was lost before EXEC");
            };
            if slot.is_some() && !same_backend(&pinned.backend, &backend) {
                return error_with_prefix(
                    "CROSSSLOT ",
                    "Keys in request don't hash to the same slot (redcar: a transaction after \
                     WATCH must use keys of the watched backend)",
                );
            }
            if slot.is_some_and(|slot| slot != pinned.slot) {
                return error_with_prefix(
                    "CROSSSLOT ",
                    format_args!(
                        "Keys in request don't hash to the same slot (redcar: a transaction \
                         after WATCH must use keys of the watched slot {})",
                        pinned.slot
                    ),
                );
            }
            let deadline = Instant::now() + self.fwd.core.op_timeout();
            let outcome =
                tokio::time::timeout_at(deadline, pinned.conn.request(&payload, frames)).await;
            let replies = match outcome {
                Ok(Ok(replies)) => replies,
                Ok(Err(e)) if e.never_sent() => return redcar_error(e),
                Ok(Err(e)) => return lost_write(&e),
                Err(_) => {
                    return redcar_error(format_args!(
                        "timed out after {:?} waiting for EXEC on {}; the transaction may have run",
                        self.fwd.core.op_timeout(),
                        pinned.conn.addr()
                    ))
                }
            };
            pinned.conn.release();
            match tx_verdict(&replies) {
                Some(TxVerdict::Done(exec)) => exec,
                Some(TxVerdict::Redirect(addr, asking)) => {
                    self.note_redirect(&pinned.backend, Some(pinned.slot), &addr, asking);
                    Bytes::from_static(NIL_ARRAY)
                }
                Some(TxVerdict::Transient(_)) => Bytes::from_static(NIL_ARRAY),
                None => redcar_error("malformed reply to a transaction"),
            }
        })
    }

    /// Borrows a dedicated connection to `addr` speaking `protocol` (subscriptions).
    ///
    /// Used by subscriptions, which keep the connection for as long as they last. Fails with the
    /// pool's error as the client's reply (`dedicated.exhausted`, or the connect failing).
    pub(crate) async fn lend(
        self,
        addr: &Arc<str>,
        protocol: Protocol,
    ) -> Result<Dedicated, Bytes> {
        self.fwd
            .core
            .upstreams
            .dedicated()
            .acquire(addr, protocol)
            .await
            .map_err(redcar_error)
    }

    /// The primary owning `slot`, or for `None` one primary chosen by `pick` (spreading the
    /// cluster-wide subscriptions of many clients over the primaries).
    pub(crate) fn primary_for(self, slot: Option<u16>, pick: usize) -> Option<Arc<str>> {
        let topology = self.fwd.core.cluster.topology()?;
        let shard = match slot {
            Some(slot) => topology.shard(slot)?,
            None => topology
                .shards()
                .get(pick % topology.shards().len().max(1))?,
        };
        Some(shard.primary.addr().clone())
    }

    /// Asks for a fresh slot map (a shard channel's slot moved).
    ///
    /// Called by the subscription side, which notices moved shard channels itself; the refresh runs
    /// in the background.
    pub(crate) fn request_refresh(self) {
        self.fwd.core.cluster.request_refresh();
    }

    /// Sends one command on a dedicated connection to the owner of `slot`, following redirects
    /// and retrying what did not run, and returns the connection (clean: its reply was read)
    /// with the final reply. `patience`: how long the command itself may take (`None`:
    /// forever; connecting and retrying are bounded by `op_timeout` regardless).
    async fn on_dedicated(
        self,
        backend: Option<Arc<RouteTarget>>,
        payload: &[u8],
        slot: u16,
        write: bool,
        patience: Option<Duration>,
        protocol: Protocol,
    ) -> Result<(Dedicated, Bytes), Bytes> {
        let core = &self.fwd.core;
        let retry_deadline = Instant::now() + core.op_timeout();
        let mut target = AttemptTarget::Owner(Some(slot));
        let (mut redirects, mut attempt) = (0, 0);
        loop {
            let (node, asking) = self
                .fwd
                .resolve_on(backend.clone(), &target, retry_deadline)
                .await?;
            let mut conn = self.lend(node.addr(), protocol).await?;
            let sent = request_patiently(&mut conn, node.addr(), payload, asking, write, patience);
            let reply = match sent.await? {
                Ok(reply) => reply,
                Err(e) if e.never_sent() || !write => {
                    core.state(&backend).note_failure();
                    attempt += 1;
                    if !pause_before_retry(core.retry_backoff(), attempt, retry_deadline).await {
                        return Err(redcar_error(e));
                    }
                    target = AttemptTarget::Owner(Some(slot));
                    continue;
                }
                Err(e) => return Err(lost_write(&e)),
            };
            let next = match classify(&reply) {
                Verdict::Done => return Ok((conn, reply)),
                Verdict::Moved(addr) | Verdict::Ask(addr) if redirects >= core.max_redirects() => {
                    return Err(redcar_error(format_args!(
                        "gave up after {redirects} redirects (last to {addr})"
                    )));
                }
                Verdict::Moved(addr) => Some((addr.to_string(), false)),
                Verdict::Ask(addr) => Some((addr.to_string(), true)),
                Verdict::Transient => None,
                // A demoted primary: the command did not run; retry once the map is fresh.
                Verdict::ReadOnly => {
                    core.cluster.request_refresh();
                    None
                }
            };
            conn.release();
            match next {
                Some((addr, asking)) => {
                    redirects += 1;
                    // As on the shared connections: ASK marks the slot migrating.
                    self.note_redirect(&backend, Some(slot), &addr, asking);
                    target = AttemptTarget::Redirected {
                        node: core.upstreams.node(&addr),
                        asking,
                    };
                }
                None => {
                    attempt += 1;
                    core.counts.retry();
                    if !pause_before_retry(core.retry_backoff(), attempt, retry_deadline).await {
                        return Err(reply);
                    }
                    target = AttemptTarget::Owner(Some(slot));
                }
            }
        }
    }
}

/// Sends `payload` on `conn` to `addr` (after ASKING when `asking`) and reads its reply,
/// without ASKING's `+OK`; `Err`: the client's reply when the node took longer than `patience`
/// (`None`: no limit), as a blocking command may.
async fn request_patiently(
    conn: &mut Dedicated,
    addr: &str,
    payload: &[u8],
    asking: bool,
    write: bool,
    patience: Option<Duration>,
) -> Result<Outcome, Bytes> {
    let mut unit = BytesMut::with_capacity(payload.len() + ASKING.len());
    if asking {
        unit.extend_from_slice(ASKING);
    }
    unit.extend_from_slice(payload);
    let frames = 1 + u32::from(asking);
    let sent = conn.request(&unit, frames);
    let outcome = match patience {
        Some(patience) => match tokio::time::timeout(patience, sent).await {
            Ok(outcome) => outcome,
            Err(_) => {
                return Err(redcar_error(format_args!(
                    "timed out after {patience:?} waiting for {addr}{}",
                    if write {
                        "; the command may have run"
                    } else {
                        ""
                    }
                )))
            }
        },
        None => sent.await,
    };
    Ok(outcome.map(|reply| {
        if asking {
            skip_first_frame(reply)
        } else {
            reply
        }
    }))
}

/// Drops the `+OK` of a leading ASKING.
///
/// The ASKING frame is always complete here (the caller read both frames); if it cannot be
/// measured, the reply is returned as it is.
fn skip_first_frame(mut replies: Bytes) -> Bytes {
    if let Ok(Some(len)) = reply_frame_len(&replies, &Limits::default()) {
        replies.advance(len);
    }
    replies
}
