//! The replies a loop client is owed, oldest first, each numbered, and how each one arrives:
//! in place from a node connection of the loop ([`Wait::Node`]), from a call of the general path
//! ([`Wait::Call`]), or already made ([`Wait::Done`]). Whatever arrives first waits for the
//! replies before it: the client's output gets them in the order the commands came.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::time::Instant;

use super::super::reply_batch::ReplyBatches;
use super::super::session::record::CommandRecord;
use crate::reactor::{LoopWaker, Remote};
use crate::router::{Call, FirstHop, Forwarder};
use crate::upstream::Inbox;

/// One owed reply: what the metrics need to know about its command, and where the reply is.
pub(super) struct OwedReply<'d> {
    pub(super) record: CommandRecord,
    pub(super) wait: Wait<'d>,
}

/// Where an owed reply is.
pub(super) enum Wait<'d> {
    /// Written to one of the loop's node connections: the reply comes back in place.
    Node {
        hop: FirstHop,
        slot: u16,
        write: bool,
        /// The request, for a retry or a redirect (a reference count, not a copy).
        raw: Bytes,
    },
    /// On the general path (split, fanned out, redirected, retried, stateful, ...).
    Call(Call<'d>),
    /// Here, waiting for the replies before it; `node` names who gave it (the slow log).
    Done {
        reply: Bytes,
        node: Option<Arc<str>>,
    },
}

/// A loop client's owed replies.
#[derive(Default)]
pub(super) struct Replies<'d> {
    owed: VecDeque<OwedReply<'d>>,
    /// The number of `owed[0]`. Numbers only grow (wrapping), so a reply that comes after its
    /// command gave up finds no entry.
    first: u32,
    /// Which replies may be written now: those to one read go out together.
    pub(super) batches: ReplyBatches,
    /// Owed commands that run alone (`Transaction::is_exclusive`).
    pub(super) alone: usize,
    /// Where the general path's forwarded commands reply (made on first use).
    pub(super) inbox: Option<Box<Inbox>>,
    /// Wakes the loop for this client's calls (made on first use).
    pub(super) waker: Option<LoopWaker>,
}

impl<'d> Replies<'d> {
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.owed.len()
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.owed.is_empty()
    }

    /// The number the next owed reply gets.
    #[inline]
    pub(super) fn next_seq(&self) -> u32 {
        self.first.wrapping_add(self.owed.len() as u32)
    }

    /// Owes one more reply, after the others.
    #[inline]
    pub(super) fn push(&mut self, record: CommandRecord, wait: Wait<'d>) {
        self.alone += usize::from(record.alone);
        self.owed.push_back(OwedReply { record, wait });
        self.batches.queued();
    }

    /// The entry numbered `seq` and its place in the queue, while it is owed.
    #[inline]
    pub(super) fn get_mut(&mut self, seq: u32) -> Option<(usize, &mut OwedReply<'d>)> {
        let index = seq.wrapping_sub(self.first) as usize;
        self.owed.get_mut(index).map(|owed| (index, owed))
    }

    /// Takes the front entry (its reply is being written).
    #[inline]
    pub(super) fn pop_front(&mut self) -> Option<OwedReply<'d>> {
        let owed = self.owed.pop_front()?;
        self.first = self.first.wrapping_add(1);
        self.alone -= usize::from(owed.record.alone);
        Some(owed)
    }

    /// Takes the front entry if its reply is here.
    #[inline]
    pub(super) fn pop_done(&mut self) -> Option<OwedReply<'d>> {
        match self.owed.front() {
            Some(OwedReply {
                wait: Wait::Done { .. },
                ..
            }) => self.pop_front(),
            _ => None,
        }
    }

    /// Polls every call, with a waker that names `client` to its loop; those that finished are
    /// done. The general path's forwarded commands reply to the client's inbox. Whether any
    /// finished.
    pub(super) fn poll_calls(&mut self, remote: &Arc<Remote>, client: u64) -> bool {
        let waker = (self.waker).get_or_insert_with(|| LoopWaker::new(remote, client));
        waker.rearm();
        let mut cx = Context::from_waker(waker.waker());
        let mut inbox = self.inbox.as_deref_mut();
        let mut finished = false;
        for owed in self.owed.iter_mut() {
            let Wait::Call(call) = &mut owed.wait else {
                continue;
            };
            if let Poll::Ready(reply) = call.poll_in(&mut cx, inbox.as_deref_mut()) {
                let node = call.node().map(Arc::from);
                owed.wait = Wait::Done { reply, node };
                finished = true;
            }
        }
        finished
    }

    /// Gives up on commands sent in place whose deadline passed: each gets the timeout error,
    /// and a reply that comes later is dropped (calls time themselves). Returns the earliest
    /// deadline left, if any.
    ///
    /// Calls still waiting on their first node (the general path: sent before the node's
    /// connection was on this loop, or to another loop's) time out here too; nothing else
    /// wakes them at their deadline.
    pub(super) fn expire(&mut self, now: Instant, forwarder: &Forwarder) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut inbox = self.inbox.as_deref_mut();
        for owed in self.owed.iter_mut() {
            if let Wait::Call(call) = &mut owed.wait {
                let Some(deadline) = call.deadline() else {
                    continue;
                };
                match call.expire(inbox.as_deref_mut()) {
                    Some(reply) => {
                        let node = call.node().map(Arc::from);
                        owed.wait = Wait::Done { reply, node };
                    }
                    None => next = Some(next.map_or(deadline, |n| n.min(deadline))),
                }
                continue;
            }
            let Wait::Node { hop, .. } = &owed.wait else {
                continue;
            };
            if hop.deadline > now {
                next = Some(next.map_or(hop.deadline, |n| n.min(hop.deadline)));
                continue;
            }
            let reply = forwarder.first_timed_out(hop);
            let node = Some(hop.node.addr().clone());
            owed.wait = Wait::Done { reply, node };
        }
        next
    }
}
