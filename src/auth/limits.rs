//! Per-user rates: token buckets for commands and bytes, one a client and one shared by all the
//! user's clients, and what a session does when one is empty ([`Admit`]).
//!
//! A command takes one token from each commands bucket when it starts; bytes are taken as the
//! session reads requests and writes replies, and may take a bucket below zero (a large reply
//! is never cut): the debt is paid back, at the rate, before the next command starts. So over
//! any stretch longer than the burst the client gets the rate, whatever its pipeline depth.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::config::{RateConfig, WhenOver};

/// What the session does with the client's next command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Start it.
    Now,
    /// Over a rate (`when_over: slow`): start it no sooner than this from now, and read no more
    /// from the client meanwhile.
    After(Duration),
    /// Over a rate (`when_over: fail`): answer it with this error instead of running it.
    Refuse(Bytes),
}

/// A rate's settings, resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Rate {
    /// Commands per second and the bucket's size (0: no command limit).
    commands: f64,
    /// The commands bucket's size: `burst`, or a tenth of a second's worth (at least one) when
    /// unset.
    burst: f64,
    /// Bytes per second (0: no byte limit); the bucket holds a tenth of a second's worth.
    bytes: f64,
}

impl Rate {
    /// An unset burst becomes a tenth of a second of the rate, at least one command, so a rate set
    /// alone still admits a command at a time smoothly.
    pub(crate) fn new(config: &RateConfig) -> Rate {
        let commands = f64::from(config.commands_per_second);
        let burst = match config.burst {
            0 => (commands / 10.0).max(1.0),
            burst => f64::from(burst),
        };
        Rate {
            commands,
            burst,
            bytes: config.bytes_per_second as f64,
        }
    }

    /// Limits nothing.
    pub(crate) fn is_off(&self) -> bool {
        self.commands == 0.0 && self.bytes == 0.0
    }
}

/// The limits of one user, resolved from `auth.users[].limits`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Limits {
    /// `limits.max_connections`: sessions logged in as the user at once (0: no limit).
    pub(crate) max_connections: u32,
    /// The rate shared by every client of the user.
    pub(crate) per_user: Rate,
    /// The rate each client of the user gets on its own.
    pub(crate) per_client: Rate,
    /// What to do with a command over a rate: hold it back (`slow`) or refuse it (`fail`).
    pub(crate) when_over: WhenOver,
}

impl Limits {
    /// A byte rate is set (reads and writes are counted).
    pub(crate) fn counts_bytes(&self) -> bool {
        self.per_user.bytes > 0.0 || self.per_client.bytes > 0.0
    }
}

/// One bucket: `level` tokens as of `at`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Tokens now; may be negative (debt from a large read or write).
    level: f64,
    /// When `level` was last brought up to date.
    at: Instant,
}

impl Bucket {
    /// A bucket starts full, so a new client gets its burst at once.
    fn full(size: f64, now: Instant) -> Bucket {
        Bucket {
            level: size,
            at: now,
        }
    }

    /// Adds what `rate` gave since the last look, up to `size`.
    fn refill(&mut self, now: Instant, rate: f64, size: f64) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.level = (self.level + elapsed * rate).min(size);
        self.at = now;
    }

    /// How long until the level reaches `need` at `rate`.
    ///
    /// Capped at an hour, so a nonsensical rate (or a huge debt) cannot produce an unbounded sleep.
    fn wait_for(&self, need: f64, rate: f64) -> Duration {
        if self.level >= need {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(((need - self.level) / rate).min(3600.0))
    }
}

/// A commands bucket and a bytes bucket for one [`Rate`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Buckets {
    /// One token per command.
    commands: Bucket,
    /// One token per byte read or written.
    bytes: Bucket,
}

impl Buckets {
    /// Both buckets start full.
    pub(crate) fn new(rate: &Rate, now: Instant) -> Buckets {
        Buckets {
            commands: Bucket::full(rate.burst, now),
            bytes: Bucket::full(rate.bytes / 10.0, now),
        }
    }

    /// Takes a command's token, into debt if need be, and says how long until the debt is
    /// paid back (zero: the command may start now). Taking it at once, rather than looking
    /// again when the wait is over, makes the clients waiting on one bucket queue up behind
    /// each other: each wakes once, when its own token is due, instead of all of them waking
    /// at every refill and all but a few finding it empty again.
    fn reserve(&mut self, rate: &Rate, now: Instant) -> Duration {
        let mut wait = Duration::ZERO;
        if rate.commands > 0.0 {
            self.commands.refill(now, rate.commands, rate.burst);
            self.commands.level -= 1.0;
            wait = self.commands.wait_for(0.0, rate.commands);
        }
        if rate.bytes > 0.0 {
            self.bytes.refill(now, rate.bytes, rate.bytes / 10.0);
            wait = wait.max(self.bytes.wait_for(0.0, rate.bytes));
        }
        wait
    }

