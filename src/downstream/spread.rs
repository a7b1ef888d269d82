//! Decides which per-core worker takes the next client: `placement: even` keeps the workers'
//! client counts even (a worker holding more clients than the least-loaded worker plus one stops
//! accepting until that changes); `placement: pack` sends new clients to the first worker that
//! is not yet busy; `placement: auto` packs too, and moves busy sessions afterwards
//! (`moves.rs`).
//!
//! Per core, every worker accepts on the same socket and the kernel wakes whichever is waiting,
//! so an idle worker takes the next client. That favours the least busy worker but not the one
//! with the fewest clients: a burst of connects can land on one worker. Holding back the fuller
//! workers bounds the skew of long-lived clients (the same idea as Envoy's exact connection
//! balance), while among workers within the bound the kernel still picks the idle one. The
//! least-loaded worker always accepts, so a client never waits for balance.
//!
//! Packing is for hosts where the applications next to redcar use the cores: a light load on
//! one thread batches more commands per node write and per wake-up than the same load split over
//! every thread, so each command costs less CPU (docs/configuration.md, `placement`). Each worker
//! samples the share of its time spent running tasks ([`Spread::watch_busy`]); a worker past
//! [`PACK_BUSY`] is full, and when every worker is full the counts decide as with `even`.
//!
//! Packing alone has one risk: a client is placed when it connects, so long-lived connections
//! opened while the load is light (a pool filled at start-up) would all sit on one worker when
//! the load comes, and a burst of pipelining clients lands on one worker before it looks busy.
//! `auto` fixes both by moving sessions at safe points: pipelining ones are kept even across the
//! workers, and an overflowing worker hands clients to one with room (`moves.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::accept::Accept;
use super::moves::Moves;
use super::ClientMetrics;
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
    /// Nanoseconds the worker's event loop (`event_loop`) spent serving rather than waiting,
    /// over the process's life: its runtime is mostly idle then.
    loop_busy: AtomicU64,
}

/// The per-core workers' client counts and busy shares, and how new clients are placed.
pub(crate) struct Spread {
    /// One per worker: its client count and busy share.
    workers: Box<[Worker]>,
    /// `placement`: how new clients are placed (`even`, `pack`, `auto`).
    placement: Placement,
    /// `placement: auto`: which busy sessions should move to another worker (none for the other
    /// placements, or before [`Spread::with_handles`]).
    moves: Option<Arc<Moves>>,
    /// Notified whenever a count changes (a client joins another worker or leaves this one), a
    /// worker fills up or frees, or packing starts or stops, so a paused worker looks again and
    /// a worker waiting in `accept` whose turn passed stops waiting.
    changed: Notify,
}

impl Spread {
    /// The standing of `workers` workers, shown as `redcar_worker_clients{worker}`,
    /// `redcar_worker_busy_ratio{worker}` and `redcar_placement_packing`.
    pub(crate) fn new(workers: usize, placement: Placement, metrics: &Metrics) -> Spread {
        let metrics = metrics.group::<ClientMetrics>();
        let packing = placement != Placement::Even;
        metrics.placement_packing().set(i64::from(packing));
        Spread {
            workers: (0..workers)
                .map(|w| Worker {
                    clients: metrics.worker_clients(w),
                    busy: metrics.worker_busy(w),
                    loop_busy: AtomicU64::new(0),
                    full: AtomicBool::new(false),
                })
                .collect(),
            placement,
            moves: None,
            changed: Notify::new(),
        }
    }

    /// With the workers' runtimes, `placement: auto` moves busy sessions between them (see
    /// `moves.rs`).
    pub(crate) fn with_handles(
        mut self,
        handles: Arc<[tokio::runtime::Handle]>,
        metrics: &Metrics,
    ) -> Spread {
        if self.placement == Placement::Auto {
            self.moves = Moves::new(handles, &metrics.group::<ClientMetrics>()).map(Arc::new);
        }
        self
    }

    /// Whether new clients are packed (`pack` and `auto`; `redcar_placement_packing`).
    fn packing(&self) -> bool {
        self.placement != Placement::Even
    }

    /// Where busy sessions may move, with `placement: auto`.
    pub(crate) fn moves(&self) -> Option<&Arc<Moves>> {
        self.moves.as_ref()
    }

