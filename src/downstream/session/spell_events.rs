//! What a busy spell waits for between turns, and what each event does to it.
//!
//! One hand-written poll instead of a `select!`: the events are looked at in a fixed order
//! (replies first, then writing, reading and the timers), each only when its guard in [`Turn`]
//! allows it, and the handlers are plain methods that each fit on a screen.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::super::tracking;
use super::busy::{Spell, Turn, BUDGET_RECHECK, IDLE_TICK};
use super::owed::goes_idle;
use super::Busy;
use crate::router::Call;

/// What ended a busy spell's wait.
pub(super) enum SpellEvent {
    /// The oldest owed call's reply is here.
    Reply(Bytes),
    /// Part of `out` was written (or the write failed).
    Wrote(io::Result<usize>),
    /// The client sent bytes, or left (`Ok(0)` or an error).
    Read(io::Result<usize>),
    /// The op timer fired: the front call's deadline, or the idle tick.
    OpTimer,
    /// `client.idle_timeout` may have passed.
    IdleTimeout,
    /// `client.request_timeout` may have passed for the partial request.
    RequestTimeout,
    /// Time to look at `client.max_buffered_bytes_total` again.
    BudgetRecheck,
    /// `client.max_age` passed.
    Aged,
    /// Invalidation pushes are waiting for this client.
    Pushes,
    /// The proxy is draining.
    Drain,
    /// The latency watch (`client.close_idle_when_slow`) changed its mind.
    Slow(bool),
}

// === impl Spell ===

