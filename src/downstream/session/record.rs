//! One command's record, from its start to its reply: what it is, decided once for either kind
//! of client (a worker's event loop or a session task), and what the metrics and the slow log
//! need to know about it while it runs.
//!
//! The decision is the router's plan, then the stages that may answer the request or hold it
//! back, in this order: the cluster facade's own answer, the auth gate (command, key and
//! channel rules), whether it must run alone, and its user's rate. The session task's further
//! stages (client tracking, the near cache) apply to the decision's plan in `spell_start.rs`.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use super::super::client_state::ClientState;
use super::super::facade::Endpoint;
use crate::auth::Admit;
use crate::hotkeys::{HotKeys, Observed};
use crate::metrics::clock::ElapsedClock;
use crate::metrics::CommandTally;
use crate::near_cache::Writing;
use crate::protocol::{parse_request, resp3_null, Limits, Protocol, Request};
use crate::router::{Plan, Router};

/// What to do with a request.
pub(in crate::downstream) enum Decided {
    /// Start it.
    Go(Decision),
    /// It must run alone and replies are still owed: it waits for them (its rate is charged
    /// once it is decided again).
    Parked,
    /// Over its user's rate (`auth.users[].limits`, `when_over: slow`): it waits until then.
    Throttled(Instant),
}

/// A request, decided.
pub(in crate::downstream) struct Decision {
    pub(in crate::downstream) plan: Plan,
    /// The command's name, for the figures.
    pub(in crate::downstream) command: &'static str,
    /// Its key's position for the hot keys (0: no key, or not a one-slot command).
    pub(in crate::downstream) key_arg: usize,
    /// It runs with nothing else owed (see `Transaction::is_exclusive`).
    pub(in crate::downstream) alone: bool,
}

/// Decides what `request` is. `owes`: replies are still owed to the client.
#[inline]
pub(in crate::downstream) fn decide(
    router: &Router,
    request: &Request,
    scratch: &mut Vec<usize>,
    facade: Option<&Endpoint>,
    state: &mut ClientState,
    owes: bool,
    now: Instant,
) -> Decided {
    let (plan, command) = router.planner().plan(request, scratch);
    let key_arg = key_position(&plan, scratch);
    let plan = match facade {
        Some(facade) => facade_plan(facade, plan, command, request, router, state),
        None => plan,
    };
    let plan = state.gate(
        plan,
        || router.planner().lookup(request.args()),
        request.args(),
    );
    let alone = state.tx.is_exclusive(&plan);
    if alone && owes {
        return Decided::Parked;
    }
    let plan = match state.admit(now) {
        Admit::Now => plan,
        Admit::After(wait) => return Decided::Throttled(now + wait),
        Admit::Refuse(reply) => Plan::Reply(reply),
    };
    Decided::Go(Decision {
        plan,
        command,
        key_arg,
        alone,
    })
}

/// On a cluster-facade listener, the facade's own reply replaces the plan of the commands it
/// answers (still subject to authentication, which runs after). Inside MULTI the usual plan
/// stands: those commands cannot be queued through redcar.
fn facade_plan(
    facade: &Endpoint,
    plan: Plan,
    command: &str,
    request: &Request,
    router: &Router,
    state: &ClientState,
) -> Plan {
    if state.tx.is_open() {
        return plan;
    }
    let ready = || router.cluster().is_ready();
    match facade.answer(command, request.args(), ready, state.protocol) {
        Some(reply) => Plan::Reply(reply),
        None => plan,
    }
}

/// What the metrics and the slow log need to know about one command.
pub(in crate::downstream) struct CommandRecord {
    command: &'static str,
    pub(in crate::downstream) started: Instant,
    /// The request, kept (a reference count, not a copy) so a slow command's key can be logged.
    raw: Option<Bytes>,
    /// It runs alone (see `Transaction::is_exclusive`).
    pub(in crate::downstream) alone: bool,
    /// The client spoke RESP3 when it sent the command.
    resp3: bool,
    /// Where its key is in the request (0: no single key), and its weight when sampled for the
    /// hot keys (0: not sampled); see [`CommandRecord::with_hot`].
    key_arg: u8,
    weight: u32,
    /// The near cache's hold on the keys it writes, released with the reply (see
    /// `near_cache::Writing`).
    writing: Option<Box<Writing>>,
}

/// Where a session's finished commands are recorded for `/hotkeys`.
#[derive(Clone, Copy)]
pub(in crate::downstream) struct HotKeySink<'d> {
    pub(in crate::downstream) keys: &'d HotKeys,
    pub(in crate::downstream) client: u64,
}

impl CommandRecord {
    /// `keep_raw` only when the slow log is on: otherwise the request is not needed afterwards.
    pub(in crate::downstream) fn new(
        command: &'static str,
        request: &Request,
        now: Instant,
        keep_raw: bool,
        alone: bool,
        protocol: Protocol,
    ) -> CommandRecord {
        CommandRecord {
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
    pub(in crate::downstream) fn with_hot(mut self, key_arg: usize, weight: u32) -> CommandRecord {
        self.key_arg = u8::try_from(key_arg).unwrap_or(0);
        self.weight = weight;
        self
    }

    /// Keeps the near cache's hold on the command's keys until its reply is written.
    #[inline]
    pub(in crate::downstream) fn with_writing(
        mut self,
        writing: Option<Box<Writing>>,
    ) -> CommandRecord {
        self.writing = writing;
        self
    }

    /// For replies that are not to a command (protocol errors).
    pub(in crate::downstream) fn none(now: Instant) -> CommandRecord {
        CommandRecord {
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
    pub(in crate::downstream) fn push(now: Instant) -> CommandRecord {
        CommandRecord {
            command: "",
            ..CommandRecord::none(now)
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
        hot: HotKeySink<'_>,
        reply: &'a [u8],
        now: &mut ElapsedClock,
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
