//! Transactions: the session queues a client's MULTI … EXEC and, at EXEC, the whole unit is sent
//! as one contiguous write. Redis runs a connection's commands in order and a transaction
//! atomically at EXEC, so this is atomic even on a connection other clients share — no dedicated
//! connection is needed unless the client used WATCH (see `dedicated.rs`).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use crate::protocol::{reply_frame_len, Limits};
use crate::router::forward::{
    classify, lost_write, pause_before_retry, AttemptTarget, Call, Verdict,
};
use crate::router::reply::redcar_error;
use crate::router::{RouteTarget, Stateful};
use crate::upstream::{Lane, Node, Reply};

/// `MULTI\r\n` and `EXEC\r\n` as RESP, around the queued commands.
pub(crate) const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
pub(crate) const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

/// What the node's replies to a whole `MULTI … EXEC` say.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TxVerdict {
    /// EXEC ran (or failed for the client's own reasons): give EXEC's reply to the client.
    Done(Bytes),
    /// Not run: a queued command was redirected (address, ASK?) — the whole unit can go there.
    Redirect(String, bool),
    /// Not run: a queued command met TRYAGAIN / CLUSTERDOWN / LOADING / READONLY; it may run
    /// later.
    Transient(Bytes),
}

/// Reads the replies to `MULTI, c1 … cn, EXEC` (in one slice). EXEC ran only if it answered
/// something other than an error; when it did not, whatever says why decides:
/// - EXEC's own redirect or transient error: Redis checks the keys of the whole transaction
///   again at EXEC, and refuses it as a unit (e.g. `-TRYAGAIN` when its keys are split between
///   the two nodes of a migration, `-ASK` when a key moved after it was queued);
/// - `-EXECABORT … because of: <error>`: EXEC itself was refused (`-NOREPLICAS`, `-READONLY`,
///   `-LOADING`, … arriving between MULTI and EXEC);
/// - otherwise the first redirect or transient error among the queued replies (the command
///   that was refused at queue time, which made EXEC abort).
pub(super) fn tx_verdict(replies: &Bytes) -> Option<TxVerdict> {
    let frames = split_frames(replies)?;
    let exec = frames.last()?.clone();
    match classify(&exec) {
        Verdict::Done => {}
        Verdict::Moved(addr) => return Some(TxVerdict::Redirect(addr.to_string(), false)),
        Verdict::Ask(addr) => return Some(TxVerdict::Redirect(addr.to_string(), true)),
        Verdict::Transient | Verdict::ReadOnly => return Some(TxVerdict::Transient(exec)),
    }
    if !exec.starts_with(b"-EXECABORT") {
        return Some(TxVerdict::Done(exec));
    }
    if let Some(why) = abort_cause(&exec) {
        return Some(why);
    }
    for queued in &frames[1..frames.len() - 1] {
        match classify(queued) {
            Verdict::Done => {}
            Verdict::Moved(addr) => return Some(TxVerdict::Redirect(addr.to_string(), false)),
            Verdict::Ask(addr) => return Some(TxVerdict::Redirect(addr.to_string(), true)),
            Verdict::Transient | Verdict::ReadOnly => {
                return Some(TxVerdict::Transient(queued.clone()))
            }
        }
    }
    Some(TxVerdict::Done(exec))
}

/// `-EXECABORT Transaction discarded because of: <error>` (Redis's `execCommandAbort`) whose
/// error means the transaction may run later: that error, as the node's own reply.
fn abort_cause(exec: &Bytes) -> Option<TxVerdict> {
    const BECAUSE: &[u8] = b"because of: ";
    let at = exec.windows(BECAUSE.len()).position(|w| w == BECAUSE)? + BECAUSE.len();
    let mut error = BytesMut::with_capacity(exec.len() - at + 1);
    error.extend_from_slice(b"-");
    error.extend_from_slice(&exec[at..]);
    match classify(&error) {
        Verdict::Transient | Verdict::ReadOnly => Some(TxVerdict::Transient(error.freeze())),
        _ => None,
    }
}

/// The frames of a reply slice, each a zero-copy slice of it.
pub(super) fn split_frames(replies: &Bytes) -> Option<Vec<Bytes>> {
    let limits = Limits::default();
    let mut frames = Vec::new();
    let mut at = 0;
    while at < replies.len() {
        let len = reply_frame_len(&replies[at..], &limits).ok()??;
        frames.push(replies.slice(at..at + len));
        at += len;
    }
    Some(frames)
}

/// `MULTI`, the queued commands, `EXEC`: one payload, and the number of replies it produces.
pub(crate) fn transaction_payload(queued: &[u8], commands: u32) -> (Bytes, u32) {
    let mut payload = BytesMut::with_capacity(MULTI.len() + queued.len() + EXEC.len());
    payload.extend_from_slice(MULTI);
    payload.extend_from_slice(queued);
    payload.extend_from_slice(EXEC);
    (payload.freeze(), commands + 2)
}