impl<'d, S> Spell<'_, 'd, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    /// The first event ready, in priority order; each looked at only when the turn allows it.
    pub(super) fn poll_event(&mut self, turn: &Turn<'d>, cx: &mut Context<'_>) -> Poll<SpellEvent> {
        let max_reply_bytes = self.settings.config.caps.reply_bytes;
        let c = &mut *self.c;
        if c.out.len() < max_reply_bytes {
            if let Some((call, _)) = self.replies.calls.front_mut() {
                if let Poll::Ready(reply) = call.poll_in(cx, c.inbox.as_deref_mut()) {
                    return Poll::Ready(SpellEvent::Reply(reply));
                }
            }
        }
        if turn.may_write {
            let mut writer = c.stream.writer();
            if let Poll::Ready(wrote) = Pin::new(&mut writer).poll_write(cx, &c.out[..]) {
                return Poll::Ready(SpellEvent::Wrote(wrote));
            }
        }
        if turn.can_read {
            if let Poll::Ready(read) = c.input.poll_read_from(&mut c.stream.reader(), cx) {
                return Poll::Ready(SpellEvent::Read(read));
            }
        }
        if self.timers.op.poll_fired(cx).is_ready() {
            return Poll::Ready(SpellEvent::OpTimer);
        }
        self.poll_rare(cx)
    }

    /// The events that come seldom: the optional timers, pushes, drain and the latency watch.
    fn poll_rare(&mut self, cx: &mut Context<'_>) -> Poll<SpellEvent> {
        let config = &*self.settings.config;
        let c = &mut *self.c;
        let closing = self.reading.closing;
        let idle_timeout =
            !config.clocks.idle.is_zero() && self.replies.calls.is_empty() && !closing;
        if idle_timeout && c.idle_timer.poll_fired(cx).is_ready() {
            return Poll::Ready(SpellEvent::IdleTimeout);
        }
        let partial = !config.clocks.request.is_zero() && self.reading.partial_since.is_some();
        if partial && !closing && self.timers.request.poll_fired(cx).is_ready() {
            return Poll::Ready(SpellEvent::RequestTimeout);
        }
        if self.reading.budget_paused && self.timers.budget.poll_fired(cx).is_ready() {
            return Poll::Ready(SpellEvent::BudgetRecheck);
        }
        let ages = !config.clocks.max_age.is_zero() && !c.aged;
        if ages && c.age_timer.poll_fired(cx).is_ready() {
            return Poll::Ready(SpellEvent::Aged);
        }
        let room = c.out.len() < config.caps.reply_bytes;
        if c.state.tracking.is_some() && room && tracking::poll_ready(&c.state, cx).is_ready() {
            return Poll::Ready(SpellEvent::Pushes);
        }
        if !closing && !c.handing_over && c.drain.poll_started(cx).is_ready() {
            return Poll::Ready(SpellEvent::Drain);
        }
        if c.slow.is_on() && !closing {
            if let Poll::Ready(slow) = c.slow.poll_changed(cx) {
                return Poll::Ready(SpellEvent::Slow(slow));
            }
        }
        Poll::Pending
    }

    /// Handles one event; returns how the spell ends, if it does.
    pub(super) fn on_event(&mut self, event: SpellEvent, turn: &Turn<'d>) -> Option<Busy> {
        match event {
            SpellEvent::Reply(reply) => self.on_reply(reply, turn),
            SpellEvent::Wrote(wrote) => return self.on_wrote(wrote),
            SpellEvent::Read(read) => return self.on_read(read, turn),
            SpellEvent::OpTimer => return self.on_op_timer(turn),
            SpellEvent::IdleTimeout => self.on_idle_timeout(),
            SpellEvent::RequestTimeout => self.on_request_timeout(),
            SpellEvent::BudgetRecheck => {
                // Other sessions release bytes without telling anyone: look again now and then.
                self.timers.budget.reset(Instant::now() + BUDGET_RECHECK);
            }
            SpellEvent::Aged => self.c.aged = true,
            SpellEvent::Pushes => self.on_pushes(),
            SpellEvent::Drain => self.on_drain(), // closes, or waits for an upgrade's safe point
            SpellEvent::Slow(slow) => self.c.close_when_safe = slow,
        }
        None
    }

    /// The front call's reply, and every following one already here, go to `out` together (to
    /// be written in one syscall).
    fn on_reply(&mut self, reply: Bytes, turn: &Turn<'d>) {
        let now = Instant::now();
        self.reading.clock = Some(now);
        self.take_replies(Some(reply), turn.latency, now, |call, inbox| {
            call.try_now(inbox)
        });
    }

    fn on_wrote(&mut self, wrote: io::Result<usize>) -> Option<Busy> {
        match wrote {
            Ok(n) if n > 0 => {
                let c = &mut *self.c;
                c.downstream.client_metrics.bytes_sent.inc_by(n as u64);
                c.state.note_written(n);
                c.out.advance(n);
                self.replies
                    .batches
                    .wrote(self.replies.calls.len(), c.out.len());
                None
            }
            _ => Some(Busy::Done), // client gone: owed replies are dropped with the session
        }
    }

    fn on_read(&mut self, read: io::Result<usize>, turn: &Turn<'d>) -> Option<Busy> {
        match read {
            // Like Redis, a client that leaves while blocked is not waited for.
            Ok(0) | Err(_) if turn.waiting_alone => return Some(Busy::Done),
            Ok(0) | Err(_) => self.reading.closing = true,
            Ok(n) => {
                let c = &mut *self.c;
                c.downstream.client_metrics.bytes_received.inc_by(n as u64);
                c.state.note_read(n);
                let now = Instant::now();
                c.last_activity = now;
                self.reading.clock = Some(now);
                self.reading.heard = true;
            }
        }
        None
    }

    /// A call past its deadline whose reply is here anyway (it came while an earlier call held
    /// up the queue) gets that reply, not the timeout. Only first attempts are timed here
    /// (redirects and retries time themselves). With nothing owed, a client quiet for a whole
    /// tick goes idle.
    fn on_op_timer(&mut self, turn: &Turn<'d>) -> Option<Busy> {
        let now = Instant::now();
        self.take_replies(None, turn.latency, now, expire_late);
        match self
            .replies
            .calls
            .iter()
            .find_map(|(call, _)| call.deadline())
        {
            Some(next) => self.timers.op.reset(next),
            None => self.timers.op.reset(now + IDLE_TICK),
        }
        let quiet = self.replies.calls.is_empty() && !std::mem::take(&mut self.reading.heard);
        let idle = quiet
            && goes_idle(
                self.c,
                &self.parked,
                self.reading.closing,
                self.reading.budget_paused,
                self.reading.partial_since,
            );
        idle.then_some(Busy::Idle)
    }

    /// `client.idle_timeout`: re-armed from the last activity only when it fires, not on every
    /// read.
    fn on_idle_timeout(&mut self) {
        let c = &mut *self.c;
        let idle = self.settings.config.clocks.idle;
        if c.last_activity.elapsed() >= idle {
            tracing::debug!(client = c.state.id, "closing idle client");
            self.reading.closing = true;
        } else {
            c.idle_timer.reset(c.last_activity + idle);
        }
    }

    /// `client.request_timeout`: re-armed from the request's start only when it fires, not on
    /// every read.
    fn on_request_timeout(&mut self) {
        let timeout = self.settings.config.clocks.request;
        let started = self.reading.partial_since.unwrap_or_else(Instant::now);
        if started.elapsed() < timeout {
            self.timers.request.reset(started + timeout);
            return;
        }
        tracing::debug!(
            client = self.c.state.id,
            "closing client: request not completed within client.request_timeout"
        );
        self.reading.closing = true;
        let now = Instant::now();
        let call = Call::ready(crate::router::redcar_error(format_args!(
            "request not completed within {timeout:?} (client.request_timeout); closing"
        )));
        self.owed()
            .push(call, super::record::CommandRecord::none(now), now);
    }

    /// Invalidations go between replies, after those of the commands sent before.
    fn on_pushes(&mut self) {
        let now = Instant::now();
        let pushes = tracking::take_frames(&self.c.state);
        if !pushes.is_empty() {
            self.owed().push(
                Call::ready(pushes),
                super::record::CommandRecord::push(now),
                now,
            );
        }
    }
}

/// At the op timer: the front call's reply if it is here, else its timeout if it is past its
/// deadline (calls without one are not timed here).
fn expire_late(call: &mut Call<'_>, inbox: Option<&mut crate::upstream::Inbox>) -> Option<Bytes> {
    call.deadline()?;
    match inbox {
        Some(inbox) => call
            .try_now(Some(&mut *inbox))
            .or_else(|| call.expire(Some(inbox))),
        None => call.try_now(None).or_else(|| call.expire(None)),
    }
}
