//! A session while its client is busy: start each command as soon as it is parsed, write the
//! replies in the order the commands came, and go back to idle once the client has been quiet
//! for [`IDLE_TICK`] with nothing owed.
//!
//! The busy spell is a small state machine ([`Spell`]): each turn starts the commands already
//! buffered ([`Spell::start_commands`]), writes or decides to hold the replies
//! ([`Spell::end_turn`]), then waits for one [`SpellEvent`](super::spell_events::SpellEvent) and handles it.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::super::clients::Downstream;
use super::super::movable::Movable;
use super::super::moves::{Moves, Pipelining};
use super::super::pubsub;
use super::super::reply_batch::ReplyBatches;
use super::super::slow::LatencyWatch;
use super::super::ClientRules;
use super::owed::OwedReplies;
use super::record::{CommandRecord, HotKeySink};
use super::timer::{LazyTimer, OpTimer};
use super::{Busy, Client};
use crate::hotkeys::HotKeySampler;
use crate::metrics::CommandTally;
use crate::protocol::{Limits, Request};
use crate::router::{Call, Router};
use crate::upstream::Inbox;

/// Replies waiting for the rest of their read's replies are written anyway once this big: past
/// it, writing now is cheap per reply.
pub(super) const HOLD_MAX: usize = 64 * 1024;

/// How often a session paused by `client.max_buffered_bytes_total` looks at the total again.
pub(super) const BUDGET_RECHECK: Duration = Duration::from_millis(5);

/// A busy session with nothing owed looks this often whether its client said anything since the
/// last look; a client quiet for a whole tick goes idle (its busy state is freed): after one
/// tick for a client that sent one request, after one to two ticks of silence otherwise. A
/// client sending a command now and then stays busy and allocates nothing per command.
pub(super) const IDLE_TICK: Duration = Duration::from_millis(200);

/// Serves the client from its first bytes until it goes idle, moves to another worker, or the
/// session ends. `pipelining`: the membership a moved session brings along; `subscribed`: how
/// the subscribe mode a session started in ended (a subscribed client from the previous
/// process, life.rs), which this spell takes up as after any subscribe mode.
pub(super) async fn serve_busy<S>(
    c: &mut Client<'_, S>,
    pipelining: Option<Pipelining>,
    subscribed: Option<pubsub::Left>,
) -> Busy
where
    S: AsyncRead + AsyncWrite + Send + Unpin + Movable,
{
    let mut spell = Spell::new(c);
    spell.find_moves();
    spell.placement.pipelining = pipelining;
    if let Some(end) = subscribed.and_then(|left| spell.after_subscribe(left)) {
        return end;
    }
    loop {
        if let Some(request) = spell.start_commands() {
            // Subscribe mode takes the connection over until the client leaves it (and writes
            // the replies before it). Awaited here, not in a method of `Spell`: the request is
            // then held once in this future's state, not twice (the busy box's size, mod.rs).
            spell.recorder.tally.flush();
            let max_reply_bytes = spell.settings.config.caps.reply_bytes;
            let c = &mut *spell.c;
            let left = (c.subscribe_mode(request, &spell.settings.limits, max_reply_bytes)).await;
            if let Some(end) = spell.after_subscribe(left) {
                return end;
            }
            continue;
        }
        let turn = match spell.end_turn() {
            Ok(turn) => turn,
            Err(End::Close) => {
                spell.c.close().await;
                return Busy::Done;
            }
            Err(End::Gone) => return Busy::Done,
        };
        if spell.hands_over_now() {
            return Busy::HandOver; // an upgrade takes the client (leaving.rs)
        }
        if let Some((from, to)) = spell.move_now() {
            return Busy::Move {
                from,
                to,
                pipelining: spell.placement.pipelining.take(),
            };
        }
        let event = poll_fn(|cx| spell.poll_event(&turn, cx)).await;
        if let Some(end) = spell.on_event(event, &turn) {
            return end;
        }
    }
}

/// Why a turn ends the spell.
pub(super) enum End {
    /// Everything owed is written and the session is closing: close the socket.
    Close,
    /// The client is gone.
    Gone,
}

/// What a turn may wait for, decided once per turn from the spell's state (the guards of the
/// events in spell_events.rs).
pub(super) struct Turn<'d> {
    /// The replies in `out` may be written now.
    pub(super) may_write: bool,
    /// More of the client's bytes may be read.
    pub(super) can_read: bool,
    /// A command runs alone: the client is read only to notice it leaving.
    pub(super) waiting_alone: bool,
    /// `client.close_idle_when_slow`'s latency watch, when it is on.
    pub(super) latency: Option<&'d LatencyWatch>,
}