impl<'r> Stateful<'r> {
    /// Sends a whole transaction (from [`transaction_payload`]) to the owner of `slot` (`None`:
    /// any primary) on the client's shared connection. A transaction the node refused as a
    /// whole (redirect, TRYAGAIN) is sent again, since none of it ran; one whose connection broke
    /// after sending is not, since all of it may have run.
    pub(crate) fn exec(
        self,
        payload: Bytes,
        frames: u32,
        slot: Option<u16>,
        lane: Lane,
    ) -> Call<'r> {
        self.exec_on(None, payload, frames, slot, lane)
    }

    /// [`exec`](Self::exec) in a route's backend (`None`: the catch-all backend).
    pub(crate) fn exec_on(
        self,
        backend: Option<Arc<RouteTarget>>,
        payload: Bytes,
        frames: u32,
        slot: Option<u16>,
        lane: Lane,
    ) -> Call<'r> {
        // The first attempt is queued now, like any forwarded command, so the unit reaches the
        // node before whatever the client pipelined after EXEC.
        let first = self.queue_exec(&backend, &payload, frames, slot, lane);
        Call::slow(async move {
            let deadline = Instant::now() + self.fwd.core.op_timeout();
            let mut first = first;
            let mut target = AttemptTarget::Owner(slot);
            let (mut redirects, mut attempt) = (0, 0);
            loop {
                let (node, reply) = match first.take() {
                    Some(sent) => sent,
                    None => {
                        let (node, asking) = match self
                            .fwd
                            .resolve_on(backend.clone(), &target, deadline)
                            .await
                        {
                            Ok(found) => found,
                            Err(reply) => return reply,
                        };
                        let reply = node.send_frames(payload.clone(), asking, lane, frames);
                        (node, reply)
                    }
                };
                let outcome = match tokio::time::timeout_at(deadline, reply).await {
                    Ok(outcome) => outcome,
                    Err(_elapsed) => return self.fwd.timed_out(&node),
                };
                let why = match outcome.map(|replies| tx_verdict(&replies)) {
                    Ok(Some(TxVerdict::Done(exec))) => return exec,
                    Ok(None) => return redcar_error("malformed reply to a transaction"),
                    Ok(Some(TxVerdict::Redirect(addr, _)))
                        if redirects >= self.fwd.core.max_redirects() =>
                    {
                        return redcar_error(format_args!(
                            "gave up after {redirects} redirects (last to {addr})"
                        ));
                    }
                    Ok(Some(TxVerdict::Redirect(addr, asking))) => {
                        redirects += 1;
                        target = self.follow_tx_redirect(&backend, slot, &addr, asking);
                        continue;
                    }
                    Ok(Some(TxVerdict::Transient(reply))) => {
                        // A queued write met a demoted primary: the map is stale.
                        if reply.starts_with(b"-READONLY") {
                            self.fwd.core.cluster.request_refresh();
                        }
                        reply
                    }
                    Err(e) if e.never_sent() => {
                        self.fwd.core.state(&backend).note_failure();
                        redcar_error(&e)
                    }
                    Err(e) => return lost_write(&e),
                };
                attempt += 1;
                self.fwd.core.counts.retry();
                if !pause_before_retry(self.fwd.core.retry_backoff(), attempt, deadline).await {
                    return why;
                }
                // Back to the owner; redirects are counted per attempt, since a migration
                // answers ASK (source), then TRYAGAIN (target) until the keys are together.
                target = AttemptTarget::Owner(slot);
                redirects = 0;
            }
        })
    }

    /// Queues the first attempt of a transaction on the primary of `slot` (`None`: the first
    /// primary) in the current map; `None` when the map has no such primary yet.
    #[inline]
    fn queue_exec(
        self,
        backend: &Option<Arc<RouteTarget>>,
        payload: &Bytes,
        frames: u32,
        slot: Option<u16>,
        lane: Lane,
    ) -> Option<(Arc<Node>, Reply)> {
        let topology = self.fwd.core.state(backend).topology()?;
        let shard = match slot {
            Some(slot) => topology.shard(slot)?,
            None => topology.shards().first()?,
        };
        let primary = shard.primary.clone();
        let reply = primary.send_frames(payload.clone(), false, lane, frames);
        Some((primary, reply))
    }

    /// A transaction refused as a whole with MOVED or ASK (`asking`) to `addr`: notes the
    /// redirect where the slot map keeps them, and the whole unit goes there next.
    fn follow_tx_redirect(
        self,
        backend: &Option<Arc<RouteTarget>>,
        slot: Option<u16>,
        addr: &str,
        asking: bool,
    ) -> AttemptTarget {
        self.note_redirect(backend, slot, addr, asking);
        AttemptTarget::Redirected {
            node: self.fwd.core.upstreams.node(addr),
            asking,
        }
    }

    /// A MOVED or ASK (`asking`) to `addr` for `slot`, met by a transaction or on a dedicated
    /// connection (WATCH, blocking commands), noted as on the shared connections: counted, ASK
    /// marks the slot migrating (its reads go to the primary until the migration ends), MOVED
    /// winds the mark down and asks for a fresh map.
    pub(super) fn note_redirect(
        self,
        backend: &Option<Arc<RouteTarget>>,
        slot: Option<u16>,
        addr: &str,
        asking: bool,
    ) {
        self.fwd
            .core
            .redirects
            .redirect(if asking { "ask" } else { "moved" }, addr);
        let state = self.fwd.core.state(backend);
        match (slot, asking) {
            (Some(slot), true) => state.migrating().note_ask(slot),
            (Some(slot), false) => state.migrating().note_moved(slot),
            (None, _) => {}
        }
        if !asking {
            state.note_redirect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_reply_is_the_last_frame() {
        let replies = Bytes::from_static(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:2\r\n");
        assert_eq!(
            tx_verdict(&replies),
            Some(TxVerdict::Done(Bytes::from_static(b"*2\r\n+OK\r\n:2\r\n")))
        );
    }

    #[test]
    fn an_aborted_transaction_says_why() {
        let moved = Bytes::from_static(
            b"+OK\r\n-MOVED 12 127.0.0.1:7001\r\n-EXECABORT Transaction discarded\r\n",
        );
        assert_eq!(
            tx_verdict(&moved),
            Some(TxVerdict::Redirect("127.0.0.1:7001".to_string(), false))
        );
        let ask = Bytes::from_static(
            b"+OK\r\n+QUEUED\r\n-ASK 12 127.0.0.1:7002\r\n-EXECABORT Transaction discarded\r\n",
        );
        assert_eq!(
            tx_verdict(&ask),
            Some(TxVerdict::Redirect("127.0.0.1:7002".to_string(), true))
        );
        let own_error =
            Bytes::from_static(b"+OK\r\n-ERR syntax error\r\n-EXECABORT Transaction discarded\r\n");
        assert_eq!(
            tx_verdict(&own_error),
            Some(TxVerdict::Done(Bytes::from_static(
                b"-EXECABORT Transaction discarded\r\n"
            )))
        );
        assert_eq!(tx_verdict(&Bytes::from_static(b"+OK\r\n$5\r\nab")), None);
    }

    #[test]
    fn exec_refused_as_a_unit_is_not_run() {
        // Redis 7.0, measured: the keys of the whole transaction are checked again at EXEC.
        let tryagain = Bytes::from_static(
            b"+OK\r\n+QUEUED\r\n+QUEUED\r\n-TRYAGAIN Multiple keys request during rehashing of slot\r\n",
        );
        assert_eq!(
            tx_verdict(&tryagain),
            Some(TxVerdict::Transient(Bytes::from_static(
                b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
            )))
        );
        let ask = Bytes::from_static(b"+OK\r\n+QUEUED\r\n-ASK 15891 127.0.0.1:7001\r\n");
        assert_eq!(
            tx_verdict(&ask),
            Some(TxVerdict::Redirect("127.0.0.1:7001".to_string(), true))
        );
        let moved = Bytes::from_static(b"+OK\r\n+QUEUED\r\n-MOVED 15891 127.0.0.1:7001\r\n");
        assert_eq!(
            tx_verdict(&moved),
            Some(TxVerdict::Redirect("127.0.0.1:7001".to_string(), false))
        );
    }

    #[test]
    fn exec_aborted_because_of_a_transient_error_is_not_run() {
        let noreplicas = Bytes::from_static(
            b"+OK\r\n+QUEUED\r\n-EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.\r\n",
        );
        assert_eq!(
            tx_verdict(&noreplicas),
            Some(TxVerdict::Transient(Bytes::from_static(
                b"-NOREPLICAS Not enough good replicas to write.\r\n"
            )))
        );
        // The client's own problem stays its answer.
        let oom = Bytes::from_static(
            b"+OK\r\n+QUEUED\r\n-EXECABORT Transaction discarded because of: OOM command not allowed\r\n",
        );
        assert!(matches!(tx_verdict(&oom), Some(TxVerdict::Done(_))));
        // A transaction that ran answers an array, even holding errors.
        let ran = Bytes::from_static(b"+OK\r\n+QUEUED\r\n*1\r\n-TRYAGAIN x\r\n");
        assert!(matches!(tx_verdict(&ran), Some(TxVerdict::Done(_))));
    }

    #[test]
    fn payload_wraps_the_queued_commands() {
        let (payload, frames) = transaction_payload(b"*1\r\n$4\r\nPING\r\n", 1);
        assert_eq!(
            &payload[..],
            &b"*1\r\n$5\r\nMULTI\r\n*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nEXEC\r\n"[..]
        );
        assert_eq!(frames, 3);
    }
}
