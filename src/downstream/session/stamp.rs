//! What the metrics and the slow log need to know about one command while it runs.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use crate::hotkeys::{HotKeys, Observed};
use crate::metrics::clock::Since;
use crate::metrics::CommandTally;
use crate::near_cache::Writing;
use crate::protocol::{parse_request, resp3_null, Limits, Protocol, Request};
use crate::router::Plan;

/// What the metrics and the slow log need to know about one command.
pub(in crate::downstream) struct Stamp {
    command: &'static str,
    pub(in crate::downstream) started: Instant,
    /// The request, kept (a reference count, not a copy) so a slow command's key can be logged.
    raw: Option<Bytes>,
    /// It runs alone (see `Transaction::is_exclusive`).
    pub(in crate::downstream) alone: bool,
    /// The client spoke RESP3 when it sent the command.
    resp3: bool,
    /// Where its key is in the request (0: no single key), and its weight when sampled for the
    /// hot keys (0: not sampled); see [`Stamp::with_hot`].
    key_arg: u8,
    weight: u32,
    /// The near cache's hold on the keys it writes, released with the reply (see
    /// `near_cache::Writing`).
    writing: Option<Box<Writing>>,
}

/// Where a session's finished commands are recorded for `/hotkeys`.
#[derive(Clone, Copy)]
pub(in crate::downstream) struct Hot<'d> {
    pub(in crate::downstream) keys: &'d HotKeys,
    pub(in crate::downstream) client: u64,
}

impl Stamp {
    /// `keep_raw` only when the slow log is on: otherwise the request is not needed afterwards.
    pub(in crate::downstream) fn new(
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
            key_arg: 0,
            weight: 0,
            writing: None,
        }
    }

    /// The key's position (0: none, or past 255) and the hot-key sample weight (0: not
    /// sampled). The key itself is found again in `raw` only if the command is recorded.
    #[inline]
    pub(in crate::downstream) fn with_hot(mut self, key_arg: usize, weight: u32) -> Stamp {
        self.key_arg = u8::try_from(key_arg).unwrap_or(0);
        self.weight = weight;
        self
    }

    /// Keeps the near cache's hold on the command's keys until its reply is written.
    #[inline]
    pub(in crate::downstream) fn with_writing(mut self, writing: Option<Box<Writing>>) -> Stamp {
        self.writing = writing;
        self
    }

    /// For replies that are not to a command (protocol errors).
    pub(in crate::downstream) fn none(now: Instant) -> Stamp {
        Stamp {
            command: "protocol_error",
            started: now,
            raw: None,
            alone: false,
            resp3: false,
            key_arg: 0,
            weight: 0,
            writing: None,
        }
    }

    /// For invalidation pushes placed between replies (client-side caching): counted nowhere.
    pub(in crate::downstream) fn push(now: Instant) -> Stamp {
        Stamp {
            command: "",
            ..Stamp::none(now)
        }
    }

    /// Records the command, finished at `now.now()`, (slow ones also go to the slow log) and
    /// returns its reply
    /// as the client gets it: a whole-reply RESP2 null that redcar made itself (a failed
    /// WATCH, a RANDOMKEY on an empty cluster) becomes RESP3's `_` for a RESP3 client. Replies
    /// from the nodes' RESP3 connections are already RESP3.
    pub(in crate::downstream) fn finish<'a>(
        self,
        tally: &mut CommandTally,
        hot: Hot<'_>,
        reply: &'a [u8],
        now: &mut Since,
        node: Option<&str>,
        peer: &str,
    ) -> &'a [u8] {
        if self.command.is_empty() {
            return reply;
        }
        let raw = self.raw.as_deref().unwrap_or_default();
        if hot.keys.wants(self.weight, raw.len(), reply.len()) {
            hot.keys.observe(Observed {
                client: hot.client,
                command: self.command,
                raw,
                key_arg: usize::from(self.key_arg),
                node: node.unwrap_or(""),
                weight: self.weight,
                reply_len: reply.len(),
                now: now.now(),
            });
        }
        let elapsed = now.nanos(self.started);
        let error = reply.first() == Some(&b'-');
        if tally.record(self.command, elapsed, error) {
            let key = self.raw.map(|raw| first_argument(&raw)).unwrap_or_default();
            let elapsed = Duration::from_nanos(elapsed);
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

/// A single-slot command's key position in its arguments (planning left the key positions in
/// `keys`), for the hot and big keys; 0 for any other plan.
#[inline]
pub(in crate::downstream) fn key_position(plan: &Plan, keys: &[usize]) -> usize {
    match plan {
        Plan::Slot { .. } | Plan::Blocking { .. } => keys.first().copied().unwrap_or(0),
        _ => 0,
    }
}

/// The argument after the command name (the key, for most commands), parsed again from the raw
/// request: only slow commands pay for it.
fn first_argument(raw: &Bytes) -> Bytes {
    let mut buf = BytesMut::from(&raw[..]);
    match parse_request(&mut buf, &Limits::default()) {
        Ok(Some(request)) => request.args().bytes(1).unwrap_or_default(),
        _ => Bytes::new(),
    }
}