    /// Gives back what [`Buckets::reserve`] took (a refused command).
    fn refund(&mut self, rate: &Rate) {
        if rate.commands > 0.0 {
            self.commands.level += 1.0;
        }
    }

    fn take_bytes(&mut self, rate: &Rate, bytes: usize) {
        if rate.bytes > 0.0 {
            self.bytes.level -= bytes as f64;
        }
    }
}

/// Buckets several sessions share (one user's), behind a lock taken once per command of that
/// user and once per read and write: only users with a per-user rate pay it.
#[derive(Debug)]
pub(crate) struct SharedBuckets(Mutex<Option<Buckets>>);

impl Default for SharedBuckets {
    fn default() -> Self {
        SharedBuckets(Mutex::new(None))
    }
}

impl SharedBuckets {
    fn with<T>(&self, rate: &Rate, now: Instant, f: impl FnOnce(&mut Buckets) -> T) -> T {
        let mut buckets = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(buckets.get_or_insert_with(|| Buckets::new(rate, now)))
    }
}

/// The rate state one client carries: its own buckets (made on first use), and the command it
/// waits with.
#[derive(Debug, Default)]
pub(crate) struct ClientRates {
    own: Option<Buckets>,
    waiting: Option<HeldBack>,
}

/// A command held back (`when_over: slow`): when it may start, and the tokens it took.
#[derive(Clone, Copy, Debug)]
struct HeldBack {
    until: Instant,
    /// Its token of the user's bucket is taken too (otherwise only the client's own).
    user_paid: bool,
}

impl ClientRates {
    /// Whether the next command may start now. Its tokens are taken when it is first looked
    /// at, once: over a rate (`slow`) it waits for them (see [`Buckets::reserve`]), and a look
    /// before its time (the client had another event meanwhile) takes nothing more. The
    /// client's own buckets come first: a client over its own rate takes nothing from the
    /// user's until its own token is due. `fail` gives back what the look took and refuses.
    pub(crate) fn admit(
        &mut self,
        limits: &Limits,
        shared: &SharedBuckets,
        now: Instant,
        refusal: impl FnOnce() -> Bytes,
    ) -> Admit {
        let (client, user) = (&limits.per_client, &limits.per_user);
        let fail = limits.when_over == WhenOver::Fail;
        let (mut user_paid, mut took_own) = (false, false);
        match self.waiting.take() {
            Some(w) if now < w.until => {
                self.waiting = Some(w);
                return Admit::After(w.until.saturating_duration_since(now));
            }
            Some(w) => user_paid = w.user_paid,
            None if !client.is_off() => {
                let own = self.own.get_or_insert_with(|| Buckets::new(client, now));
                let wait = own.reserve(client, now);
                if !wait.is_zero() && fail {
                    own.refund(client);
                    return Admit::Refuse(refusal());
                }
                if !wait.is_zero() {
                    return self.hold(now, wait, false);
                }
                took_own = true;
            }
            None => {}
        }
        if !user.is_off() && !user_paid {
            let wait = shared.with(user, now, |b| {
                let wait = b.reserve(user, now);
                if !wait.is_zero() && fail {
                    b.refund(user);
                }
                wait
            });
            if !wait.is_zero() && fail {
                if let (Some(own), true) = (&mut self.own, took_own) {
                    own.refund(client);
                }
                return Admit::Refuse(refusal());
            }
            if !wait.is_zero() {
                return self.hold(now, wait, true);
            }
        }
        Admit::Now
    }

    /// Whether the client's next command waits for its tokens already.
    pub(crate) fn is_waiting(&self) -> bool {
        self.waiting.is_some()
    }

    /// Over a rate (`slow`): the command waits `wait` (at least a millisecond) holding its
    /// tokens.
    fn hold(&mut self, now: Instant, wait: Duration, user_paid: bool) -> Admit {
        let wait = wait.max(Duration::from_millis(1));
        self.waiting = Some(HeldBack {
            until: now + wait,
            user_paid,
        });
        Admit::After(wait)
    }

    /// Bytes read from or written to the client.
    pub(crate) fn take_bytes(
        &mut self,
        limits: &Limits,
        shared: &SharedBuckets,
        now: Instant,
        bytes: usize,
    ) {
        if limits.per_client.bytes > 0.0 {
            let own = self
                .own
                .get_or_insert_with(|| Buckets::new(&limits.per_client, now));
            own.take_bytes(&limits.per_client, bytes);
        }
        if limits.per_user.bytes > 0.0 {
            shared.with(&limits.per_user, now, |b| {
                b.take_bytes(&limits.per_user, bytes)
            });
        }
    }
}

#[cfg(test)]
#[path = "limits_tests.rs"]
mod tests;
