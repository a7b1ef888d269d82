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
    burst: f64,
    /// Bytes per second (0: no byte limit); the bucket holds a tenth of a second's worth.
    bytes: f64,
}

impl Rate {
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
    pub(crate) max_connections: u32,
    pub(crate) per_user: Rate,
    pub(crate) per_client: Rate,
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
    level: f64,
    at: Instant,
}

impl Bucket {
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
    commands: Bucket,
    bytes: Bucket,
}

impl Buckets {
    pub(crate) fn new(rate: &Rate, now: Instant) -> Buckets {
        Buckets {
            commands: Bucket::full(rate.burst, now),
            bytes: Bucket::full(rate.bytes / 10.0, now),
        }
    }

    /// How long until a command may start (zero: now).
    fn wait(&mut self, rate: &Rate, now: Instant) -> Duration {
        let mut wait = Duration::ZERO;
        if rate.commands > 0.0 {
            self.commands.refill(now, rate.commands, rate.burst);
            wait = wait.max(self.commands.wait_for(1.0, rate.commands));
        }
        if rate.bytes > 0.0 {
            self.bytes.refill(now, rate.bytes, rate.bytes / 10.0);
            wait = wait.max(self.bytes.wait_for(0.0, rate.bytes));
        }
        wait
    }

    fn take_command(&mut self, rate: &Rate) {
        if rate.commands > 0.0 {
            self.commands.level -= 1.0;
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

/// The rate state one client carries: its own buckets (made on first use).
#[derive(Debug, Default)]
pub(crate) struct ClientRates {
    own: Option<Buckets>,
}

impl ClientRates {
    /// Whether the next command may start now (taking its tokens when it may). The client's
    /// own buckets are looked at first: a client over its own rate takes nothing from the
    /// user's.
    pub(crate) fn admit(
        &mut self,
        limits: &Limits,
        shared: &SharedBuckets,
        now: Instant,
        refusal: impl FnOnce() -> Bytes,
    ) -> Admit {
        let (client, user) = (&limits.per_client, &limits.per_user);
        if !client.is_off() {
            let own = self.own.get_or_insert_with(|| Buckets::new(client, now));
            let wait = own.wait(client, now);
            if !wait.is_zero() {
                return self.over(limits, wait, refusal);
            }
        }
        if !user.is_off() {
            let wait = shared.with(user, now, |b| {
                let wait = b.wait(user, now);
                if wait.is_zero() {
                    b.take_command(user);
                }
                wait
            });
            if !wait.is_zero() {
                return self.over(limits, wait, refusal);
            }
        }
        if let Some(own) = &mut self.own {
            own.take_command(client);
        }
        Admit::Now
    }

    fn over(&self, limits: &Limits, wait: Duration, refusal: impl FnOnce() -> Bytes) -> Admit {
        match limits.when_over {
            WhenOver::Slow => Admit::After(wait.max(Duration::from_millis(1))),
            WhenOver::Fail => Admit::Refuse(refusal()),
        }
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
