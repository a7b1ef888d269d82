//! The first attempt of a one-slot command whose caller writes it to the node itself (a worker's
//! event loop, `downstream::event_loop`): the forwarder picks the node and judges the reply; the
//! caller moves the bytes. Anything beyond a plain first attempt (fault injection, hedged reads,
//! a slot without an owner, redirects and retries) goes back to the general path.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use super::call::Call;
use super::command::{Candidate, ForwardedCommand};
use super::redirect::{classify, Verdict};
use super::Forwarder;
use crate::upstream::{Lane, Node, UpstreamError};

/// Where the first attempt of a one-slot command goes, and by when it must be answered.
pub(crate) struct FirstHop {
    pub(crate) node: Arc<Node>,
    /// `node` is its shard's primary in the map it was picked from (its nil is final).
    pub(crate) primary: bool,
    pub(crate) deadline: Instant,
}

impl Forwarder {
    /// The node for the first attempt of a command for `slot` on the catch-all backend, when
    /// the general path has nothing to add to it; `None` otherwise (then use
    /// [`forward`](Self::forward)). `now`: when the command arrived (its deadline counts from it).
    #[inline]
    pub(crate) fn first_hop(&self, slot: u16, write: bool, now: Instant) -> Option<FirstHop> {
        // Fault injection or hedged reads need the whole `live` snapshot: the general path.
        let quick = self.quick.get()?;
        let (candidate, primary) = self.candidate_by(
            quick.read_policy,
            &self.core.cluster,
            Some(slot),
            write,
            &[],
        );
        match candidate {
            Candidate::Node(node) => Some(FirstHop {
                node,
                primary,
                deadline: now + quick.op_timeout,
            }),
            Candidate::Unusable(_) | Candidate::NoOwner => None,
        }
    }

    /// Whether `reply`, from the first attempt's node, is the client's answer as it is: not a
    /// redirect or an error worth a retry, and not a replica's "no such key" the primary should
    /// confirm (`payload`: the request, which says what "no such key" looks like).
    #[inline]
    pub(crate) fn is_final(
        &self,
        hop: &FirstHop,
        slot: u16,
        write: bool,
        payload: &Bytes,
        reply: &[u8],
    ) -> bool {
        if classify(reply) != Verdict::Done {
            return false;
        }
        if hop.primary || write {
            return true;
        }
        let command = self.command(payload.clone(), slot, write, Lane::default(), hop.deadline);
        self.replica_miss(&command, &hop.node, reply).is_none()
    }

    /// The rest of a first attempt that did not end it (`outcome`: the node's reply that asks
    /// for more, or why there was none): redirects, retries and the replica check, within the
    /// same deadline, as a call of the general path.
    pub(crate) fn follow_up(
        &self,
        hop: FirstHop,
        payload: Bytes,
        slot: u16,
        write: bool,
        lane: Lane,
        outcome: Result<Bytes, UpstreamError>,
    ) -> Call<'_> {
        let command = self.command(payload, slot, write, lane, hop.deadline);
        Call::slow(self.finish(command, Some((hop.node, outcome)), Vec::new()))
    }

    /// The client's answer when the first attempt's node did not answer by the deadline (the
    /// node's health counts the failure).
    pub(crate) fn first_timed_out(&self, hop: &FirstHop) -> Bytes {
        self.node_timed_out(&hop.node)
    }

    fn command(
        &self,
        payload: Bytes,
        slot: u16,
        write: bool,
        lane: Lane,
        deadline: Instant,
    ) -> ForwardedCommand {
        ForwardedCommand {
            payload,
            slot: Some(slot),
            write,
            lane,
            deadline,
            target: None,
        }
    }
}
