//! What the rest of redcar sees of the cluster: the current slot-map snapshot, readiness, and
//! the ways to ask the refresher for a fresher map.
//!
//! One per backend, shared (in an `Arc`) by the router, the refresher, the admin pages and every
//! session. What holds: readers never lock: the map is an `ArcSwapOption` loaded once per command,
//! the counters are atomics, and asking for a refresh is a `Notify` plus an atomic max, so a storm
//! of MOVED replies costs the command path nothing and wakes the refresher once. Readiness is
//! latched: once a complete map was seen the backend stays ready, since a later partial map is
//! refused while a complete one is current. The version only increases, so a waiter that saw
//! version N and sleeps until it changes cannot miss an adoption.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::{watch, Notify};

use super::safety::KnownEpochs;
use super::{ClusterConfig, MigratingSlots, Topology};

/// The current snapshot and a way to ask for a fresher one.
pub(crate) struct ClusterState {
    /// The adopted map; `None` until the first one.
    topology: ArcSwapOption<Topology>,
    /// Wakes the refresher early; repeated requests before it runs coalesce into one refresh.
    refresh_wanted: Notify,
    /// What the requests since the refresher last looked want: 0 nothing, else a [`Want`] (the
    /// most any of them wanted).
    wanted: AtomicU8,
    /// Latched once a map covering all 16384 slots has been seen (readiness).
    ready: AtomicBool,
    /// Bumped on every adopted snapshot, so waiters can sleep until the map changes.
    version: watch::Sender<u64>,
    /// MOVED replies since the last refresh (`cluster.redirect_refresh_threshold`).
    redirects: EventCount,
    /// Upstream failures since the last refresh (`cluster.failure_refresh_threshold`).
    failures: EventCount,
    /// Why the last query for a map failed, until a map is adopted: while none ever was,
    /// clients are told this (a TLS or AUTH problem, say) rather than only "slot not served".
    refresh_error: ArcSwapOption<String>,
    /// `cluster:` settings; a reload swaps them.
    config: ArcSwap<ClusterConfig>,
    /// Each slot's last known owner and config epoch, kept across maps (the refresher's stale-map
    /// rule; `safety.rs`).
    known_epochs: ArcSwap<KnownEpochs>,
    /// Slots seen migrating: their reads go to the primary (`migrating.rs`).
    migrating: MigratingSlots,
}

/// What a request for a refresh asks of the refresher; requests merge into the greatest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Want {
    /// Check whether the map changed, fetch it if so (after a short jitter).
    Check = 1,
    /// Fetch the map whole (after a jitter).
    Fetch = 2,
    /// Fetch the map whole without a jitter: a command waits for it.
    FetchNow = 3,
}

/// Counts events until `threshold` of them ask for a refresh; 0 means never.
struct EventCount {
    /// 247 count: AtomicU32
    /// Events since the last refresh.
    count: AtomicU32,
    /// Atomic so a reload can change it.
    threshold: AtomicU32,
}

impl ClusterState {
    /// A state with the default refresh thresholds (tests and tools).
    pub(crate) fn new() -> ClusterState {
        ClusterState::with_config(&ClusterConfig::default())
    }

    /// A state whose `note_*` thresholds come from `config`.
    pub(crate) fn with_config(config: &ClusterConfig) -> ClusterState {
        ClusterState {
            topology: ArcSwapOption::empty(),
            refresh_wanted: Notify::new(),
            wanted: AtomicU8::new(0),
            ready: AtomicBool::new(false),
            version: watch::channel(0).0,
            redirects: EventCount::new(config.redirect_refresh_threshold),
            failures: EventCount::new(config.failure_refresh_threshold),
            refresh_error: ArcSwapOption::empty(),
            config: ArcSwap::from_pointee(config.clone()),
            known_epochs: ArcSwap::from_pointee(KnownEpochs::default()),
            migrating: MigratingSlots::new(),
        }
    }

    /// `cluster:` as it is now (read by the refresher once per refresh).
    pub(crate) fn config(&self) -> Arc<ClusterConfig> {
        self.config.load_full()
    }

