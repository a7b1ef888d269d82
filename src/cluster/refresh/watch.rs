//! Refreshing more often while the slot map leaves out a replica the cluster knows: one that
//! failed, or restarted and is still syncing (`CLUSTER SLOTS` lists a replica only once its
//! replication offset is non-zero), or a new one the answering node still lists as a primary
//! without slots (just after the cluster was created or `CLUSTER REPLICATE`). Such a replica
//! usually serves within seconds, and until the map lists it no read is sent to it — with
//! `prefer-replica`, a frozen or dead primary then leaves its shard with no node to read from.

use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::Topology;

/// The refresh interval while a replica is left out: a replica is read from within about this
/// long of the cluster listing it again. One refresh costs a node ~30 µs of CPU (6 nodes), so
/// two a second are cheap.
const WATCH_INTERVAL: Duration = Duration::from_millis(500);

/// How long after a replica went missing the watch lasts: a replica that stays down (and is
/// never `CLUSTER FORGET`-ten) must not keep every redcar refreshing twice a second for good.
const WATCH_FOR: Duration = Duration::from_secs(60);

/// The replicas left out of the last map, and since when the newest of them is missing.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    left_out: Vec<String>,
    since: Option<Instant>,
}

impl Watch {
    /// The time until the next periodic refresh, given the map just refreshed.
    pub(crate) fn interval(
        &mut self,
        map: Option<&Topology>,
        normal: Duration,
        now: Instant,
    ) -> Duration {
        self.next(map.map_or(&[][..], Topology::left_out), normal, now)
    }

    fn next(&mut self, left_out: &[String], normal: Duration, now: Instant) -> Duration {
        if left_out.is_empty() {
            self.left_out.clear();
            self.since = None;
            return normal;
        }
        if left_out.iter().any(|id| !self.left_out.contains(id)) {
            tracing::info!(
                replicas = left_out.len(),
                interval_ms = WATCH_INTERVAL.min(normal).as_millis() as u64,
                for_s = WATCH_FOR.as_secs(),
                "the slot map leaves out replicas the cluster knows (failed, syncing, or not yet known as replicas); refreshing more often until they are in it"
            );
            self.since = Some(now);
        }
        self.left_out = left_out.to_vec();
        match self.since {
            Some(since) if now.duration_since(since) < WATCH_FOR => normal.min(WATCH_INTERVAL),
            _ => normal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NORMAL: Duration = Duration::from_secs(5);

    fn ids(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn watches_while_a_replica_is_left_out_then_gives_up() {
        let mut watch = Watch::default();
        let t0 = Instant::now();
        assert_eq!(watch.next(&[], NORMAL, t0), NORMAL);
        assert_eq!(watch.next(&ids(&["r1"]), NORMAL, t0), WATCH_INTERVAL);
        let later = t0 + Duration::from_secs(30);
        assert_eq!(watch.next(&ids(&["r1"]), NORMAL, later), WATCH_INTERVAL);
        // Still missing after WATCH_FOR: back to the normal interval.
        let much_later = t0 + WATCH_FOR;
        assert_eq!(watch.next(&ids(&["r1"]), NORMAL, much_later), NORMAL);
        // Another replica going missing starts a new watch.
        assert_eq!(
            watch.next(&ids(&["r1", "r2"]), NORMAL, much_later),
            WATCH_INTERVAL
        );
        // Back: normal at once.
        assert_eq!(watch.next(&[], NORMAL, much_later), NORMAL);
    }

    #[test]
    fn never_slower_than_the_configured_interval() {
        let mut watch = Watch::default();
        let short = Duration::from_millis(200);
        assert_eq!(watch.next(&ids(&["r1"]), short, Instant::now()), short);
    }
}
