//! A loop client's turn: read what the socket has, then start every complete command, each
//! decided once (the router's plan, the cluster facade, the auth gate) and then either written
//! in place to the loop's own node connection or started on the general path.

use std::io;

use tokio::time::Instant;

use bytes::Bytes;

use super::super::keyspace;
use super::super::session::dispatch::{dispatch, protocol_error};
use super::super::session::failed_login::failed_login;
use super::super::session::record::CommandRecord;
use super::super::session::record::{decide, Decided, Decision};
use super::client::{Fate, LoopClient};
use super::replies::Wait;
use super::timers::Which;
use super::work::Work;
use crate::commands::Local;
use crate::protocol::{parse_request_into, Request};
use crate::router::{Call, Plan};
use crate::upstream::LoopWaiter;

/// How often a client paused by `client.max_buffered_bytes_total` looks at the total again.
const BUDGET_RECHECK: std::time::Duration = std::time::Duration::from_millis(5);

/// What starting one request did.
enum LoopStarted {
    /// Started (or answered): on with the next.
    Next,
    /// It must run alone and waits for the commands before it.
    Parked,
    /// The client leaves the loop with it (subscribe mode, client tracking).
    HandOff,
    /// Its user's rate holds it back until then (`auth.users[].limits`).
    Throttled(Instant),
}

impl<'d> LoopClient<'d> {
    /// The client's turn: reads while it may and starts what it read.
    pub(super) fn run(&mut self, work: &mut Work<'d>) -> Fate {
        self.reload_if_changed(work);
        loop {
            let fate = self.start_commands(work);
            if fate != Fate::Stays {
                return fate;
            }
            if !self.may_read() || !self.flags.readable {
                break;
            }
            match self.link.input.read_from(&mut self.link.socket) {
                Ok(0) => {
                    self.on_eof();
                    break;
                }
                Ok(n) => {
                    work.d.client_metrics.bytes_received.inc_by(n as u64);
                    self.state.note_read(n);
                    self.times.last_activity = work.now;
                    // A short read emptied the socket: the next bytes are a new event.
                    self.flags.readable = n >= super::super::session::buffers::CHUNK;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.flags.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.on_eof();
                    break;
                }
            }
        }
        // Stopped at a limit (or behind a command that runs alone) with more to read or start:
        // it goes on when room frees. A partial request with nothing more to read is not stalled:
        // its next bytes are a new event.
        let held_back = !self.may_read() || self.replies.alone > 0;
        self.flags.stalled = held_back && (self.flags.readable || !self.link.input.is_empty());
        if !self.link.out.is_empty() || self.closed() {
            self.want_write(work);
        }
        Fate::Stays
    }

    /// The client closed its side (or the read failed). Like Redis, a client that leaves while
    /// blocked is not waited for; otherwise what it is owed is still written.
    fn on_eof(&mut self) {
        self.flags.readable = false;
        if self.replies.alone > 0 || self.parked.is_some() {
            self.flags.gone = true;
        }
        self.flags.closing = true;
    }

    /// Whether more may be read: not closing, not at a limit, not waiting for a command that
    /// runs alone (then only enough to notice the client leaving).
    fn may_read(&self) -> bool {
        let config = &self.settings.config;
        let alone = self.replies.alone > 0 || self.parked.is_some();
        !self.flags.closing
            && !self.flags.budget_paused
            && !self.stops_reading_for_upgrade()
            && self.replies.len() < config.caps.in_flight
            && self.link.out.len() < config.caps.reply_bytes
            && (!alone || self.link.input.len() < super::super::session::buffers::CHUNK)
    }

    /// Starts every complete command buffered, up to the in-flight limit.
    fn start_commands(&mut self, work: &mut Work<'d>) -> Fate {
        let starved = self.check_budget(work);
        let mut request = Request::default();
        let mut started = 0;
        while !self.flags.closing
            && self.replies.len() < self.settings.config.caps.in_flight
            && self.replies.alone == 0
            && !starved
        {
            if !self.next_request(&mut request, work) {
                break;
            }
            started += 1;
            match self.start(&request, work) {
                LoopStarted::Next => {}
                LoopStarted::Parked => {
                    self.parked = Some(std::mem::take(&mut request));
                    break;
                }
                LoopStarted::Throttled(until) => {
                    self.parked = Some(std::mem::take(&mut request));
                    work.timers.arm(until, self.token, Which::Throttle);
                    break;
                }
                LoopStarted::HandOff => {
                    self.parked = Some(std::mem::take(&mut request));
                    self.replies.batches.end_of_read();
                    return Fate::HandOff;
                }
            }
        }
        self.replies.batches.end_of_read();
        self.note_depth(started, work);
        Fate::Stays
    }

