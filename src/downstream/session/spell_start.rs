//! Starting a busy spell's commands: parse what the client sent, plan and start each request,
//! and queue its reply in order (or write it at once when nothing is ahead of it).

use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::super::keyspace;
use super::super::pubsub;
use super::super::tracking;
use super::busy::{Spell, BUDGET_RECHECK};
use super::dispatch::{dispatch, protocol_error};
use super::failed_login::failed_login;
use super::near::NearCacheRequest;
use super::record::CommandRecord;
use super::record::{decide, Decided, Decision};
use super::Busy;
use crate::metrics::clock::ElapsedClock;
use crate::protocol::{parse_request_into, Request};
use crate::router::{Call, Plan};

// === impl Spell ===

impl<'d, S> Spell<'_, 'd, S>
where
    S: AsyncRead + AsyncWrite + Send + Unpin,
{
    /// Starts every complete command already buffered, up to the in-flight limit. Returns a
    /// request that puts the client in subscribe mode, for the caller to await.
    pub(super) fn start_commands(&mut self) -> Option<Request> {
        if self.c.reload_if_changed() {
            self.settings.config = self.c.config.clone();
            self.settings.limits = self.settings.config.codec.clone();
        }
        // One clock read serves the whole batch.
        let now = self.reading.clock.take().unwrap_or_else(Instant::now);
        let starved = self.check_budget() || self.throttled(now);
        self.recorder.tally.follow(self.c.state.user_series());
        // Every command of the turn is parsed into this one slot and started by reference
        // (`parse_request_into`); only a parked or subscribing one is moved out of it.
        let mut request = Request::default();
        let mut started = 0;
        while !self.reading.closing
            && self.replies.calls.len() < self.settings.config.caps.in_flight
            && self.replies.exclusive == 0
            && !starved
        {
            if !self.next_request(&mut request, now) {
                break;
            }
            started += 1;
            match self.start(&request, now) {
                Started::Next => {}
                Started::Parked => {
                    self.parked = Some(std::mem::take(&mut request));
                    break;
                }
                Started::Throttled(until) => {
                    self.parked = Some(std::mem::take(&mut request));
                    self.throttle(until);
                    break;
                }
                Started::Subscribe => return Some(request),
            }
        }
        self.replies.batches.end_of_read();
        self.note_depth(started);
        None
    }

    /// `client.max_buffered_bytes_total`, once per turn (a read, a write or a batch of replies),
    /// not per command. Over it, a client owing us reads starts no more commands either: their
    /// replies would pile up here (its buffered commands may be tiny, its replies not). Returns
    /// whether the session is starved that way.
    fn check_budget(&mut self) -> bool {
        let c = &mut *self.c;
        c.share.set(c.input.len() + c.out.len());
        let paused_now = !c.share.may_read(self.reading.partial_since.is_some());
        if paused_now && !self.reading.budget_paused {
            self.timers.budget.reset(Instant::now() + BUDGET_RECHECK);
        }
        self.reading.budget_paused = paused_now;
        self.reading.budget_paused && c.out.len() > super::super::budget::FLOOR
    }

    /// Still over the user's rate: no command starts before `throttled_until`.
    fn throttled(&mut self, now: Instant) -> bool {
        match self.reading.throttled_until {
            Some(until) if now < until => {
                self.throttle(until); // the timer may have been re-armed later meanwhile
                true
            }
            Some(_) => {
                self.reading.throttled_until = None;
                false
            }
            None => false,
        }
    }

    /// Over the user's rate: the parked command waits until `until`, when the spell's timer
    /// wakes it (the timer is re-armed for the calls owed after it fires).
    fn throttle(&mut self, until: Instant) {
        self.reading.throttled_until = Some(until);
        if self.timers.op.deadline().is_none_or(|armed| until < armed) {
            self.timers.op.reset(until);
        }
    }

    /// The next request to start, into `request`: the parked one, or the next complete one in
    /// `input`. Whether there is one. A broken or oversized request queues its error and closes
    /// the session.
    fn next_request(&mut self, request: &mut Request, now: Instant) -> bool {
        // Looked at before taking: `take` would move the whole (empty) `Option` every time.
        if self.parked.is_some() {
            if let Some(parked) = self.parked.take() {
                *request = parked;
                return true;
            }
        }
        // Nothing buffered: nothing to parse (most turns at `-P 1`).
        if self.c.input.is_empty() {
            return false;
        }
        let broken = match parse_request_into(&mut self.c.input, &self.settings.limits, request) {
            Ok(true) => {
                self.reading.partial_since = None;
                return true;
            }
            Ok(false) if self.c.input.len() < self.settings.config.caps.request_bytes => {
                self.note_partial(now);
                return false;
            }
            Ok(false) => "request exceeds client.max_request_bytes".to_string(),
            Err(e) => e.to_string(),
        };
        // A protocol error, or a request too big to ever complete: say so, close.
        self.reading.closing = true;
        self.owed()
            .push(protocol_error(&broken), CommandRecord::none(now), now);
        false
    }

    /// A request is incomplete: `client.request_timeout` counts from its first bytes.
    fn note_partial(&mut self, now: Instant) {
        if self.c.input.is_empty() || self.reading.partial_since.is_some() {
            return;
        }
        self.reading.partial_since = Some(now);
        let timeout = self.settings.config.clocks.request;
        if !timeout.is_zero() && !self.timers.request.is_made() {
            self.timers.request.reset(now + timeout);
        }
    }

    /// Plans and starts one request, queueing its reply (or writing it to `out` when it is
    /// ready and nothing is ahead of it).
    fn start(&mut self, request: &Request, now: Instant) -> Started {
        let router = self.router;
        let c = &mut *self.c;
        let owes = !self.replies.calls.is_empty();
        let facade = c.facade.as_deref();
        let decided = decide(
            router,
            request,
            &mut self.scratch,
            facade,
            &mut c.state,
            owes,
            now,
        );
        let Decision {
            plan,
            command,
            key_arg,
            alone,
        } = match decided {
            Decided::Go(decision) => decision,
            Decided::Parked => return Started::Parked,
            Decided::Throttled(until) => return Started::Throttled(until),
        };
        if matches!(plan, Plan::Sub(_)) && !c.state.tx.is_open() {
            return Started::Subscribe;
        }
        let downstream = c.downstream;
        let plan = tracking::intercept(downstream, &mut c.state, plan, request);
        let mut near = (downstream.near_cache.as_ref()).map(|cache| {
            NearCacheRequest::new(cache, command, &self.scratch, self.replies.calls.is_empty())
        });
        let writing = near
            .as_mut()
            .and_then(|n| n.note_writes(&plan, request, router, &c.state));
        // `CLIENT TRACKING on BCAST` answers once the nodes confirmed its prefixes.
        let call = match tracking::take_wait(&mut c.state) {
            Some(waiting) => waiting,
            None => dispatch(
                router,
                &mut c.inbox,
                &mut c.state,
                plan,
                request,
                self.settings.config.caps.request_bytes,
                now,
                near,
            ),
        };
        // `filter_keys`: KEYS, SCAN and RANDOMKEY show only the keys the user may read.
        let call = match c.state.key_filter() {
            Some(user) => keyspace::filtered(router, user, command, call, request, c.state.lane()),
            None => call,
        };
        let weight = if key_arg == 0 {
            0
        } else {
            self.recorder.sampler.sample()
        };
        let record = CommandRecord::new(
            command,
            request,
            now,
            self.recorder.keep_raw,
            alone,
            c.state.protocol,
        )
        .with_hot(key_arg, weight)
        .with_writing(writing);
        self.after_start(request);
        self.queue(call, record, alone, now);
        Started::Next
    }

    /// QUIT, and failed logins (`auth.max_failures`).
    fn after_start(&mut self, request: &Request) {
        let c = &mut *self.c;
        self.reading.closing |= c.state.quit;
        if let Some((failures, limit_reached)) = c.state.take_failed_login() {
            let metrics = &c.downstream.client_metrics;
            self.reading.closing |= failed_login(metrics, c.peer, request, failures, limit_reached);
        }
    }

    /// Owes the client `call`'s reply: straight to `out` when it is ready and nothing is ahead
    /// of it, else behind the owed ones (the op timer armed for its deadline).
    fn queue(&mut self, call: Call<'d>, record: CommandRecord, alone: bool, now: Instant) {
        if call.is_ready() && self.replies.calls.is_empty() {
            let reply = call.now_or_never().unwrap_or_default();
            let now = &mut ElapsedClock::new(now);
            let finished = record.finish(
                &mut self.recorder.tally,
                self.recorder.hot,
                &reply,
                now,
                None,
                self.c.peer,
            );
            self.c.out.append(finished);
            return;
        }
        if let Some(deadline) = call.deadline() {
            // Earlier than the armed deadline when the timer was ticking for idleness, or
            // after a reload shortened op_timeout.
            if self
                .timers
                .op
                .deadline()
                .is_none_or(|armed| deadline < armed)
            {
                self.timers.op.reset(deadline);
            }
        }
        self.replies.exclusive += usize::from(alone);
        self.replies.calls.push_back((call, record));
        self.replies.batches.queued();
    }

    /// After subscribe mode (which took the connection over until the client left it):
    /// returns how the spell ends, if it does.
    pub(super) fn after_subscribe(&mut self, left: pubsub::Left) -> Option<Busy> {
        match left {
            pubsub::Left::Normal => {}
            pubsub::Left::Reset => self.c.state.reset(),
            pubsub::Left::Close => self.reading.closing = true,
            pubsub::Left::Gone | pubsub::Left::Moved => return Some(Busy::Done),
        }
        None
    }
}

/// What starting one request did.
pub(super) enum Started {
    /// Started (or answered): go on with the next.
    Next,
    /// It must run alone and waits for the commands before it.
    Parked,
    /// Over the user's rate: it waits until then.
    Throttled(Instant),
    /// It enters subscribe mode.
    Subscribe,
}
