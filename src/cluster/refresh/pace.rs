//! When the next refresh round runs and what it does: a check of the map on the periodic tick
//! (`cluster.change_check`), the map fetched whole when a MOVED reply proved it wrong, a
//! `CLUSTER INFO` check when a node is failing — and, for rounds an event asked for, a random
//! wait after a quiet spell, so a fleet of sidecars that all saw the same failover do not ask
//! the same nodes at the same instant: up to `cluster.refresh_jitter` for a MOVED (the command
//! followed the redirect; nothing waits for the map), up to [`CHECK_GAP`] for a check (commands
//! retrying on the failing node wait for it), none when a command waits for the map.
//!
//! The jitter applies to the first event of a burst only. While the trouble lasts (a primary
//! failing, ejected, being replaced), later requests follow each other at the node-trouble
//! cadence ([`CHECK_GAP`], and the ejection watch's `health_check_interval`) without new
//! jitter: each sidecar keeps the random phase its first wait gave it, and finds the promoted
//! replica within one cadence of the promotion rather than one cadence plus a jitter.

use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::watch::Watch;
use crate::cluster::change_check::Probe;
use crate::cluster::state::Want;
use crate::cluster::{ClusterConfig, Topology};

/// The least time between two checks asked for by failures (a client hammering a dead primary
/// makes failures by the hundred a second, and a fleet's checks must stay a trickle), and the
/// most such a check waits for its jitter: commands retrying on a failing node wait for what it
/// finds (within `router.op_timeout`), and a `CLUSTER INFO` check costs a node so little that
/// a fleet's checks need less spreading than its fetches.
const CHECK_GAP: Duration = Duration::from_millis(250);

/// How long without an event-triggered round makes the next event the start of a new burst
/// (jittered). Longer than the cadence of the requests while a node is in trouble (the
/// ejection watch asks every `health_check_interval`, 500 ms by default), so those keep their
/// phase.
const QUIET: Duration = Duration::from_secs(2);

/// What a round does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Due {
    /// Fetch the map whole.
    Full,
    /// Ask the map's node for this fingerprint first; fetch the map only if it changed.
    Check(Probe),
}

/// The rounds asked for by events.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// When the last round an event asked for was due.
    last_event: Option<Instant>,
}

impl Pace {
    /// When the round after one that started at `last` may run. `want` is what an event asked
    /// for (`None`: the periodic tick); `map` the current one (no jitter while there is no
    /// complete map: every command waits for it).
    pub(crate) fn next_at(
        &mut self,
        last: Instant,
        want: Option<Want>,
        config: &ClusterConfig,
        map: Option<&Topology>,
        now: Instant,
    ) -> Instant {
        let gap = match want {
            Some(Want::Check) => config.refresh_min_gap.max(CHECK_GAP),
            _ => config.refresh_min_gap,
        };
        let mut at = last + gap;
        if want.is_none() || !map.is_some_and(Topology::is_complete) {
            return at;
        }
        let jitter = match want {
            Some(Want::Check) => config.refresh_jitter.min(CHECK_GAP),
            Some(Want::Fetch) => config.refresh_jitter,
            _ => Duration::ZERO,
        };
        let jitter = jitter.min(config.refresh_interval);
        let quiet = self
            .last_event
            .is_none_or(|t| now.saturating_duration_since(t) > QUIET);
        if quiet && !jitter.is_zero() {
            let wait = rand::rng().random_range(Duration::ZERO..=jitter);
            at = at.max(now + wait);
        }
        self.last_event = Some(at.max(now));
        at
    }
}

/// What an event's request calls for, given the map: a check by `CLUSTER INFO` when a node is
/// failing and the map has that fingerprint, the map whole otherwise.
pub(crate) fn for_event(want: Want, map: Option<&Topology>) -> Due {
    match want {
        Want::Check if map.is_some_and(|m| m.print().info.is_some()) => Due::Check(Probe::Info),
        Want::Check | Want::Fetch | Want::FetchNow => Due::Full,
    }
}

/// How often the map's node is asked (`CLUSTER INFO`) while a primary of the map is ejected:
/// the promoted replica is found within this of its promotion, plus the check and the fetch.
/// A check costs a node ~15 µs, so even a fleet's four a second each stay a trickle.
pub(crate) const TROUBLE_POLL: Duration = Duration::from_millis(250);

/// The periodic tick: when it comes and what it does.
#[derive(Debug)]
pub(crate) struct Ticks {
    watch: Watch,
    /// When the map was last fetched whole.
    last_fetch: Instant,
}

impl Ticks {
    pub(crate) fn new(now: Instant) -> Ticks {
        Ticks {
            watch: Watch::default(),
            last_fetch: now,
        }
    }

    /// A round fetched the map at `at`.
    pub(crate) fn fetched(&mut self, at: Instant) {
        self.last_fetch = at;
    }

