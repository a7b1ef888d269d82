//! WAIT: how many replicas acknowledged this client's writes. Redis counts the writes of the
//! connection WAIT arrives on, so redcar asks the primaries of the writes the WAIT covers (those
//! since the client's previous WAIT, see [`Written`]) on the client's own shared connection (its
//! lane), which carried those writes.
//!
//! Per core, a session that moved to another worker (with nothing in flight) sends on the new
//! worker's connections, which never carried its earlier writes: alone, they could count
//! replicas that never got those. So a moved session remembers the workers it wrote from
//! ([`Written::note_moved_from`]), and its WAIT asks each covered primary on each of those
//! workers' connections (the same lane, [`Lane::on_worker`]) as well as on its own, answering
//! the smallest count. That is exact: a replica's acknowledged offset only grows, so the
//! replicas that reached the later of two connections' last writes are exactly those counted by
//! both, i.e. the smaller count. (Each connection is shared, so its last write may be another
//! client's, later than this one's: as without moves, that can only lower the count.)
//!
//! WAIT blocks the connection it runs on, and that connection is shared. So redcar blocks only
//! once, for at most [`SLICE`] — enough for healthy replicas, which the primary asks for an
//! acknowledgement at once — and then polls without blocking (`MULTI / WAIT 1 0 / EXEC`)
//! until the client's timeout.
//! Lagging replicas acknowledge on their own once a second, so a WAIT they must satisfy takes
//! up to that long; other clients on the connection wait at most one slice per WAIT.
//!
//! A failover can demote the primary a WAIT asks: it answers `-ERR WAIT cannot be used with
//! replica instances`, releases a blocked WAIT with `-UNBLOCKED … (master -> replica?)` and
//! closes that connection. Then redcar asks for a fresh map and asks the shard's new primary
//! instead, as writes follow `-READONLY`. After a manual (coordinated) failover that is
//! honest: `CLUSTER FAILOVER` lets the replica catch up with every write before it takes
//! over, so the client's writes are on the new primary, and the new primary counts the
//! replicas in sync with it (the old primary, now its replica, had them too). A lost connection
//! alone proves nothing (the node may have crashed with writes its replica never got), so it
//! is followed only when the node still answers and says it is a replica.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::join_all;
use tokio::time::Instant;

use super::transaction::{transaction_payload, tx_verdict, TxVerdict};
use crate::cluster::Shard;
use crate::protocol::write_integer;
use crate::router::replies::{array_items, bulk, encode_command, integer};
use crate::router::reply::redcar_error;
use crate::router::{Call, Stateful};
use crate::upstream::Lane;
use crate::upstream::Node;

mod lanes;
mod written;
use lanes::wait_lanes;
use written::Covered;
pub(crate) use written::{Written, MOVED_FROM_WORKERS};

/// The longest a WAIT asks to hold a shared connection (Redis checks blocked clients' timeouts
/// on its event loop, so an idle node may hold it up to its `hz` tick, 100 ms by default).
pub(crate) const SLICE: Duration = Duration::from_millis(10);
/// How often a WAIT not yet satisfied asks again, without blocking.
const POLL: Duration = Duration::from_millis(20);
/// While following a failover: how long to wait for a map that names the new primary before
/// asking for another (the first refresh may meet a node that has not heard of it yet).
const RECHECK: Duration = Duration::from_millis(100);
/// How long past the client's WAIT timeout a primary may take to answer before it counts as 0
/// (a healthy one answers within the blocking slice and a poll, a few milliseconds).
const GRACE: Duration = Duration::from_millis(50);
/// Failovers one WAIT follows, one after another, before giving up.
const MAX_FOLLOWS: usize = 2;

/// Why WAIT on one node gave no count.
enum Failure {
    /// The node says it is a replica now: a failover demoted it.
    Demoted(Bytes),
    /// The connection broke, or could not be made: a node being demoted closes the connection
    /// of a blocked WAIT it releases, but so does a node that dies.
    Lost(Bytes),
    /// Anything else: the client's reply.
    Final(Bytes),
}

