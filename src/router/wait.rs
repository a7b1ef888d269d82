//! WAIT: how many replicas acknowledged this client's writes. Redis counts the writes of the
//! connection WAIT arrives on, so redcar asks each primary the client wrote to on the client's
//! own shared connection (its lane), which carried those writes.
//!
//! WAIT blocks the connection it runs on, and that connection is shared. So redcar blocks only
//! once, for at most [`SLICE`] — enough for healthy replicas, which the primary asks for an
//! acknowledgement at once — and then polls without blocking (`MULTI / WAIT 1 0 / EXEC`)
//! until the client's timeout.
//! Lagging replicas acknowledge on their own once a second, so a WAIT they must satisfy takes
//! up to that long; other clients on the connection wait at most one slice per WAIT.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::join_all;
use tokio::time::Instant;

use super::call::Call;
use super::replies::{array_items, encode_command, integer};
use super::reply::redcar_error;
use super::transaction::{transaction_payload, tx_verdict, TxVerdict};
use super::Router;
use crate::protocol::write_integer;
use crate::upstream::Lane;
use crate::upstream::Node;

/// The longest a WAIT asks to hold a shared connection (Redis checks blocked clients' timeouts
/// on its event loop, so an idle node may hold it up to its `hz` tick, 100 ms by default).
pub const SLICE: Duration = Duration::from_millis(10);
/// How often a WAIT not yet satisfied asks again, without blocking.
const POLL: Duration = Duration::from_millis(20);

/// Slots per group in [`Written`]: 1,024 groups, one bit each.
const GROUP: u16 = 16;
/// 64-bit words holding one bit per group.
const GROUP_WORDS: usize = 16384 / GROUP as usize / 64;

/// Where a client ever wrote: WAIT asks those slots' primaries (Redis too counts the
/// connection's last write, however long ago).
///
/// Kept per group of [`GROUP`] slots in 128 bytes inside the session, not per slot: noting a
/// write is on every write's path, and a 2 KiB per-slot bitmap per client, hit at a random word
/// for every write, cost 4–10% of redcar's CPU at `SET -P 16` (bench/README.md, "WAIT
/// bookkeeping"; most likely cache and TLB misses across 50 sessions' bitmaps). The price: a group that straddles two shards' slot ranges makes WAIT ask both
/// primaries — it may wait for, and count, one primary more than the client wrote to, never
/// fewer.
#[derive(Default)]
pub struct Written {
    /// One bit per group of slots written to; made with the first write (a client that never
    /// writes, or a crowd of idle ones, holds none).
    groups: Option<Box<[u64; GROUP_WORDS]>>,
    /// A write whose slots were not noted (split or fan-out commands): ask every primary.
    everywhere: bool,
}

impl Written {
    #[inline]
    pub fn note(&mut self, slot: u16) {
        let group = usize::from(slot / GROUP);
        let groups = self.groups.get_or_insert_with(Default::default);
        groups[(group / 64) % GROUP_WORDS] |= 1 << (group % 64);
    }

    pub fn note_everywhere(&mut self) {
        self.everywhere = true;
    }

    fn is_empty(&self) -> bool {
        self.groups
            .as_deref()
            .is_none_or(|groups| groups.iter().all(|word| *word == 0))
    }

    /// Every slot of every group written to.
    fn slots(&self) -> impl Iterator<Item = u16> + '_ {
        let groups = self.groups.as_deref();
        (0..16384u16).filter(move |slot| {
            let group = usize::from(slot / GROUP);
            groups.is_some_and(|groups| groups[group / 64] & (1 << (group % 64)) != 0)
        })
    }
}

