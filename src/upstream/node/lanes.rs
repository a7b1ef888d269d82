//! Which of a node's connections carries a client's lane: the RESP2 or RESP3 set (the RESP3 one
//! started on first use), the tracked lanes, and per core the connections on the caller's own
//! worker.

use super::super::pending::Pending;
use super::super::queue;
use super::super::tracking::NodeTracking;
use super::super::Lane;
use super::Node;
use crate::protocol::Protocol;

impl Node {
    /// Where a worker's event loop drives the connection for `lane` on the calling thread:
    /// `(loop, key)` (see `upstream::loop_conn`).
    #[inline]
    pub(crate) fn loop_home(&self, lane: Lane) -> Option<(usize, usize)> {
        self.connection(lane).home()
    }

    /// The connection for `lane` on the calling thread.
    #[inline]
    pub(super) fn connection(&self, lane: Lane) -> &queue::Sender<Pending> {
        if lane.is_tracked() {
            return self.tracked_lane(lane);
        }
        let conns = match lane.protocol() {
            Protocol::Resp2 => self.conns.get_or_init(|| self.start.connections(self, 0)),
            Protocol::Resp3 => self.conns3.get_or_init(|| self.start.connections(self, 1)),
        };
        let worker = worker_for(lane, self.workers);
        &conns[connection_for(lane.client(), conns.len(), self.workers, worker)]
    }

    /// A tracking client's connection: the node's tracked lane for its protocol, started on
    /// first use (see `upstream::tracking`).
    #[cold]
    pub(super) fn tracked_lane(&self, lane: Lane) -> &queue::Sender<Pending> {
        self.tracking
            .get_or_init(|| {
                let [resp2, resp3] = self.start.contexts(self);
                NodeTracking::start(resp2, resp3, self.start.feed())
            })
            .lane(lane.protocol(), lane.is_near())
    }
}

/// Whose connections `lane` takes among `workers` per-core workers: the one it names
/// ([`Lane::on_worker`]), else the calling thread's. The thread-local is read only per core and
/// only for lanes that name none: the shared runtime's path stays as it was.
#[inline]
fn worker_for(lane: Lane, workers: usize) -> Option<usize> {
    if workers > 1 {
        lane.worker().or_else(crate::workers::current)
    } else {
        None
    }
}

/// Which of a node's `total` connections carries `lane` for a caller on `worker`, when connection
/// `i` runs on worker `i % workers`. A worker that runs some of the node's connections uses one
/// of its own (same thread: no hand-off, no wake-up of another thread); a worker without one, and
/// any other thread (control plane, TLS sessions), picks among all of them. On one worker, one
/// lane always maps to one connection: its commands keep their order. A session that moves to
/// another worker (with nothing in flight) takes that worker's connection from then on; its WAIT
/// also asks the connections of the workers it wrote from (`router::stateful::wait`).
#[inline]
fn connection_for(lane: usize, total: usize, workers: usize, worker: Option<usize>) -> usize {
    match worker {
        Some(worker) if worker < total && workers > 1 => {
            let owned = (total - worker).div_ceil(workers);
            // Lanes are client ids, handed out across all workers: divide first, so a worker's
            // own clients still spread over all of its connections.
            worker + (lane / workers % owned) * workers
        }
        _ => lane % total,
    }
}

#[cfg(test)]
mod tests {
    use super::{connection_for, worker_for};
    use crate::upstream::Lane;

    #[test]
    fn a_lane_on_an_explicit_worker_takes_that_workers_connection_from_any_thread() {
        // The test thread is no worker: a plain lane picks among all connections.
        let lane = Lane::resp2(7);
        assert_eq!(lane.worker(), None);
        assert_eq!(worker_for(lane, 2), None);
        assert_eq!(
            connection_for(lane.client(), 5, 2, worker_for(lane, 2)),
            7 % 5
        );
        // 5 connections over 2 workers: worker 1 runs 1 and 3.
        for worker in 0..2 {
            let moved = lane.on_worker(worker);
            assert_eq!(moved.worker(), Some(worker));
            assert_eq!(moved.client(), lane.client());
            assert_eq!(worker_for(moved, 2), Some(worker));
            let conn = connection_for(moved.client(), 5, 2, worker_for(moved, 2));
            assert_eq!(conn, connection_for(lane.client(), 5, 2, Some(worker)));
            assert_eq!(conn % 2, worker, "worker {worker} -> connection {conn}");
        }
        // One runtime: every thread shares all connections, the worker changes nothing.
        assert_eq!(worker_for(lane.on_worker(1), 1), None);
        assert_ne!(lane.on_worker(1), lane.on_worker(0));
        assert_eq!(lane.on_worker(1).tracked(true).worker(), Some(1));
    }

    #[test]
    fn one_runtime_spreads_lanes_over_all_connections() {
        let picked: Vec<usize> = (0..6)
            .map(|lane| connection_for(lane, 3, 1, None))
            .collect();
        assert_eq!(picked, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn per_core_a_worker_uses_only_the_connections_on_its_own_thread() {
        // 5 connections over 2 workers: worker 0 runs 0, 2, 4; worker 1 runs 1, 3.
        for lane in 0..20 {
            let on_zero = connection_for(lane, 5, 2, Some(0));
            let on_one = connection_for(lane, 5, 2, Some(1));
            assert_eq!(on_zero % 2, 0, "lane {lane} on worker 0 -> {on_zero}");
            assert_eq!(on_one % 2, 1, "lane {lane} on worker 1 -> {on_one}");
            assert!(on_zero < 5 && on_one < 5);
        }
        let zero: std::collections::BTreeSet<usize> = (0..20)
            .map(|lane| connection_for(lane, 5, 2, Some(0)))
            .collect();
        let one: std::collections::BTreeSet<usize> = (0..20)
            .map(|lane| connection_for(lane, 5, 2, Some(1)))
            .collect();
        assert_eq!(
            zero.into_iter().collect::<Vec<_>>(),
            [0, 2, 4],
            "all of its own are used"
        );
        assert_eq!(one.into_iter().collect::<Vec<_>>(), [1, 3]);
        // Clients accepted in turns (even ids on worker 0) still use both of worker 0's.
        let even: Vec<usize> = [0, 2, 4, 6]
            .map(|lane| connection_for(lane, 4, 2, Some(0)))
            .into();
        assert_eq!(even, [0, 2, 0, 2]);
    }

    #[test]
    fn per_core_other_threads_and_workers_without_a_connection_use_any() {
        let control: Vec<usize> = (0..4)
            .map(|lane| connection_for(lane, 2, 2, None))
            .collect();
        assert_eq!(control, [0, 1, 0, 1]);
        // Worker 3 of 4 with only 2 connections (not what `Node::spawn` builds, but safe).
        let stranger: Vec<usize> = (0..4)
            .map(|lane| connection_for(lane, 2, 4, Some(3)))
            .collect();
        assert_eq!(stranger, [0, 1, 0, 1]);
    }

    #[test]
    fn every_worker_with_connections_spreads_its_lanes_over_exactly_its_own() {
        for total in 1..8 {
            for workers in 2..5 {
                for worker in 0..workers.min(total) {
                    let own: Vec<usize> = (worker..total).step_by(workers).collect();
                    let mut used: Vec<usize> = (0..total * workers * 2)
                        .map(|lane| connection_for(lane, total, workers, Some(worker)))
                        .collect();
                    used.sort_unstable();
                    used.dedup();
                    assert_eq!(
                        used, own,
                        "{total} connections, worker {worker} of {workers}"
                    );
                }
            }
        }
    }
}