impl Failure {
    /// A node's reply that is not a count.
    fn of_reply(reply: Bytes) -> Failure {
        if !reply.starts_with(b"-") {
            return Failure::Final(redcar_error("unexpected reply to WAIT"));
        }
        // Redis 7's words for WAIT on a replica, and for a blocked WAIT released as the node
        // turns into one (`instance state changed (master -> replica?)`).
        let demoted = reply.starts_with(b"-ERR WAIT cannot be used with replica")
            || (reply.starts_with(b"-UNBLOCKED")
                && memchr::memmem::find(&reply, b"replica").is_some());
        if demoted {
            Failure::Demoted(reply)
        } else {
            Failure::Final(reply)
        }
    }

    fn into_reply(self) -> Bytes {
        match self {
            Failure::Demoted(reply) | Failure::Lost(reply) | Failure::Final(reply) => reply,
        }
    }
}

impl<'r> Stateful<'r> {
    /// WAIT `replicas` for up to `timeout` (`None`: until satisfied) on the primaries of the
    /// writes the WAIT covers (every primary if it covers none, or a fan-out), on the client's
    /// lane and on the workers' it moved from; the answer is the smallest count among them.
    /// How it ends decides what the next WAIT covers.
    pub(crate) fn wait(
        self,
        written: &mut Written,
        replicas: i64,
        timeout: Option<Duration>,
        lane: Lane,
    ) -> Call<'r> {
        let lanes = wait_lanes(lane, written.moved_from(), crate::workers::current());
        let (covered, end) = written.begin_wait();
        let nodes = match self.covered_primaries(covered) {
            Ok(nodes) => nodes,
            Err(reply) => {
                end.short();
                return Call::ready(reply);
            }
        };
        Call::slow(async move {
            let deadline = timeout.map(|t| Instant::now() + t);
            let asks = nodes.iter().flat_map(|(node, slot)| {
                lanes
                    .iter()
                    .map(move |lane| self.wait_following(node, *slot, replicas, deadline, *lane))
            });
            let counts = join_all(asks).await;
            let mut fewest = i64::MAX;
            for count in counts {
                match count {
                    Ok(count) => fewest = fewest.min(count),
                    Err(reply) => {
                        end.short();
                        return reply;
                    }
                }
            }
            let fewest = if fewest == i64::MAX { 0 } else { fewest };
            if fewest >= replicas {
                end.confirmed();
            } else {
                end.short();
            }
            let mut out = BytesMut::new();
            write_integer(&mut out, fewest);
            out.freeze()
        })
    }

    /// The primaries of the covered slots, each with one of those slots (which finds the
    /// shard's new primary after a failover); every primary when the writes went everywhere.
    fn covered_primaries(self, covered: &Covered) -> Result<Vec<(Arc<Node>, u16)>, Bytes> {
        let topology = self.fwd.core.cluster.topology().ok_or_else(|| {
            redcar_error("no cluster topology known yet (are the seed nodes reachable?)")
        })?;
        let mut nodes: Vec<(Arc<Node>, u16)> = Vec::new();
        let mut add = |shard: &Shard, slot: u16| {
            // Neighbouring slots mostly share a primary: skip the repeats before sorting.
            if !nodes
                .last()
                .is_some_and(|(node, _)| Arc::ptr_eq(node, &shard.primary))
            {
                nodes.push((shard.primary.clone(), slot));
            }
        };
        let everywhere = covered.everywhere();
        if everywhere {
            for (start, _, shard) in topology.ranges() {
                if let Some(shard) = shard {
                    add(shard, start);
                }
            }
        } else {
            for slot in covered.slots() {
                if let Some(shard) = topology.shard(slot) {
                    add(shard, slot);
                }
            }
        }
        nodes.sort_by(|a, b| a.0.addr().cmp(b.0.addr()));
        nodes.dedup_by(|a, b| a.0.addr() == b.0.addr());
        if everywhere && nodes.is_empty() {
            return Err(redcar_error("no primary known yet"));
        }
        Ok(nodes)
    }

    /// [`wait_on`](Self::wait_on) the primary of `slot`'s shard, following the shard to its
    /// new primary when a failover demotes `node` (see the module docs). Following ends at the
    /// client's timeout, when the answer is 0 (no replica could be confirmed in time), or, for
    /// a WAIT without one, `op_timeout` after the demotion, with an error. A primary that is
    /// unreachable or does not answer by the client's timeout counts as 0 replicas too.
    async fn wait_following(
        self,
        node: &Arc<Node>,
        slot: u16,
        replicas: i64,
        deadline: Option<Instant>,
        lane: Lane,
    ) -> Result<i64, Bytes> {
        let mut node = node.clone();
        let mut follow_until = None;
        for _ in 0..=MAX_FOLLOWS {
            let attempt = self.wait_on(&node, replicas, deadline, lane);
            let outcome = match deadline {
                // A node that does not answer by the client's timeout (frozen, or its
                // connection hanging) has confirmed no replica: 0, as Redis answers a WAIT
                // that timed out, rather than an error an `op_timeout` later.
                Some(deadline) => match tokio::time::timeout_at(deadline + GRACE, attempt).await {
                    Ok(outcome) => outcome,
                    Err(_) => return Ok(0),
                },
                None => attempt.await,
            };
            let failure = match outcome {
                Ok(count) => return Ok(count),
                Err(Failure::Final(reply)) => return Err(reply),
                Err(failure) => failure,
            };
            let until = *follow_until.get_or_insert_with(|| {
                deadline.unwrap_or_else(|| Instant::now() + self.fwd.core.op_timeout())
            });
            let demoted = match failure {
                Failure::Lost(_) => self.says_replica(&node, lane).await,
                _ => true,
            };
            if !demoted {
                // The node is gone (killed, or unreachable): none of its replicas can be
                // confirmed. With a timeout that is the answer, 0, as for any replica count
                // not reached in time; a client that waits without one gets the error.
                if deadline.is_some() {
                    tracing::debug!(node = %node.addr(), slot, "WAIT counts an unreachable primary as 0 replicas");
                    return Ok(0);
                }
                return Err(failure.into_reply());
            }
            match self.successor(slot, &node, until).await {
                Some(next) => {
                    tracing::debug!(
                        from = %node.addr(),
                        to = %next.addr(),
                        slot,
                        lost = matches!(failure, Failure::Lost(_)),
                        "WAIT follows a failover to the shard's new primary"
                    );
                    node = next;
                }
                None if deadline.is_some() => return Ok(0),
                None => {
                    return Err(redcar_error(format_args!(
                        "WAIT: {} was demoted to a replica and no new primary of slot {slot} \
                         was known within {:?}",
                        node.addr(),
                        self.fwd.core.op_timeout()
                    )))
                }
            }
        }
        Err(redcar_error(format_args!(
            "WAIT: slot {slot} failed over {} times during one WAIT",
            MAX_FOLLOWS + 1
        )))
    }

    /// After a lost connection: does `node` still answer, and say it is a replica (demoted by
    /// a failover, so its writes went on with the new primary)? A node that does not answer
    /// may have crashed: no.
    async fn says_replica(self, node: &Arc<Node>, lane: Lane) -> bool {
        let role = encode_command([&b"ROLE"[..]].into_iter());
        // Twice: the first try may meet the connection the node is closing.
        for _ in 0..2 {
            let reply = node.send_frames(role.clone(), false, Lane::resp2(lane.client()), 1);
            match tokio::time::timeout(self.fwd.core.op_timeout(), reply).await {
                Ok(Ok(reply)) => {
                    let role = array_items(&reply)
                        .and_then(|items| bulk(items.first()?))
                        .unwrap_or_default();
                    return &role[..] == b"slave" || &role[..] == b"replica";
                }
                Ok(Err(e)) if !e.never_sent() => continue,
                _ => return false,
            }
        }
        false
    }

    /// The primary of `slot`'s shard once the map names another than `old`, asking for fresh
    /// maps until `until`.
    async fn successor(self, slot: u16, old: &Arc<Node>, until: Instant) -> Option<Arc<Node>> {
        loop {
            let seen = self.fwd.core.cluster.version();
            if let Some(topology) = self.fwd.core.cluster.topology() {
                if let Some(shard) = topology.shard(slot) {
                    if shard.primary.addr() != old.addr() {
                        return Some(shard.primary.clone());
                    }
                }
            }
            let now = Instant::now();
            if now >= until {
                return None;
            }
            self.fwd.core.cluster.request_refresh();
            let recheck = until.min(now + RECHECK);
            let _ =
                tokio::time::timeout_at(recheck, self.fwd.core.cluster.changed_since(seen)).await;
        }
    }

    /// WAIT on one primary. First one blocking slice: the primary asks its replicas for an
    /// acknowledgement at once, so healthy replicas answer within it. If that is not enough,
    /// redcar polls without blocking (`MULTI / WAIT n 0 / EXEC`: inside a transaction WAIT
    /// answers at once) until enough replicas acknowledged or the deadline passed.
    async fn wait_on(
        self,
        node: &Arc<Node>,
        replicas: i64,
        deadline: Option<Instant>,
        lane: Lane,
    ) -> Result<i64, Failure> {
        let replicas_arg = replicas.to_string();
        let slice = match deadline {
            Some(deadline) => deadline
                .saturating_duration_since(Instant::now())
                .min(SLICE),
            None => SLICE,
        }
        .max(Duration::from_millis(1));
        let millis = slice.as_millis().to_string();
        let blocking =
            encode_command([&b"WAIT"[..], replicas_arg.as_bytes(), millis.as_bytes()].into_iter());
        let reply = self.on_lane(node, blocking, 1, slice, lane).await?;
        let Some(mut count) = integer(&reply) else {
            return Err(Failure::of_reply(reply));
        };
        // Inside MULTI an unsatisfied WAIT answers 0, a satisfied one the real count: asking
        // for one replica gives the real count whenever there is any.
        let poll = {
            let wait = encode_command([&b"WAIT"[..], b"1", b"0"].into_iter());
            transaction_payload(&wait, 1).0
        };
        while count < replicas && deadline.is_none_or(|d| Instant::now() < d) {
            let pause = match deadline {
                Some(deadline) => deadline.saturating_duration_since(Instant::now()).min(POLL),
                None => POLL,
            };
            tokio::time::sleep(pause).await;
            let replies = self
                .on_lane(node, poll.clone(), 3, Duration::ZERO, lane)
                .await?;
            let exec = match tx_verdict(&replies) {
                Some(TxVerdict::Done(exec)) => exec,
                _ => return Err(Failure::Final(redcar_error("unexpected reply to WAIT"))),
            };
            // EXEC's one item: the count, or WAIT's error (a replica refuses it at EXEC).
            let Some(item) = array_items(&exec).and_then(|items| items.into_iter().next()) else {
                return Err(Failure::of_reply(exec));
            };
            let Some(polled) = integer(&item) else {
                return Err(Failure::of_reply(item));
            };
            // Right after the blocking slice a poll can answer 0 for a while (seen with Redis
            // 7.0: the offset it checks then includes the primary's own GETACK). The replicas
            // counted by the slice had the client's writes, and acknowledgements only grow,
            // so the best count seen stands.
            count = count.max(polled);
        }
        Ok(count)
    }

    /// Sends `payload` on the client's connection to `node`, bounded by `op_timeout` beyond
    /// the `blocks` the command may take on the node.
    async fn on_lane(
        self,
        node: &Arc<Node>,
        payload: Bytes,
        frames: u32,
        blocks: Duration,
        lane: Lane,
    ) -> Result<Bytes, Failure> {
        let reply = node.send_frames(payload, false, lane, frames);
        match tokio::time::timeout(blocks + self.fwd.core.op_timeout(), reply).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(Failure::Lost(redcar_error(e))),
            Err(_) => Err(Failure::Final(self.fwd.timed_out(node))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demoted_primary_is_told_by_its_words() {
        let demoted = [
            &b"-ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.\r\n"[..],
            b"-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n",
        ];
        for reply in demoted {
            assert!(matches!(
                Failure::of_reply(Bytes::from_static(reply)),
                Failure::Demoted(_)
            ));
        }
        // CLIENT UNBLOCK … ERROR by an operator says nothing about the node's role.
        let unblocked = Bytes::from_static(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
        assert!(matches!(Failure::of_reply(unblocked), Failure::Final(_)));
        let other = Bytes::from_static(b"-ERR timeout is negative\r\n");
        assert!(
            matches!(Failure::of_reply(other.clone()), Failure::Final(reply) if reply == other)
        );
        // Not an error and not a count (an EXEC array, say): redcar's own error, never the array.
        let odd = Failure::of_reply(Bytes::from_static(b"*1\r\n+OK\r\n")).into_reply();
        assert!(odd.starts_with(b"-ERR redcar: "), "{odd:?}");
    }
}