    /// Reloaded `cluster:` settings: intervals and timeouts from the next refresh, thresholds
    /// from the next event.
    pub(crate) fn reconfigure(&self, config: ClusterConfig) {
        self.redirects
            .set_threshold(config.redirect_refresh_threshold);
        self.failures
            .set_threshold(config.failure_refresh_threshold);
        self.config.store(Arc::new(config));
    }

    /// The slots seen migrating (marked by ASK replies and refreshes).
    #[inline]
    pub(crate) fn migrating(&self) -> &MigratingSlots {
        &self.migrating
    }

    /// The current snapshot (lock-free).
    pub(crate) fn topology(&self) -> Option<Arc<Topology>> {
        self.topology.load_full()
    }

    /// The current snapshot for a short look (routing one command): no reference count is
    /// touched, so threads routing at once do not contend on the snapshot's counter.
    #[inline]
    pub(crate) fn topology_now(&self) -> arc_swap::Guard<Option<Arc<Topology>>> {
        self.topology.load()
    }

    /// Asks the refresher to fetch the map whole as soon as `refresh_min_gap` allows: something
    /// showed it is wrong and a command waits for the fresh one (a slot without an owner, a
    /// demoted primary's `READONLY`, a shard channel moved).
    pub(crate) fn request_refresh(&self) {
        self.want(Want::FetchNow);
    }

    /// Asks the refresher to check soon whether the map changed (`CLUSTER INFO` of the node it
    /// came from), and to fetch it only if so: a node is failing, which may or may not be a
    /// failover. Called by failures and while a primary is ejected.
    pub(crate) fn request_check(&self) {
        self.want(Want::Check);
    }

    fn want(&self, want: Want) {
        self.wanted.fetch_max(want as u8, Ordering::AcqRel);
        self.refresh_wanted.notify_one();
    }

    /// Counts one MOVED reply; every `redirect_refresh_threshold`-th asks for the map. The
    /// command itself follows the redirect, so nothing waits for the map: after a quiet spell
    /// the refresher first waits a random time up to `refresh_jitter` (`refresh/pace.rs`), so a
    /// fleet of sidecars that all met the same MOVED do not all ask at once.
    pub(crate) fn note_redirect(&self) {
        if self.redirects.note() {
            self.want(Want::Fetch);
        }
    }

    /// Counts one upstream failure (connect failed, connection lost); every
    /// `failure_refresh_threshold`-th asks for a check.
    pub(crate) fn note_failure(&self) {
        if self.failures.note() {
            self.request_check();
        }
    }

    /// True once a complete slot map has been known.
    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Resolves when a new snapshot is adopted (or immediately if one was adopted since `seen`).
    pub(crate) async fn changed_since(&self, seen: u64) -> u64 {
        let mut rx = self.version.subscribe();
        let result = rx.wait_for(|v| *v != seen).await;
        result.map_or(seen, |v| *v)
    }

    /// The number of snapshots adopted so far.
    pub(crate) fn version(&self) -> u64 {
        *self.version.borrow()
    }

    /// Resolves when someone asked for a refresh, with the most any request since wanted (the
    /// refresher, or another topology source such as the Sentinel follower, waits on it).
    pub(crate) async fn refresh_wanted(&self) -> Want {
        loop {
            if let Some(want) = self.take_wanted() {
                return want;
            }
            self.refresh_wanted.notified().await;
        }
    }

    /// What was asked for since the last look, if anything (without waiting).
    pub(crate) fn take_wanted(&self) -> Option<Want> {
        match self.wanted.swap(0, Ordering::AcqRel) {
            0 => None,
            1 => Some(Want::Check),
            2 => Some(Want::Fetch),
            _ => Some(Want::FetchNow),
        }
    }

    /// Each slot's last known owner and epoch (read once per refresh).
    pub(super) fn known_epochs(&self) -> Arc<KnownEpochs> {
        self.known_epochs.load_full()
    }