    /// `client.max_buffered_bytes_total`, once per turn. Over it, a client owing us reads
    /// starts no more commands either. Whether the client is starved that way.
    fn check_budget(&mut self, work: &mut Work<'d>) -> bool {
        self.books
            .share
            .set(self.link.input.len() + self.link.out.len());
        let paused = !self
            .books
            .share
            .may_read(self.times.partial_since.is_some());
        if paused && !self.flags.budget_paused {
            // Other clients release bytes without telling anyone: look again now and then.
            work.timers
                .arm(work.now + BUDGET_RECHECK, self.token, Which::Budget);
        }
        self.flags.budget_paused = paused;
        paused && self.link.out.len() > super::super::budget::FLOOR
    }

    /// The next request to start, into `request`: the parked one, or the next complete one in
    /// `input`. A broken or oversized request queues its error and closes the client.
    fn next_request(&mut self, request: &mut Request, work: &mut Work<'d>) -> bool {
        if self.parked.is_some() {
            if let Some(parked) = self.parked.take() {
                *request = parked;
                return true;
            }
        }
        if self.link.input.is_empty() {
            return false;
        }
        let config = &self.settings.config;
        let broken = match parse_request_into(&mut self.link.input, &self.settings.limits, request)
        {
            Ok(true) => {
                self.times.partial_since = None;
                return true;
            }
            Ok(false) if self.link.input.len() < config.caps.request_bytes => {
                if self.times.partial_since.is_none() {
                    self.times.partial_since = Some(work.now);
                    let timeout = config.clocks.request;
                    if !timeout.is_zero() {
                        work.timers
                            .arm(work.now + timeout, self.token, Which::Request);
                    }
                }
                return false;
            }
            Ok(false) => "request exceeds client.max_request_bytes".to_string(),
            Err(e) => e.to_string(),
        };
        self.flags.closing = true;
        let reply = protocol_error(&broken).try_now(None).unwrap_or_default();
        self.owe_ready(reply, CommandRecord::none(work.now), work);
        false
    }

    /// Decides what one request is, once, and starts it.
    fn start(&mut self, request: &Request, work: &mut Work<'d>) -> LoopStarted {
        let router = work.router;
        let now = work.now;
        let facade = self.settings.facade.as_deref();
        let owes = !self.replies.is_empty();
        let decided = decide(
            router,
            request,
            &mut work.scratch,
            facade,
            &mut self.state,
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
            Decided::Parked => return LoopStarted::Parked,
            Decided::Throttled(until) => return LoopStarted::Throttled(until),
        };
        if leaves_the_loop(&plan, &self.state) {
            // Replies already in the output buffer go out first: the session starts empty.
            return match self.replies.is_empty() && self.link.out.is_empty() {
                true => LoopStarted::HandOff,
                false => LoopStarted::Parked,
            };
        }
        let weight = if key_arg == 0 {
            0
        } else {
            work.recorder.sampler.sample()
        };
        let record = CommandRecord::new(
            command,
            request,
            now,
            work.recorder.keep_raw,
            alone,
            self.state.protocol,
        )
        .with_hot(key_arg, weight);
        match plan {
            Plan::Slot { slot, write } if !self.state.tx.is_open() => {
                if write {
                    self.state.written.note(slot);
                }
                self.forward(request, slot, write, record, work);
            }
            plan => {
                let max_tx = self.settings.config.caps.request_bytes;
                let call = dispatch(
                    router,
                    &mut self.replies.inbox,
                    &mut self.state,
                    plan,
                    request,
                    max_tx,
                    now,
                    None,
                );
                // `filter_keys`: KEYS, SCAN and RANDOMKEY show only the keys the user may read.
                let call = match self.state.key_filter() {
                    Some(user) => {
                        let lane = self.state.lane();
                        keyspace::filtered(router, user, command, call, request, lane)
                    }
                    None => call,
                };
                self.owe_call(call, record, work);
            }
        }
        self.after_start(request, work);
        LoopStarted::Next
    }

    /// QUIT, and failed logins (`auth.max_failures`).
    fn after_start(&mut self, request: &Request, work: &mut Work<'d>) {
        self.flags.closing |= self.state.quit;
        if let Some((failures, limit_reached)) = self.state.take_failed_login() {
            let metrics = &work.d.client_metrics;
            self.flags.closing |=
                failed_login(metrics, &self.link.peer, request, failures, limit_reached);
        }
    }

