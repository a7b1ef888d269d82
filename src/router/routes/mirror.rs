//! Request mirroring: a copy of a route's command queued on a second backend, whose reply is
//! counted and dropped. The client never waits for it and never sees its errors.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::{MirrorCounters, RouteTarget};
use crate::upstream::Lane;

/// `routes[].mirror`, ready to use.
pub(crate) struct Mirror {
    /// The backend the copies go to.
    pub(crate) target: Arc<RouteTarget>,
    /// 0 to 100.
    percent: u64,
    /// Copy reads as well as writes.
    reads: bool,
    /// Copies awaiting a reply at most; past it copies are dropped (counted) rather than queued.
    max_in_flight: usize,
    /// Copies awaiting a reply, shared with their watcher tasks (the bound on what a slow
    /// mirror can hold).
    in_flight: Arc<AtomicUsize>,
    /// Commands seen; picks which are copied without a random number per command.
    seen: AtomicU64,
    /// Copies sent, failed and dropped.
    counters: MirrorCounters,
}

impl Mirror {
    pub(crate) fn new(
        target: Arc<RouteTarget>,
        percent: u32,
        reads: bool,
        max_in_flight: usize,
        counters: MirrorCounters,
    ) -> Mirror {
        Mirror {
            target,
            percent: u64::from(percent.min(100)),
            reads,
            max_in_flight,
            in_flight: Arc::new(AtomicUsize::new(0)),
            seen: AtomicU64::new(0),
            counters,
        }
    }

    /// True when this command is to be copied: writes (and reads if asked), `percent` of them,
    /// spread evenly (command n is copied when `n·percent/100` steps up).
    pub(in crate::router) fn wants(&self, write: bool) -> bool {
        if !write && !self.reads {
            return false;
        }
        match self.percent {
            0 => false,
            100.. => true,
            percent => {
                let n = self.seen.fetch_add(1, Ordering::Relaxed);
                (n + 1) * percent / 100 != n * percent / 100
            }
        }
    }

    /// Queues `payload` on the mirror's node for `slot` (its primary) and forgets it: a task
    /// counts the outcome. Dropped (and counted) when the mirror has no map, its node is
    /// ejected, or `max_in_flight` copies are outstanding.
    pub(in crate::router) fn send(
        &self,
        payload: Bytes,
        slot: Option<u16>,
        lane: Lane,
        timeout: Duration,
    ) {
        let node = self.target.state.topology().and_then(|topology| {
            let shard = match slot {
                Some(slot) => topology.shard(slot),
                None => topology.shards().first(),
            }?;
            (!shard.primary.is_ejected()).then(|| shard.primary.clone())
        });
        let Some(node) = node else {
            self.counters.dropped.inc();
            return;
        };
        if self.in_flight.fetch_add(1, Ordering::Relaxed) >= self.max_in_flight {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.counters.dropped.inc();
            return;
        }
        self.counters.sent.inc();
        let reply = node.send(payload, false, lane);
        let in_flight = self.in_flight.clone();
        let errors = self.counters.errors.clone();
        tokio::spawn(async move {
            let ok = matches!(
                tokio::time::timeout(timeout, reply).await,
                Ok(Ok(reply)) if !reply.starts_with(b"-")
            );
            in_flight.fetch_sub(1, Ordering::Relaxed);
            if !ok {
                errors.inc();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterState;

    fn mirror(percent: u32, reads: bool) -> Mirror {
        let target = Arc::new(RouteTarget {
            backend: Arc::from("m"),
            state: Arc::new(ClusterState::new()),
            read_policy: None,
            single_node: false,
        });
        Mirror::new(target, percent, reads, 10, MirrorCounters::default())
    }

    fn copied(mirror: &Mirror, commands: usize, write: bool) -> usize {
        (0..commands).filter(|_| mirror.wants(write)).count()
    }

    #[test]
    fn percent_picks_that_share_of_writes_evenly() {
        assert_eq!(copied(&mirror(0, true), 1000, true), 0);
        assert_eq!(copied(&mirror(100, true), 1000, true), 1000);
        let ten = mirror(10, false);
        assert_eq!(copied(&ten, 1000, true), 100);
        // Evenly: every block of ten commands has exactly one copy.
        assert_eq!(copied(&ten, 10, true), 1);
        assert_eq!(copied(&mirror(33, false), 300, true), 99);
    }

    #[test]
    fn reads_are_copied_only_when_asked() {
        assert_eq!(copied(&mirror(100, false), 50, false), 0);
        assert_eq!(copied(&mirror(100, true), 50, false), 50);
    }

    #[tokio::test]
    async fn a_mirror_without_a_map_drops_the_copy_and_counts_it() {
        let m = mirror(100, true);
        m.send(
            Bytes::from_static(b"*1\r\n$4\r\nPING\r\n"),
            None,
            Lane::default(),
            Duration::from_secs(1),
        );
        assert_eq!(m.counters.dropped.get(), 1);
        assert_eq!(m.counters.sent.get(), 0);
    }
}
