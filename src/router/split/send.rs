//! Sending a split's parts: the parts bound for one node go out as one pipelined batch (one
//! queue entry, one reply hand-off), and only a part whose reply asks for more (MOVED, ASK, a
//! retry) continues on its own.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::ops::Range;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use bytes::Bytes;
use futures_util::future::join_all;
use futures_util::task::AtomicWaker;
use smallvec::{smallvec, SmallVec};
use tokio::time::{sleep_until, Instant, Sleep};

use super::{part_reply_len, Part, Split};
use crate::protocol::Request;
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
    /// per node, then merges the replies. `request` is the command the split was planned from.
    pub(in crate::router) fn start_split(
        &self,
        mut split: Box<Split>,
        request: &Request,
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
            // Each part's reply as a frame of one of `held`: the batches' replies are cut
            // into their parts' frames without copying them or counting references per part.
            let mut held: SmallVec<[Bytes; 4]> = SmallVec::new();
            let mut frames: SmallVec<[(usize, Range<usize>); 16]> =
                smallvec![(0, 0..0); split.parts.len()];
            let mut retries = Vec::new();
            let outcomes = gather(&mut batches, deadline).await;
            for (batch, outcome) in batches.iter().zip(outcomes) {
                let parts = &order[batch.parts.clone()];
                let reply = match outcome {
                    Some(Ok(reply)) => reply,
                    Some(Err(e)) => {
                        let node = &batch.node;
                        retries.extend(parts.iter().map(|&p| (p, node.clone(), Err(e.clone()))));
                        continue;
                    }
                    None => {
                        let reply = self.node_timed_out(&batch.node);
                        for &part in parts {
                            frames[part] = (held.len(), 0..reply.len());
                        }
                        held.push(reply);
                        continue;
                    }
                };
                let (index, mut at) = (held.len(), 0);
                // The parts from the first one whose reply is missing (none normally).
                let mut cut_short = &parts[parts.len()..];
                for (n, &part) in parts.iter().enumerate() {
                    let Some(len) = part_reply_len(&reply[at..]) else {
                        cut_short = &parts[n..];
                        break;
                    };
                    let frame = at..at + len;
                    at += len;
                    if classify(&reply[frame.clone()]) == Verdict::Done {
                        frames[part] = (index, frame);
                    } else {
                        retries.push((part, batch.node.clone(), Ok(reply.slice(frame))));
                    }
                }
                held.push(reply);
                if !cut_short.is_empty() {
                    let error =
                        redcar_error("a node's reply to a batch of split parts was cut short");
                    for &part in cut_short {
                        frames[part] = (held.len(), 0..error.len());
                    }
                    held.push(error);
                }
            }
            for Alone { part, call } in alone {
                let reply = call.settle().await;
                frames[part] = (held.len(), 0..reply.len());
                held.push(reply);
            }
            if !retries.is_empty() {
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
                    frames[part] = (held.len(), 0..reply.len());
                    held.push(reply);
                }
            }
            let replies: SmallVec<[&[u8]; 16]> = frames
                .iter()
                .map(|(reply, frame)| &held[*reply][frame.clone()])
                .collect();
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

/// Wakes the task waiting for a split's batches once, when the last of them is in, rather than
/// once per batch: each wake is a whole turn of the client's session.
struct Gather {
    /// Batches not in yet, plus one while the waiting task is still registering them.
    pending: AtomicUsize,
    task: AtomicWaker,
}

thread_local! {
    /// Gathers whose split finished, for this thread's next splits: none is allocated per split
    /// in the steady state.
    static GATHERS: RefCell<Vec<Arc<Gather>>> = const { RefCell::new(Vec::new()) };
}

/// Gathers a thread keeps for reuse.
const POOLED_GATHERS: usize = 64;

impl Gather {
    /// A reset gather from this thread's pool, or a new one.
    fn take() -> Arc<Gather> {
        let pooled = GATHERS
            .try_with(|pool| pool.borrow_mut().pop())
            .ok()
            .flatten();
        pooled.unwrap_or_else(|| {
            Arc::new(Gather {
                pending: AtomicUsize::new(1),
                task: AtomicWaker::new(),
            })
        })
    }

    /// Resets `gather` and parks it for reuse, unless something still holds it: a reply still
    /// out at the deadline keeps its waker, and a reply may still be inside `wake` on another
    /// thread.
    fn give_back(mut gather: Arc<Gather>) {
        let Some(fresh) = Arc::get_mut(&mut gather) else {
            return;
        };
        *fresh.pending.get_mut() = 1;
        drop(fresh.task.take());
        let _ = GATHERS.try_with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < POOLED_GATHERS {
                pool.push(gather);
            }
        });
    }
}

impl Wake for Gather {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.task.wake();
        }
    }
}

/// Each batch's outcome once all are in, or at `deadline` (`None`: a batch still out then).
/// Every batch's reply is polled once with a [`Gather`] waker, so the task is woken once, by the
/// last reply (or by the deadline); the deadline's timer is armed only if a reply is still out
/// after that first look.
async fn gather(batches: &mut [Batch], deadline: Instant) -> SmallVec<[Option<Outcome>; 4]> {
    let mut outcomes: SmallVec<[Option<Outcome>; 4]> = batches.iter().map(|_| None).collect();
    if batches.is_empty() {
        return outcomes;
    }
    let gather = Gather::take();
    let waker = Waker::from(gather.clone());
    let mut registered = false;
    let mut timer = pin!(None::<Sleep>);
    poll_fn(|cx| {
        gather.task.register(cx.waker());
        let mut batch_cx = Context::from_waker(&waker);
        if !registered {
            registered = true;
            for (batch, outcome) in batches.iter_mut().zip(outcomes.iter_mut()) {
                // Counted before the poll: the reply may come (and wake) on another thread
                // right after it.
                gather.pending.fetch_add(1, Ordering::AcqRel);
                if let Poll::Ready(ready) = Pin::new(&mut batch.reply).poll(&mut batch_cx) {
                    *outcome = Some(ready);
                    gather.pending.fetch_sub(1, Ordering::AcqRel);
                }
            }
            // Drops the registering count; zero: every reply was in already.
            if gather.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                return Poll::Ready(());
            }
        } else if gather.pending.load(Ordering::Acquire) == 0 {
            collect(batches, &mut outcomes, &mut batch_cx);
            return Poll::Ready(());
        }
        if timer.is_none() {
            timer.set(Some(sleep_until(deadline)));
        }
        match timer.as_mut().as_pin_mut().map(|timer| timer.poll(cx)) {
            Some(Poll::Ready(())) => {
                // Past the deadline: whatever is in counts; the rest timed out.
                collect(batches, &mut outcomes, &mut batch_cx);
                Poll::Ready(())
            }
            _ => Poll::Pending,
        }
    })
    .await;
    drop(waker);
    Gather::give_back(gather);
    outcomes
}

/// Takes the replies that are in. A reply is polled again only once it has woken the
/// [`Gather`] (or at the deadline, when a later wake no longer matters): each batch wakes it
/// exactly once.
fn collect(batches: &mut [Batch], outcomes: &mut [Option<Outcome>], cx: &mut Context<'_>) {
    for (batch, outcome) in batches.iter_mut().zip(outcomes) {
        if outcome.is_none() {
            if let Poll::Ready(ready) = Pin::new(&mut batch.reply).poll(cx) {
                *outcome = Some(ready);
            }
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
