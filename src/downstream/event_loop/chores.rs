//! What a loop does besides serving events: deadlines of commands sent in place, the clients'
//! timers, idle node connections, the latency watch, the drain.
//!
//! Timekeeping is coarse on purpose: the loop reads the clock once per turn (`work.now`) and does
//! the periodic work (node connection ticks, the latency watch, retrying accepts, the busy report)
//! every `CHORES`, so the per-command path never reads a clock or walks a list. Client timers are
//! armed in a timer wheel and re-armed lazily (an idle timer moves only when it fires), so a busy
//! client costs nothing per read.

use tokio::time::Instant;

use super::client::LoopClient;
use super::timers::Which;
use super::tokens;
use super::work::{Work, CHORES, DEADLINE_SWEEP};
use super::Loop;
use crate::router::redcar_error;

impl<'d> Loop<'d> {
    /// The sweeps and timers that are due.
    ///
    /// Called once per turn after the events. The deadline sweep walks only the clients that have
    /// commands sent in place (the `watched` list), every `DEADLINE_SWEEP`.
    pub(super) fn on_timers(&mut self) {
        let now = self.work.now;
        if !self.work.lists.watched.is_empty() && now >= self.next_sweep {
            self.next_sweep = now + DEADLINE_SWEEP;
            self.sweep_deadlines(now);
        }
        while let Some((token, which)) = self.work.timers.pop_due(now) {
            if let Some(client) = super::client_in(&mut self.clients, token) {
                client.on_timer(which, &mut self.work);
            }
        }
        if now >= self.next_chores {
            self.next_chores = now + CHORES;
            self.work.conns.tick(now, self.poll.registry());
            self.look_at_latency();
            self.retry_accept();
            self.report_busy();
        }
        // What the timers made writable or runnable.
        self.run_listed();
        self.write_clients();
    }

    /// The time spent serving goes to the placement's busy share (`placement: pack`, `auto`):
    /// the loop thread's CPU time since the last report. Read here, every `CHORES`, rather than
    /// timed around each turn (two clock readings and a subtraction per turn, a visible share of
    /// a one-at-a-time command); time the thread waits in `poll` is not CPU
    /// time, and time it was runnable but not running is not counted as serving.
    fn report_busy(&mut self) {
        let Some(cpu) = self.cpu.used() else {
            return;
        };
        let busy = cpu.saturating_sub(std::mem::replace(&mut self.cpu_reported, cpu));
        if let Some(spread) = self.work.d.spread() {
            spread.add_loop_busy(self.work.index, busy.as_nanos() as u64);
        }
    }

    /// Commands sent in place past their deadline get the timeout; clients owing none left are
    /// no longer watched.
    fn sweep_deadlines(&mut self, now: Instant) {
        let mut watched = std::mem::take(&mut self.work.lists.watched);
        watched.retain(|&token| {
            let Some(client) = self.clients.get_mut(tokens::key(token)) else {
                return false;
            };
            if client.token != token {
                return false;
            }
            let forwarder = self.work.router.forwarder();
            let next = client.replies.expire(now, forwarder);
            client.take_done(&mut self.work);
            client.flags.listed.watched = next.is_some();
            next.is_some()
        });
        watched.append(&mut self.work.lists.watched);
        self.work.lists.watched = watched;
    }

    /// `client.close_idle_when_slow`: when the latency watch changes its mind, every client
    /// connected now is closed at its next safe point (or no longer).
    fn look_at_latency(&mut self) {
        let Some(changes) = self.slow.as_mut() else {
            return;
        };
        if !changes.has_changed().unwrap_or(false) {
            return;
        }
        let slow = *changes.borrow_and_update();
        for (_, client) in self.clients.iter_mut() {
            if client.settings.config.close_idle_when_slow {
                client.flags.due.slow = slow;
                client.close_if_asked(&self.work);
                if client.closed() {
                    client.want_write(&mut self.work);
                }
            }
        }
    }

    /// The proxy drains: every client stops reading and closes once it owes nothing.
    pub(super) fn on_drain(&mut self) {
        if self.draining {
            return;
        }
        self.draining = true;
        self.stop_listening();
        if self.work.d.exits.handover.is_active() {
            self.hand_over_all();
            return self.release_if_empty();
        }
        for (_, client) in self.clients.iter_mut() {
            client.flags.closing = true;
            client.want_write(&mut self.work);
        }
        self.release_if_empty();
    }

    /// No client to wait for: the drain need not wait for this loop.
    fn release_if_empty(&mut self) {
        if self.clients.is_empty() {
            self.done = None;
        }
    }
}

impl<'d> LoopClient<'d> {
    /// Arms `client.idle_timeout` and `client.max_age` for a new client.
    ///
    /// Nothing is armed for a clock set to zero (off). The idle timer starts from the last
    /// activity, the age timer from the connect.
    pub(super) fn arm_timers(&self, work: &mut Work<'d>) {
        let config = &self.settings.config;
        if !config.clocks.idle.is_zero() {
            let at = self.times.last_activity + config.clocks.idle;
            work.timers.arm(at, self.token, Which::Idle);
        }
        if !config.clocks.max_age.is_zero() {
            let at = self.times.connected_at + config.clocks.max_age;
            work.timers.arm(at, self.token, Which::Age);
        }
    }

    /// One of the client's timers is due.
    ///
    /// Idle: an idle timer that fires early (there was activity since it was armed) or while
    /// replies are owed is re-armed, no sooner than a quarter of the idle timeout away, so a chatty
    /// client re-arms rarely. Age: the client is marked and closed at its next safe point. Budget
    /// and throttle timers resume a client paused for the buffer budget or a rate limit. A timer
    /// for a setting turned off by a reload does nothing.
    pub(super) fn on_timer(&mut self, which: Which, work: &mut Work<'d>) {
        let config = self.settings.config.clone();
        let now = work.now;
        match which {
            Which::Idle if !config.clocks.idle.is_zero() => {
                let due = self.times.last_activity + config.clocks.idle;
                if due > now || !self.replies.is_empty() {
                    // Re-armed from the last activity only when it fires, not on every read.
                    work.timers.arm(
                        due.max(now + config.clocks.idle / 4),
                        self.token,
                        Which::Idle,
                    );
                    return;
                }
                tracing::debug!(client = self.state.id, "closing idle client");
                self.flags.closing = true;
            }
            Which::Age if !config.clocks.max_age.is_zero() => {
                self.flags.due.aged = true;
                self.close_if_asked(work);
            }
            Which::Request => self.on_request_timer(now, work),
            Which::Budget if self.flags.budget_paused => self.want_run(work),
            Which::Throttle if self.parked.is_some() => self.want_run(work),
            _ => return,
        }
        self.want_write(work);
    }

    /// `client.request_timeout`: a request still incomplete that long closes the client.
    fn on_request_timer(&mut self, now: Instant, work: &mut Work<'d>) {
        let timeout = self.settings.config.clocks.request;
        let Some(started) = self.times.partial_since else {
            return;
        };
        if timeout.is_zero() || self.flags.closing {
            return;
        }
        if now.saturating_duration_since(started) < timeout {
            work.timers
                .arm(started + timeout, self.token, Which::Request);
            return;
        }
        tracing::debug!(
            client = self.state.id,
            "closing client: request not completed within client.request_timeout"
        );
        self.flags.closing = true;
        let reply = redcar_error(format_args!(
            "request not completed within {timeout:?} (client.request_timeout); closing"
        ));
        self.owe_error(reply, work);
    }
}
