//! Whether a node should get traffic, and how loaded it is: consecutive-failure ejection with
//! exponentially growing ejection times (ended by an active PING check), outstanding requests and
//! a latency EWMA for picking among replicas.
//!
//! Everything here is a few atomics read on the hot path (one relaxed load to ask "ejected?");
//! the rare transitions (eject, restore) take no lock either: a compare-and-swap on `ejected`
//! makes exactly one caller perform each.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;

use super::metrics::NodeSeries;
use crate::metrics::EventKind;
use crate::values::units;

/// `upstream.outlier:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct OutlierConfig {
    /// Consecutive failures (connect errors, lost connections, timeouts, `-LOADING`,
    /// `-MASTERDOWN`) that eject a node from selection; 0 turns ejection off.
    pub(crate) consecutive_failures: u32,
    /// How long the first ejection lasts; each further ejection of a replica doubles it (a
    /// primary's stays at this: [`Health::set_primary`]).
    #[serde(with = "units::duration")]
    pub(crate) base_ejection_time: Duration,
    /// Upper bound for the doubling. A node that stays healthy this long after coming back
    /// starts again from `base_ejection_time`.
    #[serde(with = "units::duration")]
    pub(crate) max_ejection_time: Duration,
    /// How often an ejected node is sent `PING` once its ejection time is over; the first
    /// `PONG` brings it back.
    #[serde(with = "units::duration")]
    pub(crate) health_check_interval: Duration,
}

impl Default for OutlierConfig {
    /// Five failures in a row, ejected for 1 s doubling up to 30 s, checked every 500 ms: a node
    /// that flaps briefly is barely touched, one that is down stops costing commands within a few
    /// failures.
    fn default() -> Self {
        OutlierConfig {
            consecutive_failures: 5,
            base_ejection_time: Duration::from_secs(1),
            max_ejection_time: Duration::from_secs(30),
            health_check_interval: Duration::from_millis(500),
        }
    }
}

/// The ejection time for the `nth` ejection in a row (1-based): base × 2^(nth-1), capped.
pub(crate) fn ejection_time(config: &OutlierConfig, nth: u32) -> Duration {
    let doublings = nth.saturating_sub(1).min(20);
    config
        .base_ejection_time
        .saturating_mul(1 << doublings)
        .min(config.max_ejection_time.max(config.base_ejection_time))
}

/// Health and load of one node, shared by its connections, the router and the health checker.
pub(crate) struct Health {
    /// The node's address, for logs and events.
    addr: Arc<str>,
    /// `upstream.outlier`, shared by every node and swapped by a reload; read on failures and
    /// restores only, never per command.
    config: Arc<ArcSwap<OutlierConfig>>,
    /// The clock origin for the millisecond timestamps below.
    origin: Instant,
    /// Failures in a row since the last success or restore.
    failures: AtomicU32,
    /// Out of selection; flipped by compare-and-swap, so exactly one caller ejects and one
    /// restores.
    ejected: AtomicBool,
    /// When the current ejection may end (ms since `origin`).
    ejected_until_ms: AtomicU64,
    /// Ejections in a row (reset once the node stays healthy for `max_ejection_time`).
    ejections: AtomicU32,
    /// When the node was last restored (ms since `origin`; 0: never): how long it stayed healthy
    /// decides whether its ejections start over.
    restored_at_ms: AtomicU64,
    /// A primary in the current slot map (set when a map is adopted): its writes have no other
    /// node to go to, so its ejections do not grow (see [`Health::set_primary`]).
    primary: AtomicBool,
    /// For a replica, its shard's primary in the adopted map: while that primary is down, this
    /// replica is health-checked every round whatever its ejection time
    /// ([`Health::due_for_check`]). Written on map adoption, read by the health checker.
    shard_primary: Mutex<Option<Arc<str>>>,
    /// Write-to-reply latency, exponentially weighted (µs); 0 until the first reply.
    ewma_us: AtomicU64,
    /// The node's series (made on first use): its in-flight gauge (commands written and not
    /// yet answered), ejections; and the event log for the status page (written on transitions
    /// only).
    series: Arc<NodeSeries>,
    /// Bumped on every ejection, so the health checker and the topology refresher wake up.
    events: Arc<watch::Sender<u64>>,
}

/// What [`Health::snapshot`] reports (admin API, error messages).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct HealthSnapshot {
    /// Out of selection now.
    pub(crate) ejected: bool,
    /// Failures in a row so far.
    pub(crate) consecutive_failures: u32,
    /// Ejections in a row (the doubling's exponent).
    pub(crate) ejections: u32,
    /// Time left in the ejection before health checks may bring the node back.
    pub(crate) ejected_for_ms: u64,
    /// The latency EWMA in microseconds; 0 before the first reply.
    pub(crate) latency_ewma_us: u64,
    /// Commands written and not yet answered.
    pub(crate) in_flight: i64,
}

