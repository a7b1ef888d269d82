//! Sending a split's parts: the parts bound for one node go out as one pipelined batch (one
//! queue entry, one reply hand-off), and only a part whose reply asks for more (MOVED, ASK, a
//! retry) continues on its own.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::join_all;
use smallvec::{smallvec, SmallVec};
use tokio::time::Instant;

use super::gather::{gather, Batch};
use super::Splitter;
use super::{part_reply_len, Part, Split};
use crate::protocol::Request;
use crate::router::forward::{classify, Call, ForwardedCommand, Outcome, Verdict};
use crate::router::forward::{pick, policy_for};
use crate::router::reply::redcar_error;
use crate::router::{Forwarder, ReadPolicy};
use crate::upstream::Lane;
use crate::upstream::Node;

/// A part that leaves the batches: a route's part, or one whose node is unusable right now.
struct Alone<'r> {
    /// The part's index in the split.
    part: usize,
    /// The part sent on its own, through the single-command path.
    call: Call<'r>,
}

/// Each part's batch (`None`: it goes alone), and each batch's node and part count.
type BatchNodes = (
    SmallVec<[Option<usize>; 16]>,
    SmallVec<[(Arc<Node>, usize); 8]>,
);

/// A part to send again on its own: its index, the node that answered, and how.
type Retry = (usize, Arc<Node>, Outcome);

/// Each part's reply as a frame of one of `held`: the batches' replies are cut into their
/// parts' frames without copying them or counting references per part.
struct PartReplies {
    /// The batches' replies, kept whole; the parts' frames are ranges of them.
    held: SmallVec<[Bytes; 4]>,
    /// Per part: the index of its reply in `held`, and its frame there.
    frames: SmallVec<[(usize, Range<usize>); 16]>,
}

impl PartReplies {
    fn new(parts: usize) -> PartReplies {
        PartReplies {
            held: SmallVec::new(),
            frames: smallvec![(0, 0..0); parts],
        }
    }

    /// `reply` as the whole reply of each of `parts`.
    #[inline]
    fn put(&mut self, parts: &[usize], reply: Bytes) {
        for &part in parts {
            self.frames[part] = (self.held.len(), 0..reply.len());
        }
        self.held.push(reply);
    }

    /// Cuts `reply`, `node`'s answer to a batch of `parts`, into the parts' frames; a part whose
    /// frame asks for more (a redirect, an error worth a retry, or a replica's "no such key" the
    /// primary should confirm: `confirm`) goes to `retries`, and parts whose frames are missing
    /// get an error.
    #[inline]
    fn cut(
        &mut self,
        parts: &[usize],
        reply: Bytes,
        node: &Arc<Node>,
        retries: &mut Vec<Retry>,
        confirm: impl Fn(usize, &[u8]) -> bool,
    ) {
        let (index, mut at) = (self.held.len(), 0);
        // The parts from the first one whose reply is missing (none normally).
        let mut cut_short = &parts[parts.len()..];
        for (n, &part) in parts.iter().enumerate() {
            let Some(len) = part_reply_len(&reply[at..]) else {
                cut_short = &parts[n..];
                break;
            };
            let frame = at..at + len;
            at += len;
            let part_reply = &reply[frame.clone()];
            if classify(part_reply) == Verdict::Done && !confirm(part, part_reply) {
                self.frames[part] = (index, frame);
            } else {
                retries.push((part, node.clone(), Ok(reply.slice(frame))));
            }
        }
        self.held.push(reply);
        if !cut_short.is_empty() {
            let error = redcar_error("a node's reply to a batch of split parts was cut short");
            self.put(cut_short, error);
        }
    }

    /// Each part's reply, in the split's order.
    fn frames(&self) -> SmallVec<[&[u8]; 16]> {
        self.frames
            .iter()
            .map(|(reply, frame)| &self.held[*reply][frame.clone()])
            .collect()
    }
}