    /// Whether `worker` may accept now.
    pub(super) fn may_accept(&self, worker: usize) -> bool {
        if self.packing() {
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

    /// Waits until `worker` may no longer accept. Registered for the notification before each
    /// look, so no change is missed, and with no periodic re-check: a worker waiting to accept
    /// stays asleep until a count, a busy share or the packing changes.
    async fn turn_passes(&self, worker: usize) {
        loop {
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            if !self.may_accept(worker) {
                return;
            }
            changed.await;
        }
    }

    /// Runs on per-core worker `worker` for the process's life: samples the share of time its
    /// runtime spent running tasks every [`BUSY_SAMPLE`], smoothed, into the worker's standing;
    /// with `placement: auto`, an overflowing worker then hands clients over (`moves.rs`).
    pub(crate) async fn watch_busy(self: Arc<Self>, worker: usize) {
        let runtime = tokio::runtime::Handle::current().metrics();
        let busy = || runtime.worker_total_busy_duration(0) + self.loop_busy(worker);
        let mut last = (Instant::now(), busy());
        let mut smooth = 0.0;
        loop {
            tokio::time::sleep(BUSY_SAMPLE).await;
            let now = (Instant::now(), busy());
            let share = busy_share(
                now.1.saturating_sub(last.1),
                now.0.saturating_duration_since(last.0),
            );
            last = now;
            smooth += BUSY_WEIGHT * (share - smooth);
            self.set_busy(worker, smooth);
            if let Some(moves) = &self.moves {
                let busy: Vec<f64> = self.workers.iter().map(|w| w.busy.get()).collect();
                let clients = self.workers.get(worker).map_or(0, |w| w.clients.get());
                moves.sample(worker, &busy, clients);
            }
        }
    }

    /// For the status page: the placement setting, whether new clients are packed now, and each
    /// worker's clients and busy share.
    pub(crate) fn standing(&self) -> (&'static str, bool, Vec<(i64, f64)>) {
        let each = self
            .workers
            .iter()
            .map(|w| (w.clients.get(), w.busy.get()))
            .collect();
        (self.placement.name(), self.packing(), each)
    }

    /// Worker `worker`'s event loop served for `nanos` more nanoseconds.
    pub(crate) fn add_loop_busy(&self, worker: usize, nanos: u64) {
        if let Some(standing) = self.workers.get(worker) {
            standing.loop_busy.fetch_add(nanos, Ordering::Relaxed);
        }
    }

    fn loop_busy(&self, worker: usize) -> Duration {
        let nanos = self
            .workers
            .get(worker)
            .map_or(0, |w| w.loop_busy.load(Ordering::Relaxed));
        Duration::from_nanos(nanos)
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
    /// The counts this client is on.
    spread: Arc<Spread>,
    /// The worker it is counted on; changes when its session moves.
    worker: usize,
}

impl Member {
    /// The client's session moved to `worker` (not a departure: `auto` counts those).
    pub(crate) fn move_to(&mut self, worker: usize) {
        let standing = &self.spread.workers;
        if let Some(old) = standing.get(self.worker) {
            old.clients.dec();
        }
        if let Some(new) = standing.get(worker) {
            new.clients.inc();
        }
        self.worker = worker;
        self.spread.changed.notify_waiters();
    }
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
    /// The listener being gated.
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

    /// A worker already waiting in `accept` when its turn passes (another worker freed up, or
    /// `auto` began packing) stops waiting there, so the next client goes where the placement
    /// says. Safe to drop: the raw TCP and Unix accepts are cancel-safe (a TLS listener wraps
    /// this one and handshakes after it).
    async fn accept_client(&self) -> std::io::Result<(Self::Stream, std::sync::Arc<str>)> {
        let Some((spread, worker)) = &self.turn else {
            return self.inner.accept_client().await;
        };
        loop {
            spread.turn(*worker).await;
            tokio::select! {
                accepted = self.inner.accept_client() => return accepted,
                () = spread.turn_passes(*worker) => {}
            }
        }
    }

    fn local_addr(stream: &Self::Stream) -> Option<std::net::SocketAddr> {
        L::local_addr(stream)
    }
}

#[cfg(test)]
#[path = "spread_tests.rs"]
mod tests;
