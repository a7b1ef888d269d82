//! Decides which per-core worker takes the next client: `placement: even` keeps the workers'
//! client counts even (a worker holding more clients than the least-loaded worker plus one stops
//! accepting until that changes); `placement: pack` sends new clients to the first worker that
//! is not yet busy.
//!
//! Per core, every worker accepts on the same socket and the kernel wakes whichever is waiting,
//! so an idle worker takes the next client. That favours the least busy worker but not the one
//! with the fewest clients: a burst of connects can land on one worker, and a session never moves.
//! Holding back the fuller workers bounds the skew of long-lived clients (the same idea as Envoy's
//! exact connection balance), while among workers within the bound the kernel still picks the
//! idle one. The least-loaded worker always accepts, so a client never waits for balance.
//!
//! Packing is for hosts where the applications next to redcar use the cores: a light load on
//! one thread batches more commands per node write and per wake-up than the same load split over
//! every thread, so each command costs less CPU (docs/configuration.md, `placement`). Each worker
//! samples the share of its time spent running tasks ([`Spread::watch_busy`]); a worker past
//! [`PACK_BUSY`] is full, and when every worker is full the counts decide as with `even`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::listener::Accept;
use crate::metrics::Metrics;
use crate::workers::Placement;

/// How many more clients than the least-loaded worker a worker may hold and still accept.
const SLACK: i64 = 1;

/// A paused worker looks again at least this often, in case a wake-up was missed (a count that
/// changed between its check and its wait).
const RECHECK: Duration = Duration::from_millis(50);

/// `placement: pack`: a worker that spent this share of its recent time running tasks takes no
/// more clients while another is below it. Below one, so a worker keeps headroom for the clients
/// it already holds to send more.
pub(crate) const PACK_BUSY: f64 = 0.6;

/// How often each worker samples its busy share.
const BUSY_SAMPLE: Duration = Duration::from_millis(100);

/// Weight of the newest sample in the smoothed share: about the last half second counts.
const BUSY_WEIGHT: f64 = 0.25;

/// One worker's standing: its client count and how busy it has been.
struct Worker {
    /// `redcar_worker_clients{worker}`: the count itself, not a copy of it.
    clients: Gauge,
    /// `redcar_worker_busy_ratio{worker}`: the smoothed busy share, 0 to 1.
    busy: Gauge<f64, AtomicU64>,
    /// Whether `busy` is past [`PACK_BUSY`], read on every accept decision.
    full: AtomicBool,
}

/// The per-core workers' client counts and busy shares, and how new clients are placed.
pub(crate) struct Spread {
    workers: Box<[Worker]>,
    placement: Placement,
    /// Notified whenever a count changes (a client joins another worker or leaves this one) or
    /// a worker fills up or frees, so a paused worker looks again.
    changed: Notify,
}

impl Spread {
    /// The standing of `workers` workers, shown as `redcar_worker_clients{worker}` and
    /// `redcar_worker_busy_ratio{worker}`.
    pub(crate) fn new(workers: usize, placement: Placement, metrics: &Metrics) -> Spread {
        Spread {
            workers: (0..workers)
                .map(|w| Worker {
                    clients: metrics.worker_clients(w),
                    busy: metrics.worker_busy(w),
                    full: AtomicBool::new(false),
                })
                .collect(),
            placement,
            changed: Notify::new(),
        }
    }

    /// Whether `worker` may accept now.
    fn may_accept(&self, worker: usize) -> bool {
        if self.placement == Placement::Pack {
            // The first worker not yet full takes the clients; with all full, the counts decide.
            if let Some(first) = self
                .workers
                .iter()
                .position(|w| !w.full.load(Ordering::Relaxed))
            {
                return first == worker || worker >= self.workers.len();
            }
        }
        self.within_slack(worker)
    }

    /// Whether `worker` holds no more than the least-loaded worker + `SLACK`.
    fn within_slack(&self, worker: usize) -> bool {
        let Some(mine) = self.workers.get(worker) else {
            return true;
        };
        let least = self
            .workers
            .iter()
            .map(|w| w.clients.get())
            .min()
            .unwrap_or(0);
        mine.clients.get() <= least + SLACK
    }

    /// Waits until `worker` may accept (at once when it may).
    pub(crate) async fn turn(&self, worker: usize) {
        while !self.may_accept(worker) {
            let _ = tokio::time::timeout(RECHECK, self.changed.notified()).await;
        }
    }

    /// Runs on per-core worker `worker` for the process's life: samples the share of time its
    /// runtime spent running tasks every [`BUSY_SAMPLE`], smoothed, into the worker's standing.
    pub(crate) async fn watch_busy(self: Arc<Self>, worker: usize) {
        let runtime = tokio::runtime::Handle::current().metrics();
        let mut last = (Instant::now(), runtime.worker_total_busy_duration(0));
        let mut smooth = 0.0;
        loop {
            tokio::time::sleep(BUSY_SAMPLE).await;
            let now = (Instant::now(), runtime.worker_total_busy_duration(0));
            let share = busy_share(
                now.1.saturating_sub(last.1),
                now.0.saturating_duration_since(last.0),
            );
            last = now;
            smooth += BUSY_WEIGHT * (share - smooth);
            self.set_busy(worker, smooth);
        }
    }