    /// Remembers the owners and epochs of a map the refresher adopts.
    pub(super) fn remember_epochs(&self, map: &Topology) {
        let next = self.known_epochs.load().updated(map);
        self.known_epochs.store(Arc::new(next));
    }

    /// A refresh is starting: what was counted so far is answered by it.
    pub(super) fn refresh_started(&self) {
        self.redirects.reset();
        self.failures.reset();
    }

    /// Why the last failed query for a map failed (`node: reason`), if none succeeded since.
    pub(crate) fn refresh_error(&self) -> Option<Arc<String>> {
        self.refresh_error.load_full()
    }

    /// Records why the last query for a map failed (shown to clients while no map is known).
    pub(crate) fn note_refresh_error(&self, error: String) {
        self.refresh_error.store(Some(Arc::new(error)));
    }

    /// Installs a new snapshot. The refresher calls it after its safety checks; other topology
    /// sources (Sentinel, a static standalone node) call it directly.
    pub(crate) fn adopt(&self, topology: Topology) {
        self.refresh_error.store(None);
        if topology.is_complete() {
            self.ready.store(true, Ordering::Release);
        }
        self.topology.store(Some(Arc::new(topology)));
        self.version.send_modify(|v| *v += 1);
    }
}

impl Default for ClusterState {
    fn default() -> Self {
        Self::new()
    }
}

impl EventCount {
    fn new(threshold: u32) -> EventCount {
        EventCount {
            count: AtomicU32::new(0),
            threshold: AtomicU32::new(threshold),
        }
    }

    fn set_threshold(&self, threshold: u32) {
        self.threshold.store(threshold, Ordering::Relaxed);
    }

    /// Counts one event; true when it is the `threshold`-th, and the count starts again.
    fn note(&self) -> bool {
        let threshold = self.threshold.load(Ordering::Relaxed);
        if threshold == 0 {
            return false;
        }
        // One atomic step, so of many concurrent callers exactly one sees the threshold reached.
        let step = |n: u32| Some(if n + 1 >= threshold { 0 } else { n + 1 });
        let (Ok(before) | Err(before)) =
            self.count
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, step);
        before + 1 >= threshold
    }

    fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(threshold: u32, events: usize) -> Vec<bool> {
        let count = EventCount::new(threshold);
        (0..events).map(|_| count.note()).collect()
    }

    #[test]
    fn every_threshold_th_event_asks_and_the_count_restarts() {
        assert_eq!(counts(1, 3), [true, true, true]);
        assert_eq!(
            counts(3, 7),
            [false, false, true, false, false, true, false]
        );
    }

    #[test]
    fn threshold_zero_never_asks() {
        assert_eq!(counts(0, 5), [false; 5]);
    }

    #[test]
    fn a_refresh_restarts_the_count() {
        let count = EventCount::new(2);
        assert!(!count.note());
        count.reset();
        assert!(!count.note());
        assert!(count.note());
    }

    #[tokio::test]
    async fn note_failure_wakes_the_refresher_at_the_threshold() {
        let config = ClusterConfig {
            failure_refresh_threshold: 2,
            redirect_refresh_threshold: 0,
            ..ClusterConfig::default()
        };
        let state = ClusterState::with_config(&config);
        let woken = || async {
            tokio::time::timeout(std::time::Duration::from_millis(20), state.refresh_wanted()).await
                == Ok(Want::Check)
        };
        state.note_redirect();
        state.note_failure();
        assert!(!woken().await, "below both thresholds");
        state.note_failure();
        assert!(woken().await, "second failure reaches the threshold");
    }

    #[tokio::test]
    async fn requests_coalesce_into_the_most_any_wanted() {
        let state = ClusterState::new();
        assert_eq!(state.take_wanted(), None);
        state.request_check();
        state.note_redirect();
        state.request_check();
        assert_eq!(state.refresh_wanted().await, Want::Fetch);
        state.note_redirect();
        state.request_refresh();
        assert_eq!(state.take_wanted(), Some(Want::FetchNow));
        assert_eq!(state.take_wanted(), None);
        state.request_check();
        assert_eq!(state.take_wanted(), Some(Want::Check));
    }
}