/// A busy spell's state: the replies owed, the timers of this spell and what the next turn
/// needs to know. Made when the client wakes up, freed when it goes idle.
pub(super) struct Spell<'c, 'd, S> {
    pub(super) c: &'c mut Client<'d, S>,
    pub(super) router: &'d Router,
    pub(super) recorder: SpellRecorder<'d>,
    pub(super) replies: SpellReplies<'d>,
    /// A command that must run alone (see `Transaction::is_exclusive`), waiting for the
    /// commands before it to finish.
    pub(super) parked: Option<Request>,
    /// Key positions, reused by every command's plan.
    pub(super) scratch: Vec<usize>,
    pub(super) timers: SpellTimers,
    pub(super) reading: Reading,
    pub(super) settings: SpellSettings,
    pub(super) placement: AutoPlacement<'d>,
}

/// How the spell's commands are recorded: counted, sampled for the hot keys, logged.
pub(super) struct SpellRecorder<'d> {
    /// The request is kept (a reference count) for the slow log and the hot keys.
    pub(super) keep_raw: bool,
    pub(super) hot: HotKeySink<'d>,
    pub(super) sampler: HotKeySampler,
    /// Per-command series, added to the shared ones before each write to the client.
    pub(super) tally: CommandTally<'d>,
}

/// The replies owed to the client.
#[derive(Default)]
pub(super) struct SpellReplies<'d> {
    /// Oldest first, with what the metrics need to know about them.
    pub(super) calls: VecDeque<(Call<'d>, CommandRecord)>,
    /// How many of `calls` must run alone.
    pub(super) exclusive: usize,
    /// Which replies may be written now: those to one read go out together (see reply_batch).
    pub(super) batches: ReplyBatches,
}

/// The spell's timers.
#[derive(Default)]
pub(super) struct SpellTimers {
    /// One timer for the whole busy spell, armed for the oldest call's deadline, instead of one
    /// per command. Deadlines grow along the queue, so when it fires only the front can be
    /// late. With nothing owed it ticks every IDLE_TICK to see whether the client went quiet.
    pub(super) op: OpTimer,
    /// `client.request_timeout`, for the request being received.
    pub(super) request: LazyTimer,
    /// A timer to look again at `client.max_buffered_bytes_total` while paused by it.
    pub(super) budget: LazyTimer,
}

/// What decides whether the client is read.
pub(super) struct Reading {
    /// The client sent something since the last tick (the read that began the spell does not
    /// count: a client that sent one request goes idle at the first tick).
    pub(super) heard: bool,
    /// Once set, no more commands are read; the session ends when every reply is written.
    pub(super) closing: bool,
    /// `client.request_timeout`: when the request now being received began, if it is
    /// incomplete. Completing a request resets it, so trickling one byte at a time does not
    /// keep it alive.
    pub(super) partial_since: Option<Instant>,
    pub(super) budget_paused: bool,
    /// Over its user's rate (`auth.users[].limits`, `when_over: slow`): the parked command
    /// starts no sooner than this, and the client is read no further meanwhile.
    pub(super) throttled_until: Option<Instant>,
    /// The clock read a turn ended with (a read or replies arriving), reused by the next turn:
    /// one clock read per turn instead of two.
    pub(super) clock: Option<Instant>,
}

/// The client settings the spell runs with.
pub(super) struct SpellSettings {
    pub(super) config: Arc<ClientRules>,
    pub(super) limits: Limits,
}

/// `placement: auto` on a per-core worker.
#[derive(Default)]
pub(super) struct AutoPlacement<'d> {
    /// Where sessions may move, and this worker.
    pub(super) moves: Option<(&'d Arc<Moves>, usize)>,
    /// Reads in a row that started [`PIPELINE_DEPTH`](super::super::moves::PIPELINE_DEPTH)
    /// commands or more, and the pipelining membership they earned (see moving.rs).
    pub(super) deep_reads: u8,
    pub(super) pipelining: Option<Pipelining>,
}

// === impl Spell ===

