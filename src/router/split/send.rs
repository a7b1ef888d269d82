//! Sending a split's parts: the parts bound for one node go out as one pipelined batch (one
//! queue entry, one reply hand-off), and only a part whose reply asks for more (MOVED, ASK, a
//! retry) continues on its own.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::join_all;
use smallvec::{smallvec, SmallVec};
use tokio::time::Instant;

use super::{reply_limits, Part, Split};
use crate::protocol::reply_frame_len;
use crate::router::forward::{classify, Call, Command, Outcome, Verdict};
use crate::router::reply::redcar_error;
use crate::router::{select, Router};
use crate::upstream::Lane;
use crate::upstream::{Node, Reply};

/// The parts queued on one node together.
struct Batch {
    node: Arc<Node>,
    reply: Reply,
    /// The batch's parts, in the order sent, as a range of the split's sending order.
    parts: Range<usize>,
}

/// A part that leaves the batches: a route's part, or one whose node is unusable right now.
struct Alone<'r> {
    part: usize,
    call: Call<'r>,
}

impl Router {
    /// Queues every part now (so they keep their place among the client's commands), batched
    /// per node, then merges the replies. `args` are the arguments the split was planned from.
    pub(in crate::router) fn start_split(
        &self,
        mut split: Box<Split>,
        args: &[Bytes],
        lane: Lane,
    ) -> Call<'_> {
        let live = self.live.load();
        let deadline = Instant::now() + live.config.op_timeout;
        // Fault injection and hedged reads act per command: every part goes alone then.
        let batching =
            live.faults.is_none() && (split.write || !Router::hedges_reads(&live.config));
        let policy = live.config.read_policy;
        drop(live);
        // One look at the slot map for every part.
        let snapshot = self.cluster.topology_now();
        let topology = snapshot.as_deref().filter(|_| batching);
        // Each part's batch, if it joins one; each batch's node and part count. A part with no
        // usable node (or none known) goes alone, which waits for a map or answers why no node
        // can serve it.
        let mut batch_of: SmallVec<[Option<usize>; 16]> = SmallVec::new();
        let mut nodes: SmallVec<[(Arc<Node>, usize); 8]> = SmallVec::new();
        for part in &split.parts {
            let node = topology
                .filter(|_| part.route.is_none())
                .and_then(|t| t.shard(part.slot))
                .and_then(|shard| {
                    let migrating = self.cluster.migrating();
                    let policy = select::policy_for(policy, split.write, part.slot, migrating);
                    select::pick(shard, policy, split.write, &[])
                });
            let Some(node) = node else {
                batch_of.push(None);
                continue;
            };
            match nodes.iter().position(|(n, _)| Arc::ptr_eq(n, node)) {
                Some(batch) => {
                    nodes[batch].1 += 1;
                    batch_of.push(Some(batch));
                }
                None => {
                    nodes.push((node.clone(), 1));
                    batch_of.push(Some(nodes.len() - 1));
                }
            }
        }
        drop(snapshot);
        let (order, ranges) = sending_order(&batch_of, nodes.iter().map(|(_, count)| *count));
        split.encode(args, &order);
        let batched = ranges.last().map_or(0, |r| r.end);
        let batches = queue_batches(&split, &order, ranges, nodes, lane);
        let alone: Vec<Alone<'_>> = order[batched..]
            .iter()
            .map(|&part| Alone {
                part,
                call: self.start_part(&split, part, lane),
            })
            .collect();
        Call::slow(async move {
            let mut replies: SmallVec<[Bytes; 16]> = smallvec![Bytes::new(); split.parts.len()];
            let mut retries = Vec::new();
            for batch in batches {
                let parts = &order[batch.parts.clone()];
                let outcome = match tokio::time::timeout_at(deadline, batch.reply).await {
                    Ok(outcome) => outcome,
                    Err(_elapsed) => {
                        let reply = self.node_timed_out(&batch.node);
                        for &part in parts {
                            replies[part] = reply.clone();
                        }
                        continue;
                    }
                };
                for (&part, outcome) in parts.iter().zip(split_outcome(outcome, parts.len())) {
                    match outcome {
                        Ok(reply) if classify(&reply) == Verdict::Done => replies[part] = reply,
                        outcome => retries.push((part, batch.node.clone(), outcome)),
                    }
                }
            }
            for Alone { part, call } in alone {
                replies[part] = call.settle().await;
            }
            let retried = retries.into_iter().map(|(part, node, outcome)| {
                let command = Command {
                    payload: split.part_payload(part),
                    slot: Some(split.parts[part].slot),
                    write: split.write,
                    lane,
                    deadline,
                    target: None,
                };
                async move {
                    (
                        part,
                        self.finish(command, Some((node, outcome)), Vec::new())
                            .await,
                    )
                }
            });
            for (part, reply) in join_all(retried).await {
                replies[part] = reply;
            }
            split.merge_replies(&replies, |part| self.part_node(part))
        })
    }

    /// Forwards part `index` on its own (its route's backend, mirrored if the route says so).
    fn start_part(&self, split: &Split, index: usize, lane: Lane) -> Call<'_> {
        let part = &split.parts[index];
        let payload = split.part_payload(index);
        let target = part.route.as_ref().map(|r| r.target.clone());
        let call = self.forward_to(
            target,
            None,
            payload.clone(),
            Some(part.slot),
            split.write,
            lane,
            Instant::now(),
        );
        if let Some(route) = &part.route {
            self.mirror(route, payload, Some(part.slot), split.write, lane);
        }
        call
    }

    /// The node a failed part names in its error: its slot's primary now.
    fn part_node(&self, part: &Part) -> String {
        let target = part.route.as_ref().map(|r| r.target.clone());
        let state = self.state(&target);
        let addr = state
            .topology()
            .as_ref()
            .and_then(|t| t.shard(part.slot))
            .map_or_else(|| "no owner".to_string(), |s| s.primary.addr().to_string());
        match &target {
            Some(target) => format!("backend {}, {addr}", target.backend),
            None => addr,
        }
    }
}