    /// How long until the next tick, and what it calls for, given the map just refreshed (or
    /// checked) at `now`:
    /// - while the map leaves out a replica the cluster knows and reads go to replicas, the map
    ///   whole every 500 ms (`watch`: `CLUSTER NODES` does not show when a replica has synced);
    /// - while a primary is ejected, a `CLUSTER INFO` check every [`TROUBLE_POLL`] (it changes
    ///   when the cluster fails the node and promotes a replica), and the map whole once every
    ///   `refresh_interval` (a node back at another address looks the same to `CLUSTER INFO`);
    /// - otherwise the check `cluster.change_check` names every `refresh_interval` (the map
    ///   whole with `off`).
    pub(crate) fn next(
        &mut self,
        config: &ClusterConfig,
        map: Option<&Topology>,
        reads_replicas: bool,
        now: Instant,
    ) -> (Duration, Due) {
        let normal = config.refresh_interval;
        let watched = map.filter(|_| reads_replicas);
        let interval = self.watch.interval(watched, normal, now);
        let Some(map) = map else {
            return (interval, Due::Full);
        };
        if interval < normal {
            return (interval, Due::Full);
        }
        let ejected = map.shards().iter().any(|s| s.primary.is_ejected());
        if ejected {
            let interval = normal.min(TROUBLE_POLL);
            let fetch_due = (now + interval).saturating_duration_since(self.last_fetch) >= normal;
            let due = match map.print().info {
                Some(_) if !fetch_due => Due::Check(Probe::Info),
                _ => Due::Full,
            };
            return (interval, due);
        }
        let due = Probe::periodic(config.change_check).map_or(Due::Full, Due::Check);
        (normal, due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(jitter_ms: u64) -> ClusterConfig {
        ClusterConfig {
            refresh_jitter: Duration::from_millis(jitter_ms),
            ..ClusterConfig::default()
        }
    }

    fn complete_map() -> Topology {
        let (upstreams, _) = crate::upstream::Upstreams::for_tests(false);
        Topology::single_shard("127.0.0.1:1", &[], &upstreams, "127.0.0.1:1".into())
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_event_after_a_quiet_spell_waits_up_to_the_jitter_and_later_ones_do_not() {
        let map = complete_map();
        let config = config(1000);
        let mut pace = Pace::default();
        let t0 = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..200 {
            let mut fresh = Pace::default();
            let at = fresh.next_at(t0, Some(Want::Fetch), &config, Some(&map), t0);
            waits.push(at - t0);
        }
        assert!(waits.iter().all(|w| *w <= Duration::from_secs(1)));
        assert!(waits.iter().any(|w| *w < Duration::from_millis(300)));
        assert!(
            waits.iter().any(|w| *w > Duration::from_millis(700)),
            "spread over the second"
        );
        let first = pace.next_at(t0, Some(Want::Check), &config, Some(&map), t0);
        assert!(first <= t0 + CHECK_GAP, "a check's jitter is short");
        // The trouble goes on: the next check follows at the cadence, without a new jitter.
        let later = first + Duration::from_millis(400);
        let next = pace.next_at(first, Some(Want::Check), &config, Some(&map), later);
        assert_eq!(next, first + CHECK_GAP);
        // A MOVED after a quiet spell is jittered again.
        let quiet = later + QUIET + Duration::from_millis(1);
        let again = pace.next_at(later, Some(Want::Fetch), &config, Some(&map), quiet);
        assert!(again >= quiet && again <= quiet + Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn no_jitter_for_the_periodic_tick_without_a_complete_map_or_when_off() {
        let map = complete_map();
        let t0 = Instant::now();
        let gap = ClusterConfig::default().refresh_min_gap;
        let mut pace = Pace::default();
        assert_eq!(
            pace.next_at(t0, None, &config(1000), Some(&map), t0),
            t0 + gap
        );
        assert_eq!(
            pace.next_at(t0, Some(Want::Fetch), &config(1000), None, t0),
            t0 + gap
        );
        let mut pace = Pace::default();
        assert_eq!(
            pace.next_at(t0, Some(Want::Fetch), &config(0), Some(&map), t0),
            t0 + gap
        );
    }

    #[tokio::test]
    async fn events_and_ticks_pick_what_they_ask() {
        let map = complete_map();
        // A single-shard map carries no fingerprint: everything is fetched whole.
        assert_eq!(for_event(Want::Check, Some(&map)), Due::Full);
        let printed = complete_map().with_print(crate::cluster::change_check::Print {
            digest: Some("d".into()),
            info: Some("i".into()),
        });
        assert_eq!(
            for_event(Want::Check, Some(&printed)),
            Due::Check(Probe::Info)
        );
        assert_eq!(for_event(Want::Fetch, Some(&printed)), Due::Full);
        let config = ClusterConfig::default();
        let now = Instant::now();
        let mut ticks = Ticks::new(now);
        let five = config.refresh_interval;
        assert_eq!(ticks.next(&config, None, false, now), (five, Due::Full));
        let digest = (five, Due::Check(Probe::Digest));
        assert_eq!(ticks.next(&config, Some(&printed), false, now), digest);
        let off = ClusterConfig {
            change_check: crate::cluster::config::ChangeCheck::Off,
            ..ClusterConfig::default()
        };
        assert_eq!(
            ticks.next(&off, Some(&printed), false, now),
            (five, Due::Full)
        );
    }
}