impl Router {
    /// WAIT `replicas` for up to `timeout` (`None`: until satisfied) on the primaries `written`
    /// names (every primary if it names none); the answer is the smallest count among them.
    pub fn wait(
        &self,
        written: &Written,
        replicas: i64,
        timeout: Option<Duration>,
        lane: Lane,
    ) -> Call<'_> {
        let nodes = match self.written_primaries(written) {
            Ok(nodes) => nodes,
            Err(reply) => return Call::ready(reply),
        };
        Call::slow(async move {
            let deadline = timeout.map(|t| Instant::now() + t);
            let counts = join_all(
                nodes
                    .iter()
                    .map(|node| self.wait_on(node, replicas, deadline, lane)),
            )
            .await;
            let mut fewest = i64::MAX;
            for count in counts {
                match count {
                    Ok(count) => fewest = fewest.min(count),
                    Err(reply) => return reply,
                }
            }
            let mut out = BytesMut::new();
            write_integer(&mut out, if fewest == i64::MAX { 0 } else { fewest });
            out.freeze()
        })
    }

    fn written_primaries(&self, written: &Written) -> Result<Vec<Arc<Node>>, Bytes> {
        let all = self.primaries()?;
        if written.everywhere || written.is_empty() {
            return Ok(all);
        }
        let Some(topology) = self.cluster.topology() else {
            return Ok(all);
        };
        let mut nodes: Vec<Arc<Node>> = Vec::new();
        for slot in written.slots() {
            let Some(shard) = topology.shard(slot) else {
                continue;
            };
            // Neighbouring slots mostly share a primary: skip the repeats before sorting.
            if !nodes.last().is_some_and(|n| Arc::ptr_eq(n, &shard.primary)) {
                nodes.push(shard.primary.clone());
            }
        }
        nodes.sort_by(|a, b| a.addr().cmp(b.addr()));
        nodes.dedup_by(|a, b| a.addr() == b.addr());
        Ok(nodes)
    }

    /// WAIT on one primary. First one blocking slice: the primary asks its replicas for an
    /// acknowledgement at once, so healthy replicas answer within it. If that is not enough,
    /// redcar polls without blocking (`MULTI / WAIT n 0 / EXEC`: inside a transaction WAIT
    /// answers at once) until enough replicas acknowledged or the deadline passed.
    async fn wait_on(
        &self,
        node: &Arc<Node>,
        replicas: i64,
        deadline: Option<Instant>,
        lane: Lane,
    ) -> Result<i64, Bytes> {
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
        let mut count = integer(&reply).ok_or(reply)?;
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
            let polled = match tx_verdict(&replies) {
                Some(TxVerdict::Done(exec)) => array_items(&exec)
                    .and_then(|items| integer(items.first()?))
                    .ok_or(exec)?,
                _ => return Err(redcar_error("unexpected reply to WAIT")),
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
        &self,
        node: &Arc<Node>,
        payload: Bytes,
        frames: u32,
        blocks: Duration,
        lane: Lane,
    ) -> Result<Bytes, Bytes> {
        let reply = node.send_frames(payload, false, lane, frames);
        tokio::time::timeout(blocks + self.op_timeout(), reply)
            .await
            .map_err(|_| self.timed_out(node))?
            .map_err(redcar_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_slots_are_remembered_by_group_without_duplicates() {
        let mut written = Written::default();
        assert!(written.is_empty());
        assert_eq!(written.slots().count(), 0);
        for slot in [0, 5, 15, 16383, 5] {
            written.note(slot);
        }
        assert!(!written.is_empty());
        // Slots 0, 5 and 15 share the first group; 16383 is in the last.
        let expected: Vec<u16> = (0..16).chain(16368..16384).collect();
        assert_eq!(written.slots().collect::<Vec<_>>(), expected);
        assert!(!written.everywhere);
        written.note_everywhere();
        assert!(written.everywhere);
    }

    #[test]
    fn a_write_next_to_a_shard_boundary_marks_both_sides_of_its_group() {
        // The default 3-shard layout splits at 5460 | 5461: group 341 holds 5456..=5471.
        let mut written = Written::default();
        written.note(5460);
        let slots: Vec<u16> = written.slots().collect();
        assert_eq!(slots.first(), Some(&5456));
        assert_eq!(slots.last(), Some(&5471));
        assert!(
            slots.contains(&5461),
            "the neighbouring shard's slot is asked too"
        );
    }
}