/// The order the parts are encoded and sent in: each batch's parts together (batch after
/// batch, the split's order within a batch), then the parts that go alone; and each batch's
/// range of that order.
fn sending_order(
    batch_of: &[Option<usize>],
    batch_sizes: impl Iterator<Item = usize>,
) -> (SmallVec<[usize; 16]>, SmallVec<[Range<usize>; 8]>) {
    // Counting sort of the parts by batch; the lone parts after the last batch.
    let mut ranges: SmallVec<[Range<usize>; 8]> = SmallVec::new();
    let mut next = 0;
    for count in batch_sizes {
        ranges.push(next..next);
        next += count;
    }
    let mut order: SmallVec<[usize; 16]> = smallvec![0; batch_of.len()];
    for (part, batch) in batch_of.iter().enumerate() {
        let at = match *batch {
            Some(batch) => &mut ranges[batch].end,
            None => &mut next,
        };
        order[*at] = part;
        *at += 1;
    }
    (order, ranges)
}

/// Queues one command per node: that node's parts, which [`Split::encode`] put back to back in
/// the split's buffer, as one slice of it.
fn queue_batches(
    split: &Split,
    order: &[usize],
    ranges: SmallVec<[Range<usize>; 8]>,
    nodes: SmallVec<[(Arc<Node>, usize); 8]>,
    lane: Lane,
) -> SmallVec<[Batch; 4]> {
    let parts = &split.parts;
    nodes
        .into_iter()
        .zip(ranges)
        .map(|((node, count), range)| {
            let run = &order[range.clone()];
            let (first, last) = (&parts[run[0]], &parts[run[count - 1]]);
            let payload = split.payload.slice(first.bytes.start..last.bytes.end);
            let frames = u32::try_from(count).unwrap_or(u32::MAX);
            let reply = node.send_frames(payload, false, lane, frames);
            Batch {
                node,
                reply,
                parts: range,
            }
        })
        .collect()
}

/// One batch's outcome as each of its `parts` parts' outcome: the reply slice cut at frame
/// boundaries, or the batch's error for every part.
fn split_outcome(outcome: Outcome, parts: usize) -> impl Iterator<Item = Outcome> {
    let mut at = 0;
    let limits = reply_limits();
    (0..parts).map(move |_| match &outcome {
        Ok(replies) => match reply_frame_len(&replies[at..], &limits) {
            Ok(Some(len)) => {
                at += len;
                Ok(replies.slice(at - len..at))
            }
            _ => Ok(redcar_error(
                "a node's reply to a batch of split parts was cut short",
            )),
        },
        Err(e) => Err(e.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_sent_grouped_by_batch_in_split_order_and_lone_parts_last() {
        // Parts 0 and 3 go to batch 1, part 2 to batch 0, part 1 alone.
        let batch_of = [Some(1), None, Some(0), Some(1)];
        let (order, ranges) = sending_order(&batch_of, [1, 2].into_iter());
        assert_eq!(&order[..], [2, 0, 3, 1]);
        assert_eq!(&ranges[..], [0..1, 1..3]);
    }

    #[test]
    fn with_no_usable_node_every_part_goes_alone_in_split_order() {
        let (order, ranges) = sending_order(&[None, None, None], std::iter::empty());
        assert_eq!(&order[..], [0, 1, 2]);
        assert!(ranges.is_empty());
    }
}
