//! What arrives for a loop client: a reply from one of the loop's node connections (handed over
//! in place by the connection's [`LoopSink`]), a failure of that connection, a call of the
//! general path that finished. Each goes to the client's owed replies; those at the front go to
//! its output buffer, in order, and the buffer to the client's socket at the end of the turn.

use std::io::{self, Write};
use std::sync::Arc;

use bytes::Buf;
use slab::Slab;

use super::client::LoopClient;
use super::replies::Wait;
use super::tokens;
use super::work::Work;
use crate::upstream::{LoopSink, LoopWaiter, ReplyFrame, UpstreamError};

/// The loop's clients, as the sink of its node connections' replies.
pub(super) struct ToClients<'a, 'd> {
    /// The loop's clients; a reply for a token whose client left finds nothing and is dropped.
    pub(super) clients: &'a mut Slab<LoopClient<'d>>,
    /// The loop's shared working state, which the clients' handling needs.
    pub(super) work: &'a mut Work<'d>,
}

impl<'d> ToClients<'_, 'd> {
    /// The client `token` names, if it is still there (a client gone leaves late replies).
    #[inline]
    fn split(&mut self, token: u64) -> Option<(&mut LoopClient<'d>, &mut Work<'d>)> {
        let client = self.clients.get_mut(tokens::key(token))?;
        (client.token == token).then_some((client, &mut *self.work))
    }
}

impl LoopSink for ToClients<'_, '_> {
    /// Called by a node connection for each reply to a loop client's command, in the order the node
    /// answered.
    #[inline]
    fn reply(&mut self, to: LoopWaiter, frame: ReplyFrame<'_>) {
        if let Some((client, work)) = self.split(to.client) {
            client.on_node_reply(to.seq, frame, work);
        }
    }

    /// Called once per command still owed when a node connection fails; the error says whether the
    /// command may have run.
    fn failed(&mut self, to: LoopWaiter, error: UpstreamError) {
        if let Some((client, work)) = self.split(to.client) {
            client.on_node_failed(to.seq, error, work);
        }
    }
}

impl<'d> LoopClient<'d> {
    /// The reply to command `seq`, sent in place: to the output at once when it is the oldest
    /// owed and final; kept when replies before it are still owed; handed to the general path
    /// when it asks for more (MOVED, ASK, a retry, a replica's nil to confirm). A reply for a
    /// command that gave up (or a client gone) is dropped.
    #[inline]
    pub(super) fn on_node_reply(&mut self, seq: u32, frame: ReplyFrame<'_>, work: &mut Work<'d>) {
        let router = work.router.forwarder();
        let Some((index, owed)) = self.replies.get_mut(seq) else {
            return;
        };
        let Wait::Node {
            hop,
            slot,
            write,
            raw,
        } = &owed.wait
        else {
            return; // timed out: its error went out instead
        };
        if !router.is_final(hop, *slot, *write, raw, frame.bytes()) {
            let reply = frame.keep();
            return self.follow_up(seq, Ok(reply), work);
        }
        if index > 0 {
            let node = Some(hop.node.addr().clone());
            owed.wait = Wait::Done {
                reply: frame.keep(),
                node,
            };
            return;
        }
        let Some(owed) = self.replies.pop_front() else {
            return;
        };
        let node = match &owed.wait {
            Wait::Node { hop, .. } => Some(hop.node.addr().clone()),
            _ => None,
        };
        self.write_reply(owed.record, frame.bytes(), node.as_deref(), work);
        drop(frame);
        if !self.take_done(work) {
            // This reply alone arrived: the turn it may start is still the client's.
            self.after_replies(work);
        }
    }

    /// Command `seq`, sent in place, got no reply: its connection failed. The general path
    /// decides what may be retried (a command never sent may; a write that may have run may
    /// not).
    pub(super) fn on_node_failed(&mut self, seq: u32, error: UpstreamError, work: &mut Work<'d>) {
        self.follow_up(seq, Err(error), work);
    }

    /// Hands command `seq` over to the general path with what its first attempt produced.
    fn follow_up(
        &mut self,
        seq: u32,
        outcome: Result<bytes::Bytes, UpstreamError>,
        work: &mut Work<'d>,
    ) {
        let lane = self.state.lane();
        let Some((_, owed)) = self.replies.get_mut(seq) else {
            return;
        };
        let wait = std::mem::replace(
            &mut owed.wait,
            Wait::Done {
                reply: bytes::Bytes::new(),
                node: None,
            },
        );
        let Wait::Node {
            hop,
            slot,
            write,
            raw,
        } = wait
        else {
            owed.wait = wait;
            return;
        };
        let call = work
            .router
            .forwarder()
            .follow_up(hop, raw, slot, write, lane, outcome);
        owed.wait = Wait::Call(call);
        self.want_run(work);
    }

    /// Moves the replies at the front that are here to the output buffer, in order; whether
    /// there were any.
    pub(super) fn take_done(&mut self, work: &mut Work<'d>) -> bool {
        let mut taken = false;
        while let Some(owed) = self.replies.pop_done() {
            taken = true;
            if let Wait::Done { reply, node } = owed.wait {
                self.write_reply(owed.record, &reply, node.as_deref(), work);
            }
        }
        if taken {
            self.after_replies(work);
        }
        taken
    }

    /// A batch of replies arrived: a stalled client, or one holding more than the budget's
    /// floor, takes another turn (also when its socket takes nothing now: a client that does
    /// not read its replies must still reach the budget's check, not wait unpaused) (reads again, and counts its bytes against
    /// `client.max_buffered_bytes_total`, as a session does after each batch); once nothing is
    /// owed any more a parked command runs.
    fn after_replies(&mut self, work: &mut Work<'d>) {
        let holds_much = self.link.out.len() > super::super::budget::FLOOR;
        if self.flags.stalled || holds_much || (self.parked.is_some() && self.replies.is_empty()) {
            self.want_run(work);
        }
    }

    /// The client's calls may have finished (its waker fired, or a call was just started):
    /// polls them and takes what is done.
    pub(super) fn poll_calls(&mut self, work: &mut Work<'d>, remote: &Arc<crate::reactor::Remote>) {
        if self.replies.is_empty() {
            // Nothing owed, so no call to poll: the usual turn of a one-at-a-time client.
            return;
        }
        self.replies.poll_calls(remote, self.token);
        self.take_done(work);
    }

    /// Writes what may be written now. `Err` when the client is gone.
    pub(super) fn write_out(&mut self, work: &mut Work<'d>) -> Result<(), ()> {
        let max_held = super::work::HOLD_MAX.min(self.settings.config.caps.reply_bytes);
        let out_len = self.link.out.len();
        if out_len == 0
            || self.flags.blocked
            || !self
                .replies
                .batches
                .may_write(self.replies.len(), out_len, max_held)
        {
            return Ok(());
        }
        // Whoever reads these replies finds their commands counted.
        work.recorder.tally.flush();
        while !self.link.out.is_empty() {
            match self.link.socket.write(&self.link.out[..]) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    work.d.client_metrics.bytes_sent.inc_by(n as u64);
                    self.state.note_written(n);
                    self.link.out.advance(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.flags.blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        self.replies
            .batches
            .wrote(self.replies.len(), self.link.out.len());
        Ok(())
    }
}