impl<'r> Splitter<'r> {
    /// Queues every part now (so they keep their place among the client's commands), batched
    /// per node, then merges the replies. `request` is the command the split was planned from.
    pub(in crate::router) fn start(
        self,
        mut split: Box<Split>,
        request: &Request,
        lane: Lane,
    ) -> Call<'r> {
        let live = self.fwd.core.live.load();
        let deadline = Instant::now() + live.config.op_timeout;
        // Fault injection and hedged reads act per command: every part goes alone then.
        let batching =
            live.faults.is_none() && (split.write || !Forwarder::hedges_reads(&live.config));
        let policy = live.config.read_policy;
        drop(live);
        let (batch_of, nodes) = self.batch_nodes(&split, policy, batching);
        let (order, ranges) = sending_order(&batch_of, nodes.iter().map(|(_, count)| *count));
        split.encode(request.args(), request.raw(), &order);
        let batched = ranges.last().map_or(0, |r| r.end);
        let mut batches = queue_batches(&split, &order, ranges, nodes, lane);
        let alone: Vec<Alone<'_>> = order[batched..]
            .iter()
            .map(|&part| Alone {
                part,
                call: self.start_part(&split, part, lane),
            })
            .collect();
        Call::slow(async move {
            let mut replies = PartReplies::new(split.parts.len());
            let mut retries = Vec::new();
            let outcomes = gather(&mut batches, deadline).await;
            for (batch, outcome) in batches.iter().zip(outcomes) {
                let parts = &order[batch.parts.clone()];
                match outcome {
                    Some(Ok(reply)) => {
                        // Only a read policy that reads replicas can meet a replica here.
                        let confirm = |part: usize, frame: &[u8]| {
                            if split.write || !policy.uses_replicas() {
                                return false;
                            }
                            let slot = Some(split.parts[part].slot);
                            let payload = split.part_payload(part);
                            let fwd = self.fwd;
                            fwd.absent_on_replica(
                                &None,
                                slot,
                                split.write,
                                &batch.node,
                                &payload,
                                frame,
                            )
                            .is_some()
                        };
                        replies.cut(parts, reply, &batch.node, &mut retries, confirm);
                    }
                    Some(Err(e)) => {
                        let node = &batch.node;
                        retries.extend(parts.iter().map(|&p| (p, node.clone(), Err(e.clone()))));
                    }
                    None => replies.put(parts, self.fwd.node_timed_out(&batch.node)),
                }
            }
            for Alone { part, call } in alone {
                replies.put(&[part], call.settle().await);
            }
            if !retries.is_empty() {
                self.retry_parts(&split, retries, lane, deadline, &mut replies)
                    .await;
            }
            let frames = replies.frames();
            split.merge_replies(&frames, |part| self.part_node(part))
        })
    }

    /// Each part's batch, if it joins one (by its index in the list of nodes), and each batch's
    /// node and part count, from one look at the slot map. A part with no usable node (or none
    /// known), or any part when not `batching`, goes alone, which waits for a map or answers why
    /// no node can serve it.
    #[inline]
    fn batch_nodes(self, split: &Split, policy: ReadPolicy, batching: bool) -> BatchNodes {
        let snapshot = self.fwd.core.cluster.topology_now();
        let topology = snapshot.as_deref().filter(|_| batching);
        let mut batch_of: SmallVec<[Option<usize>; 16]> = SmallVec::new();
        let mut nodes: SmallVec<[(Arc<Node>, usize); 8]> = SmallVec::new();
        for part in &split.parts {
            let node = topology
                .filter(|_| part.route.is_none())
                .and_then(|t| t.shard(part.slot))
                .and_then(|shard| {
                    let migrating = self.fwd.core.cluster.migrating();
                    let policy = policy_for(policy, split.write, part.slot, migrating);
                    pick(shard, policy, split.write, &[])
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
        (batch_of, nodes)
    }

    /// Sends again, each on its own and all at once, the parts whose batch failed or whose
    /// reply asked for more (MOVED, ASK, TRYAGAIN …), and puts their final replies in `replies`.
    async fn retry_parts(
        self,
        split: &Split,
        retries: Vec<Retry>,
        lane: Lane,
        deadline: Instant,
        replies: &mut PartReplies,
    ) {
        let retried = retries.into_iter().map(|(part, node, outcome)| {
            let command = ForwardedCommand {
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
                    self.fwd
                        .finish(command, Some((node, outcome)), Vec::new())
                        .await,
                )
            }
        });
        for (part, reply) in join_all(retried).await {
            replies.put(&[part], reply);
        }
    }

    /// Forwards part `index` on its own (its route's backend, mirrored if the route says so).
    fn start_part(self, split: &Split, index: usize, lane: Lane) -> Call<'r> {
        let part = &split.parts[index];
        let payload = split.part_payload(index);
        let target = part.route.as_ref().map(|r| r.target.clone());
        let call = self.fwd.forward_to(
            target,
            None,
            payload.clone(),
            Some(part.slot),
            split.write,
            lane,
            Instant::now(),
        );
        if let Some(route) = &part.route {
            self.fwd
                .mirror(route, payload, Some(part.slot), split.write, lane);
        }
        call
    }

    /// The node a failed part names in its error: its slot's primary now.
    fn part_node(self, part: &Part) -> String {
        let target = part.route.as_ref().map(|r| r.target.clone());
        let state = self.fwd.core.state(&target);
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
