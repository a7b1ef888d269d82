//! What the metrics and the slow log need to know about one command while it runs.

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use crate::metrics::CommandTally;
use crate::protocol::{parse_request, resp3_null, Limits, Protocol, Request};

/// What the metrics and the slow log need to know about one command.
pub(super) struct Stamp {
    command: &'static str,
    pub(super) started: Instant,
    /// The request, kept (a reference count, not a copy) so a slow command's key can be logged.
    raw: Option<Bytes>,
    /// It runs alone (see `Transaction::is_exclusive`).
    pub(super) alone: bool,
    /// The client spoke RESP3 when it sent the command.
    resp3: bool,
}

impl Stamp {
    /// `keep_raw` only when the slow log is on: otherwise the request is not needed afterwards.
    pub(super) fn new(
        command: &'static str,
        request: &Request,
        now: Instant,
        keep_raw: bool,
        alone: bool,
        protocol: Protocol,
    ) -> Stamp {
        Stamp {
            command,
            started: now,
            raw: keep_raw.then(|| request.raw().clone()),
            alone,
            resp3: protocol.is_resp3(),
        }
    }

    /// For replies that are not to a command (protocol errors).
    pub(super) fn none(now: Instant) -> Stamp {
        Stamp {
            command: "protocol_error",
            started: now,
            raw: None,
            alone: false,
            resp3: false,
        }
    }

    /// For invalidation pushes placed between replies (client-side caching): counted nowhere.
    pub(super) fn push(now: Instant) -> Stamp {
        Stamp {
            command: "",
            ..Stamp::none(now)
        }
    }

    /// Records the finished command (slow ones also go to the slow log) and returns its reply
    /// as the client gets it: a whole-reply RESP2 null that redcar made itself (a failed
    /// WATCH, a RANDOMKEY on an empty cluster) becomes RESP3's `_` for a RESP3 client. Replies
    /// from the nodes' RESP3 connections are already RESP3.
    pub(super) fn finish<'a>(
        self,
        tally: &mut CommandTally,
        reply: &'a [u8],
        now: Instant,
        node: Option<&str>,
        peer: &str,
    ) -> &'a [u8] {
        if self.command.is_empty() {
            return reply;
        }
        let elapsed = now.saturating_duration_since(self.started);
        let error = reply.first() == Some(&b'-');
        if tally.record(self.command, elapsed, error) {
            let key = self.raw.map(|raw| first_argument(&raw)).unwrap_or_default();
            tally
                .metrics()
                .slowlog
                .push(elapsed, self.command, &key, node.unwrap_or(""), peer);
        }
        match self.resp3 {
            true => resp3_null(reply).unwrap_or(reply),
            false => reply,
        }
    }
}

/// The argument after the command name (the key, for most commands), parsed again from the raw
/// request: only slow commands pay for it.
fn first_argument(raw: &Bytes) -> Bytes {
    let mut buf = BytesMut::from(&raw[..]);
    match parse_request(&mut buf, &Limits::default()) {
        Ok(Some(request)) => request.args().get(1).cloned().unwrap_or_default(),
        _ => Bytes::new(),
    }
}