impl<'c, 'd, S> Spell<'c, 'd, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    fn new(c: &'c mut Client<'d, S>) -> Self {
        let downstream: &'d Downstream = c.downstream;
        let metrics = &*downstream.metrics;
        let config = c.config.clone();
        let mut timer = OpTimer::default();
        timer.reset(Instant::now() + IDLE_TICK);
        Spell {
            router: &downstream.router,
            recorder: SpellRecorder {
                keep_raw: metrics.slowlog.is_enabled() || downstream.hotkeys.is_enabled(),
                hot: HotKeySink {
                    keys: &downstream.hotkeys,
                    client: c.state.id,
                },
                sampler: downstream.hotkeys.sampler(c.state.id),
                tally: CommandTally::new(metrics),
            },
            replies: SpellReplies::default(),
            parked: None,
            scratch: Vec::new(),
            timers: SpellTimers {
                op: timer,
                ..SpellTimers::default()
            },
            reading: Reading {
                heard: false,
                closing: false,
                partial_since: None,
                budget_paused: false,
                throttled_until: None,
                clock: Some(c.last_activity),
            },
            settings: SpellSettings {
                limits: config.codec.clone(),
                config,
            },
            placement: AutoPlacement::default(),
            c,
        }
    }

    /// The owed replies and where finished ones go.
    pub(super) fn owed(&mut self) -> OwedReplies<'_, 'd> {
        OwedReplies {
            calls: &mut self.replies.calls,
            batches: &mut self.replies.batches,
            out: &mut self.c.out,
            tally: &mut self.recorder.tally,
            hot: self.recorder.hot,
            peer: self.c.peer,
        }
    }

    /// Moves finished replies to `out` in order (see [`OwedReplies::take_replies`]).
    pub(super) fn take_replies(
        &mut self,
        first: Option<Bytes>,
        latency: Option<&LatencyWatch>,
        now: Instant,
        next: impl FnMut(&mut Call<'d>, Option<&mut Inbox>) -> Option<Bytes>,
    ) {
        let c = &mut *self.c;
        let mut owed = OwedReplies {
            calls: &mut self.replies.calls,
            batches: &mut self.replies.batches,
            out: &mut c.out,
            tally: &mut self.recorder.tally,
            hot: self.recorder.hot,
            peer: c.peer,
        };
        self.replies.exclusive -=
            owed.take_replies(first, c.inbox.as_deref_mut(), latency, now, next);
    }

    /// After the commands are started: writes what may be written now, decides whether the
    /// session closes, and what the turn may wait for.
    fn end_turn(&mut self) -> Result<Turn<'d>, End> {
        self.write_all_owed()?;
        if !self.reading.closing
            && self.replies.calls.is_empty()
            && self.parked.is_none()
            && self.c.may_close_now()
            && self.c.closes_at_safe_point()
        {
            self.reading.closing = true;
        }
        if self.reading.closing && self.replies.calls.is_empty() && self.c.out.is_empty() {
            return Err(End::Close);
        }
        let config = &*self.settings.config;
        let c = &mut *self.c;
        // While a command runs alone, read only enough to notice the client leaving.
        let waiting_alone = self.replies.exclusive > 0 || self.parked.is_some();
        let can_read = !self.reading.closing
            && !self.reading.budget_paused
            && !c.stops_reading_for_upgrade()
            && self.replies.calls.len() < config.caps.in_flight
            && c.out.len() < config.caps.reply_bytes
            && (!waiting_alone || c.input.len() < super::buffers::CHUNK);
        let may_write = !c.out.is_empty()
            && (self.replies.batches).may_write(
                self.replies.calls.len(),
                c.out.len(),
                HOLD_MAX.min(config.caps.reply_bytes),
            );
        if may_write {
            // Whoever reads these replies finds their commands counted.
            self.recorder.tally.flush();
        }
        c.arm_timers();
        // Nothing held while there is nothing to hold: a waiting client keeps no buffer.
        c.input.release_if_empty();
        c.out.release_if_empty();
        Ok(Turn {
            may_write,
            can_read,
            waiting_alone,
            latency: c.latency(),
        })
    }

    /// Every owed reply is in `out` (one command at a time, `-P 1`): written now, not in a turn
    /// of its own, as the event wait would write first anyway: one turn of the session's loop
    /// less per command. A full socket leaves the write to the event
    /// wait, which waits for room.
    fn write_all_owed(&mut self) -> Result<(), End> {
        let max_held = HOLD_MAX.min(self.settings.config.caps.reply_bytes);
        let out = self.c.out.len();
        if !self.replies.calls.is_empty()
            || out == 0
            || !self.replies.batches.may_write(0, out, max_held)
        {
            return Ok(());
        }
        self.recorder.tally.flush();
        match self.c.write_now() {
            Ok(true) => self.replies.batches.wrote(0, self.c.out.len()),
            Ok(false) => {}
            Err(()) => return Err(End::Gone), // client gone, as in the event wait
        }
        Ok(())
    }
}
