//! A command on its way to a node ([`Pending`]), where its reply goes ([`ReplyTo`]), and how
//! much of a node's input its reply frames take ([`frames_len`]).

use bytes::Bytes;

use super::inbox::Delivery;
use super::reply_slot::ReplySender;
use super::UpstreamError;
use crate::protocol::{reply_frame_len, Limits};

/// The RESP encoding of `ASKING`, written before a command redirected by `-ASK`.
pub(crate) const ASKING: &[u8] = b"*1\r\n$6\r\nASKING\r\n";

/// A command waiting to be written, and where its reply goes.
pub(super) struct Pending {
    /// The command's bytes as RESP, written as they are.
    pub(crate) payload: Bytes,
    /// Write `ASKING` first: the command follows an `-ASK` redirect to the slot's importing node.
    pub(crate) asking: bool,
    /// Reply frames the payload produces (1 for one command; `MULTI … EXEC` sends several). They
    /// are handed over together, as one contiguous slice.
    pub(crate) frames: u32,
    /// Where the reply, or the failure, goes.
    pub(crate) reply: ReplyTo,
}

/// Where a command's reply goes: its own channel, a client session's inbox (see `inbox`), or a
/// client of the event loop that drives the connection (see `wire::LoopSink`).
pub(super) enum ReplyTo {
    /// A pooled one-shot channel, for callers that await the reply as a future.
    Slot(ReplySender),
    /// A client session's inbox, numbered within it.
    Inbox(Delivery),
    /// A client of the loop that drives the connection, handed the reply in place.
    Loop(LoopWaiter),
}

/// A command queued by a client of a worker's event loop on a connection that loop drives: the
/// client (its token there) and the command's number among the client's replies. Only that
/// loop reads the connection, so the reply is handed over in place, with no channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LoopWaiter {
    /// The client's token in the loop.
    pub(crate) client: u64,
    /// The command's number among the client's owed replies.
    pub(crate) seq: u32,
}

impl ReplyTo {
    /// Hands over one outcome on its own (failures; replies go through `Session::deliver`).
    pub(super) fn send(self, outcome: Result<Bytes, UpstreamError>) {
        match self {
            ReplyTo::Slot(slot) => slot.send(outcome),
            ReplyTo::Inbox(delivery) => delivery.send(outcome),
            // Only a loop-driven connection carries these, and it fails them through its sink.
            ReplyTo::Loop(_) => {}
        }
    }
}

/// Length of the first `count` complete reply frames in `input`, or `None` until all are there.
#[inline]
pub(super) fn frames_len(
    input: &[u8],
    count: u32,
    limits: &Limits,
) -> Result<Option<usize>, String> {
    let mut end = 0;
    for _ in 0..count {
        match reply_frame_len(&input[end..], limits) {
            Ok(Some(len)) => end += len,
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("protocol error in reply: {e}")),
        }
    }
    Ok(Some(end))
}