impl Health {
    /// One per node, made when the registry first makes the node; `config` is the shared,
    /// reloadable `upstream.outlier`, `events` the registry's ejection signal.
    pub(crate) fn new(
        addr: Arc<str>,
        config: Arc<ArcSwap<OutlierConfig>>,
        series: Arc<NodeSeries>,
        events: Arc<watch::Sender<u64>>,
    ) -> Health {
        Health {
            addr,
            config,
            origin: Instant::now(),
            failures: AtomicU32::new(0),
            ejected: AtomicBool::new(false),
            ejected_until_ms: AtomicU64::new(0),
            ejections: AtomicU32::new(0),
            restored_at_ms: AtomicU64::new(0),
            primary: AtomicBool::new(false),
            shard_primary: Mutex::new(None),
            ewma_us: AtomicU64::new(0),
            series,
            events,
        }
    }

    /// True while the node is out of selection (the hot-path question: one relaxed load).
    #[inline]
    pub(crate) fn is_ejected(&self) -> bool {
        self.ejected.load(Ordering::Relaxed)
    }

    /// Whether the node is a primary in the adopted slot map. A primary's ejection always lasts
    /// `base_ejection_time`, however often it was ejected: doubling spares a flapping replica's
    /// reads (they have other nodes to go to), but a primary's writes have none, so every
    /// ejection past the outage is write errors for a node that answers again — a primary frozen
    /// a few times in half a minute (a fork, a VM pause) would refuse its shard's writes for 4,
    /// 8, 16 s after each freeze. It is brought back by the first `PONG` after the base time.
    pub(crate) fn set_primary(&self, on: bool) {
        if self.primary.load(Ordering::Relaxed) != on {
            self.primary.store(on, Ordering::Relaxed);
        }
    }

    /// For a replica, its shard's primary in the adopted map (`None` for a primary).
    pub(crate) fn set_shard_primary(&self, primary: Option<&Arc<str>>) {
        let mut held = self.shard_primary.lock().unwrap_or_else(|e| e.into_inner());
        if held.as_ref() != primary {
            *held = primary.cloned();
        }
    }