    /// A one-slot command: written in place to the loop's connection to its node when the
    /// router has nothing to add to the first attempt; otherwise through the general path.
    #[inline]
    fn forward(
        &mut self,
        request: &Request,
        slot: u16,
        write: bool,
        record: CommandRecord,
        work: &mut Work<'d>,
    ) {
        let router = work.router.forwarder();
        let lane = self.state.lane();
        let raw = request.raw();
        if let Some(hop) = router.first_hop(slot, write, work.now) {
            if let Some((home, key)) = hop.node.loop_home(lane) {
                if home == work.index {
                    let to = LoopWaiter {
                        client: self.token,
                        seq: self.replies.next_seq(),
                    };
                    match work.conns.send(key, raw, to, work.now) {
                        Ok(true) => {
                            let wait = Wait::Node {
                                hop,
                                slot,
                                write,
                                raw: raw.clone(),
                            };
                            self.replies.push(record, wait);
                            self.watch_deadlines(work);
                            return;
                        }
                        Ok(false) => {}
                        Err(never_sent) => {
                            let call = router.follow_up(
                                hop,
                                raw.clone(),
                                slot,
                                write,
                                lane,
                                Err(never_sent),
                            );
                            return self.owe_call(call, record, work);
                        }
                    }
                }
            }
        }
        let inbox = Some(&mut **self.replies.inbox.get_or_insert_with(Box::default));
        let call = router.forward(inbox, raw.clone(), Some(slot), write, lane, work.now);
        self.owe_call(call, record, work);
    }

    /// Owes `call`'s reply: at once when it is ready and nothing is ahead of it.
    fn owe_call(&mut self, call: Call<'d>, record: CommandRecord, work: &mut Work<'d>) {
        if call.is_ready() {
            let mut call = call;
            let reply = call.try_now(None).unwrap_or_default();
            return self.owe_ready(reply, record, work);
        }
        let timed = call.deadline().is_some();
        self.replies.push(record, Wait::Call(call));
        if timed {
            self.watch_deadlines(work);
        }
        // A new call is polled at the end of the turn (it may be done already).
        self.want_calls_polled(work);
    }

    /// Owes an error redcar made (after the replies owed before it), then the client closes.
    pub(super) fn owe_error(&mut self, reply: Bytes, work: &mut Work<'d>) {
        self.owe_ready(reply, CommandRecord::none(work.now), work);
    }

    /// Owes a reply that is already here.
    fn owe_ready(&mut self, reply: Bytes, record: CommandRecord, work: &mut Work<'d>) {
        if self.replies.is_empty() {
            return self.write_reply(record, &reply, None, work);
        }
        self.replies.push(record, Wait::Done { reply, node: None });
    }

    /// The reply of the command `record` describes goes to the output buffer, recorded.
    pub(super) fn write_reply(
        &mut self,
        record: CommandRecord,
        reply: &[u8],
        node: Option<&str>,
        work: &mut Work<'d>,
    ) {
        let mut since = crate::metrics::clock::ElapsedClock::new(work.now);
        if self.settings.config.close_idle_when_slow {
            // Feeds `client.close_idle_when_slow` (one atomic add) when it is on.
            let elapsed = since.nanos(record.started);
            work.recorder
                .latency
                .record(std::time::Duration::from_nanos(elapsed));
        }
        let hot = work.hot(self.state.id);
        // The tally is the loop's: it counts for this client's user from here.
        work.recorder.tally.follow(self.state.user_series());
        let sent = record.finish(
            &mut work.recorder.tally,
            hot,
            reply,
            &mut since,
            node,
            &self.link.peer,
        );
        self.link.out.append(sent);
        self.want_write(work);
    }

    /// Lists the client so that its calls are polled this loop turn.
    pub(super) fn want_calls_polled(&mut self, work: &mut Work<'d>) {
        self.want_run(work);
    }
}

/// Commands after which a client is served by a session of the general kind: subscribe mode,
/// and client-side caching (its invalidations are pushed between replies).
fn leaves_the_loop(plan: &Plan, state: &super::super::client_state::ClientState) -> bool {
    if state.tx.is_open() {
        return false;
    }
    matches!(
        plan,
        Plan::Sub(_)
            | Plan::Local(
                Local::ClientTracking
                    | Local::ClientCaching
                    | Local::ClientGetRedir
                    | Local::ClientTrackingInfo
            )
    )
}
