//! Keeps per-core workers' client counts even: a worker holding more clients than the
//! least-loaded worker (plus one) stops accepting until that changes.
//!
//! Per core, every worker accepts on the same socket and the kernel wakes whichever is waiting,
//! so an idle worker takes the next client. That favours the least busy worker but not the one
//! with the fewest clients: a burst of connects can land on one worker, and a session never moves.
//! Holding back the fuller workers bounds the skew of long-lived clients (the same idea as Envoy's
//! exact connection balance), while among workers within the bound the kernel still picks the
//! idle one. The least-loaded worker always accepts, so a client never waits for balance.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

use super::listener::Accept;
use crate::metrics::Metrics;

/// How many more clients than the least-loaded worker a worker may hold and still accept.
const SLACK: i64 = 1;

/// A paused worker looks again at least this often, in case a wake-up was missed (a count that
/// changed between its check and its wait).
const RECHECK: Duration = Duration::from_millis(50);

/// The client counts of the per-core workers.
pub(crate) struct Spread {
    /// `redcar_worker_clients{worker}`: the counts themselves, not a copy of them.
    counts: Box<[Gauge]>,
    /// Notified whenever a count changes (a client joins another worker or leaves this one), so
    /// a paused worker looks again.
    changed: Notify,
}

impl Spread {
    /// Counts for `workers` workers, shown as `redcar_worker_clients{worker}`.
    pub(crate) fn new(workers: usize, metrics: &Metrics) -> Spread {
        Spread {
            counts: (0..workers).map(|w| metrics.worker_clients(w)).collect(),
            changed: Notify::new(),
        }
    }

    /// Whether `worker` may accept now: it holds no more than the least-loaded worker + `SLACK`.
    fn may_accept(&self, worker: usize) -> bool {
        let Some(mine) = self.counts.get(worker) else {
            return true;
        };
        let least = self.counts.iter().map(Gauge::get).min().unwrap_or(0);
        mine.get() <= least + SLACK
    }

    /// Waits until `worker` may accept (at once when it may).
    pub(crate) async fn turn(&self, worker: usize) {
        while !self.may_accept(worker) {
            let _ = tokio::time::timeout(RECHECK, self.changed.notified()).await;
        }
    }

    /// Counts a client on `worker` until the returned guard is dropped.
    pub(crate) fn join(self: &Arc<Self>, worker: usize) -> Member {
        if let Some(count) = self.counts.get(worker) {
            count.inc();
        }
        // Another worker catching up may let a paused one accept again.
        self.changed.notify_waiters();
        Member {
            spread: self.clone(),
            worker,
        }
    }
}

/// A client counted on its worker; dropping it lets paused workers look again.
pub(crate) struct Member {
    spread: Arc<Spread>,
    worker: usize,
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(count) = self.spread.counts.get(self.worker) {
            count.dec();
        }
        self.spread.changed.notify_waiters();
    }
}

/// A listener that, on a per-core worker, accepts only on the worker's turn.
pub(crate) struct Gated<L> {
    inner: L,
    /// The counts and this worker's index; none on the shared runtime.
    turn: Option<(Arc<Spread>, usize)>,
}

impl<L> Gated<L> {
    /// Gates `inner` by `spread` when the current thread is a per-core worker.
    pub(crate) fn new(inner: L, spread: Option<&Arc<Spread>>) -> Gated<L> {
        let turn = spread.cloned().zip(crate::workers::current());
        Gated { inner, turn }
    }
}

impl<L: Accept + Sync> Accept for Gated<L> {
    type Stream = L::Stream;
    const LABEL: &'static str = L::LABEL;

    async fn accept_client(&self) -> std::io::Result<(Self::Stream, std::sync::Arc<str>)> {
        if let Some((spread, worker)) = &self.turn {
            spread.turn(*worker).await;
        }
        self.inner.accept_client().await
    }

    fn local_addr(stream: &Self::Stream) -> Option<std::net::SocketAddr> {
        L::local_addr(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(workers: usize) -> Arc<Spread> {
        let metrics = Metrics::new(&crate::metrics::MetricsConfig::default());
        Arc::new(Spread::new(workers, &metrics))
    }

    #[test]
    fn a_worker_ahead_of_the_least_loaded_by_more_than_one_stops_accepting() {
        let spread = spread(2);
        let first = spread.join(0);
        assert!(spread.may_accept(0), "1 vs 0 is within the slack");
        let second = spread.join(0);
        assert!(!spread.may_accept(0), "2 vs 0");
        assert!(
            spread.may_accept(1),
            "the least-loaded worker always accepts"
        );
        let other = spread.join(1);
        assert!(spread.may_accept(0), "2 vs 1");
        drop((first, second, other));
        assert!(spread.may_accept(0) && spread.may_accept(1));
    }

    #[test]
    fn a_departure_from_the_fuller_worker_reopens_it() {
        let spread = spread(3);
        let held: Vec<_> = (0..3).map(|_| spread.join(2)).collect();
        assert!(!spread.may_accept(2));
        let mut held = held;
        held.pop();
        assert!(!spread.may_accept(2), "2 vs 0 still");
        held.pop();
        assert!(spread.may_accept(2));
        assert!(spread.may_accept(7), "an unknown worker is never held back");
    }

    /// Worker 0 holding 2 clients and worker 1 none, and a task waiting for worker 0's turn.
    async fn worker_0_paused() -> (Arc<Spread>, [Member; 2], tokio::task::JoinHandle<()>) {
        let spread = spread(2);
        let held = [spread.join(0), spread.join(0)];
        let waiter = {
            let spread = spread.clone();
            tokio::spawn(async move { spread.turn(0).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "2 vs 0: worker 0 waits");
        (spread, held, waiter)
    }

    /// `waiter` finishes well before the periodic re-check would have let it.
    async fn resumes_at_once(waiter: tokio::task::JoinHandle<()>) {
        tokio::time::timeout(RECHECK / 5, waiter)
            .await
            .expect("resumed on the notification")
            .expect("waiter task");
    }

    #[tokio::test]
    async fn a_paused_worker_resumes_when_another_catches_up() {
        let (spread, _held, waiter) = worker_0_paused().await;
        let _other = spread.join(1);
        resumes_at_once(waiter).await;
    }

    #[tokio::test]
    async fn a_paused_worker_resumes_when_a_client_leaves() {
        let (_spread, [first, _second], waiter) = worker_0_paused().await;
        drop(first);
        resumes_at_once(waiter).await;
    }
}