    /// What [`set_shard_primary`](Self::set_shard_primary) last said.
    pub(crate) fn shard_primary(&self) -> Option<Arc<str>> {
        self.shard_primary
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Ejected, or failing without being ejected yet (connects refused, commands timing out):
    /// what makes a primary's replicas worth checking at once.
    pub(crate) fn is_down(&self) -> bool {
        self.is_ejected() || self.failures.load(Ordering::Relaxed) > 0
    }

    /// A reply that was not an error arrived: the failure streak is over. Stores only when
    /// there was a streak, so the common case is a read of a shared cache line, not a write.
    #[inline]
    pub(crate) fn record_success(&self) {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
    }

    /// One failure; ejects the node when the streak reaches the threshold. Returns true for
    /// the call that ejected it.
    pub(crate) fn record_failure(&self, why: &str) -> bool {
        let config = self.config.load();
        let threshold = config.consecutive_failures;
        if threshold == 0 {
            return false;
        }
        let streak = self
            .failures
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        if streak < threshold {
            return false;
        }
        self.eject(&config, streak, why)
    }

    /// Ejects the node now, whatever its failure streak and even with `consecutive_failures: 0`:
    /// it answers, but must not serve (a replica not in sync with its primary). Health checks
    /// bring it back as for any ejection. Returns true for the call that ejected it.
    ///
    /// Not a node the adopted map names as a primary: that map is stale (a failover just demoted
    /// the node, which has not synced from its successor yet). Its connect still fails (nothing
    /// is read from it), but ejecting it would fail its shard's writes at once until the next
    /// map; not ejected, they are retried within `op_timeout`, and the failed connects count as
    /// upstream failures, which ask for that map (`cluster.failure_refresh_threshold`).
    pub(crate) fn eject_now(&self, why: &str) -> bool {
        if self.primary.load(Ordering::Relaxed) {
            tracing::info!(node = %self.addr, reason = why, "a primary of the slot map says it is a replica: not ejected, its writes wait for a fresh map");
            return false;
        }
        let streak = self.failures.load(Ordering::Relaxed).max(1);
        self.eject(&self.config.load(), streak, why)
    }

    /// Takes the node out of selection unless it is already out (exactly one caller does).
    fn eject(&self, config: &OutlierConfig, streak: u32, why: &str) -> bool {
        if self
            .ejected
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let now = self.now_ms();
        // A node that stayed healthy for `max_ejection_time` starts over from the base time.
        let restored_at = self.restored_at_ms.load(Ordering::Relaxed);
        let healthy_for = now.saturating_sub(restored_at);
        if restored_at != 0 && healthy_for >= millis(config.max_ejection_time) {
            self.ejections.store(0, Ordering::Relaxed);
        }
        let nth = self
            .ejections
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let primary = self.primary.load(Ordering::Relaxed);
        let time = ejection_time(config, if primary { 1 } else { nth });
        self.ejected_until_ms
            .store(now.saturating_add(millis(time)), Ordering::Relaxed);
        let series = self.series.get();
        series.ejection.ejections.inc();
        series.ejection.ejected.set(1);
        tracing::warn!(node = %self.addr, failures = streak, ejection = nth, ?time, last_failure = why, "node ejected");
        series.ejection.events.push(
            EventKind::NodeEjected,
            &self.addr,
            format!(
                "{streak} failure(s) in a row, last: {why}; out for {time:?} (ejection {nth}{})",
                if primary && nth > 1 {
                    ", a primary's is not doubled"
                } else {
                    ""
                }
            ),
        );
        self.events.send_modify(|n| *n = n.wrapping_add(1));
        true
    }

    /// True when the node is ejected and its ejection time is over, or, for a replica, while
    /// its shard's primary is down (`primary_down`): time for a health check. A replica's
    /// ejections double, so one ejected a few times lately may be out for many seconds exactly
    /// when its primary freezes or dies, leaving the shard's reads nowhere to go; then its first
    /// good answer brings it back, whatever its earlier ejections.
    pub(crate) fn due_for_check(&self, primary_down: bool) -> bool {
        self.is_ejected()
            && (primary_down || self.now_ms() >= self.ejected_until_ms.load(Ordering::Relaxed))
    }

    /// A health check succeeded: the node takes traffic again.
    pub(crate) fn restore(&self) {
        self.failures.store(0, Ordering::Relaxed);
        self.restored_at_ms
            .store(self.now_ms().max(1), Ordering::Relaxed);
        if self.ejected.swap(false, Ordering::AcqRel) {
            let series = self.series.get();
            series.ejection.ejected.set(0);
            tracing::info!(node = %self.addr, "node restored after a successful health check");
            series.ejection.events.push(
                EventKind::NodeRestored,
                &self.addr,
                "a health check (PING) succeeded".to_string(),
            );
        }
    }

    /// Feeds the latency EWMA with the mean latency of one read's replies (weight 1/8).
    pub(crate) fn observe_latency(&self, mean: Duration) {
        let sample = u64::try_from(mean.as_micros()).unwrap_or(u64::MAX).max(1);
        let old = self.ewma_us.load(Ordering::Relaxed);
        let new = if old == 0 {
            sample
        } else {
            old - old / 8 + sample / 8
        };
        self.ewma_us.store(new, Ordering::Relaxed);
    }

    /// Lower is better: expected wait ≈ (outstanding + 1) × latency. Nodes never measured count
    /// as fast (1 µs), so new replicas get tried.
    pub(crate) fn load_score(&self) -> u64 {
        let outstanding = u64::try_from(self.in_flight()).unwrap_or(0);
        (outstanding + 1).saturating_mul(self.ewma_us.load(Ordering::Relaxed).max(1))
    }

    /// Time left before a health check may bring the node back (zero when not ejected).
    pub(crate) fn ejected_for(&self) -> Duration {
        if !self.is_ejected() {
            return Duration::ZERO;
        }
        let until = self.ejected_until_ms.load(Ordering::Relaxed);
        Duration::from_millis(until.saturating_sub(self.now_ms()))
    }

    /// Cheap (atomic loads), but each field is read separately, so the figures may be a moment
    /// apart.
    pub(crate) fn snapshot(&self) -> HealthSnapshot {
        HealthSnapshot {
            ejected: self.is_ejected(),
            consecutive_failures: self.failures.load(Ordering::Relaxed),
            ejections: self.ejections.load(Ordering::Relaxed),
            ejected_for_ms: millis(self.ejected_for()),
            latency_ewma_us: self.ewma_us.load(Ordering::Relaxed),
            in_flight: self.in_flight(),
        }
    }

    /// Commands written and not yet answered (0 for a node never used).
    #[inline]
    fn in_flight(&self) -> i64 {
        self.series.made().map_or(0, |m| m.in_flight.get())
    }

    /// The outlier settings in force (router tests read the threshold).
    #[cfg(test)]
    pub(crate) fn config(&self) -> Arc<OutlierConfig> {
        self.config.load_full()
    }

    /// Milliseconds since `origin`: the clock of every timestamp here, so timestamps fit in one
    /// `AtomicU64`.
    fn now_ms(&self) -> u64 {
        millis(self.origin.elapsed())
    }
}

/// Milliseconds, clamped to `u64`.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