    /// Records `worker`'s busy share, and wakes paused workers when it fills up or frees.
    fn set_busy(&self, worker: usize, share: f64) {
        let Some(standing) = self.workers.get(worker) else {
            return;
        };
        standing.busy.set(share);
        let full = share >= PACK_BUSY;
        if standing.full.swap(full, Ordering::Relaxed) != full {
            self.changed.notify_waiters();
        }
    }

    /// Counts a client on `worker` until the returned guard is dropped.
    pub(crate) fn join(self: &Arc<Self>, worker: usize) -> Member {
        if let Some(standing) = self.workers.get(worker) {
            standing.clients.inc();
        }
        // Another worker catching up may let a paused one accept again.
        self.changed.notify_waiters();
        Member {
            spread: self.clone(),
            worker,
        }
    }
}

/// The share of `elapsed` spent `busy`, 0 to 1 (a sample's clocks are not read at the same
/// instant, so the raw figure can pass 1).
fn busy_share(busy: Duration, elapsed: Duration) -> f64 {
    if elapsed.is_zero() {
        return 0.0;
    }
    (busy.as_secs_f64() / elapsed.as_secs_f64()).clamp(0.0, 1.0)
}

/// A client counted on its worker; dropping it lets paused workers look again.
pub(crate) struct Member {
    spread: Arc<Spread>,
    worker: usize,
}

impl Drop for Member {
    fn drop(&mut self) {
        if let Some(standing) = self.spread.workers.get(self.worker) {
            standing.clients.dec();
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
        Arc::new(Spread::new(workers, Placement::Even, &metrics))
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

    fn packed(workers: usize) -> Arc<Spread> {
        let metrics = Metrics::new(&crate::metrics::MetricsConfig::default());
        Arc::new(Spread::new(workers, Placement::Pack, &metrics))
    }

    #[test]
    fn packed_clients_go_to_the_first_worker_not_yet_busy() {
        let spread = packed(3);
        let held: Vec<_> = (0..5).map(|_| spread.join(0)).collect();
        assert!(spread.may_accept(0), "5 vs 0, but worker 0 is not busy");
        assert!(!spread.may_accept(1) && !spread.may_accept(2));
        spread.set_busy(0, PACK_BUSY);
        assert!(!spread.may_accept(0), "full");
        assert!(spread.may_accept(1) && !spread.may_accept(2));
        spread.set_busy(1, 0.9);
        assert!(spread.may_accept(2));
        spread.set_busy(0, PACK_BUSY - 0.01);
        assert!(spread.may_accept(0), "worker 0 freed up: first again");
        assert!(!spread.may_accept(2));
        drop(held);
    }

    #[test]
    fn with_every_worker_busy_the_client_counts_decide() {
        let spread = packed(2);
        spread.set_busy(0, 1.0);
        spread.set_busy(1, 0.7);
        let held = [spread.join(0), spread.join(0)];
        assert!(!spread.may_accept(0), "2 vs 0");
        assert!(spread.may_accept(1));
        assert!(spread.may_accept(5), "an unknown worker is never held back");
        drop(held);
        assert!(spread.may_accept(0));
    }

    #[tokio::test]
    async fn a_paused_packed_worker_resumes_when_the_first_fills_up() {
        let spread = packed(2);
        let waiter = {
            let spread = spread.clone();
            tokio::spawn(async move { spread.turn(1).await })
        };
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "worker 0 is not busy: worker 1 waits"
        );
        spread.set_busy(0, 0.95);
        resumes_at_once(waiter).await;
    }

    #[test]
    fn the_busy_share_is_a_fraction_of_the_elapsed_time() {
        let ms = Duration::from_millis;
        assert_eq!(busy_share(ms(25), ms(100)), 0.25);
        assert_eq!(busy_share(ms(120), ms(100)), 1.0, "clocks read apart");
        assert_eq!(busy_share(ms(5), Duration::ZERO), 0.0);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_worker_samples_its_own_busy_share() {
        let spread = packed(1);
        let watch = tokio::spawn(spread.clone().watch_busy(0));
        // Busy for a few samples: a task that computes for 20 ms at a time between yields. (Only
        // tasks count: the future `block_on` runs is not one.)
        let until = std::time::Instant::now() + BUSY_SAMPLE * 6;
        tokio::spawn(async move {
            while std::time::Instant::now() < until {
                let chunk = std::time::Instant::now() + Duration::from_millis(20);
                while std::time::Instant::now() < chunk {
                    std::hint::black_box(0u64);
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("busy task");
        let busy = spread.workers[0].busy.get();
        watch.abort();
        assert!(
            busy > PACK_BUSY,
            "busy share {busy} after 600 ms of running a task"
        );
    }
}
