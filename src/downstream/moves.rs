//! Moving busy sessions between per-core workers (`placement: auto`): sessions that pipeline are
//! kept even across the workers, and a worker that runs out of time hands some of its clients to
//! one with time to spare. A session moves only at a safe point (`session/moving.rs`).
//!
//! Why these two rules (docs/decisions/0006-threads-and-placement.md): one-at-a-time clients cost
//! less CPU per command packed on few workers (bigger batches per node write and per wake-up),
//! while pipelining clients get more throughput spread over all of them (one worker serves their
//! batches one after another where two serve them side by side). New clients are packed; a client
//! shows which kind it is only once it sends, so the pipelining ones are spread then. The busy
//! share cannot tell the two apart (packed at `-P 1` a worker read 0.78–0.86 busy, at `-P 16`
//! 0.57–0.73), so it only decides the overflow: a worker past [`OVERFLOW_BUSY`] while another is
//! below [`OVERFLOW_ROOM`] hands over an eighth of its clients.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::runtime::Handle;

use super::ClientMetrics;

/// A read that starts at least this many commands is a pipelining one.
pub(crate) const PIPELINE_DEPTH: usize = 4;

/// This many pipelining reads in a row make a busy session a pipelining one (a read of fewer
/// commands, but at least one, ends the streak and the membership).
pub(crate) const PIPELINE_READS: u8 = 8;

/// A worker this busy (its smoothed share, see `spread.rs`) hands clients to one below
/// [`OVERFLOW_ROOM`].
const OVERFLOW_BUSY: f64 = 0.95;

/// A worker below this busy share may take clients from an overflowing one.
const OVERFLOW_ROOM: f64 = 0.5;

/// After handing clients over, a worker lets this many busy samples pass before it may again:
/// its smoothed share needs that long to show the move.
const OVERFLOW_PAUSE: u32 = 10;

/// WAIT records the workers a client wrote from in a 64-bit mask (`Written::note_moved_from`),
/// so sessions move only with at most that many workers; with more, nothing moves.
pub(crate) const MAX_WORKERS: usize = crate::router::MOVED_FROM_WORKERS;

/// One worker's part in the moves.
struct WorkerMoves {
    /// `redcar_worker_pipelining_clients{worker}`: the count itself.
    pipelining: Gauge,
    /// Sessions an overflowing worker still wants to hand over, and to which worker.
    tickets: AtomicU32,
    /// The worker the tickets are for.
    ticket_to: AtomicUsize,
    /// Some session here should move at its next safe point: this worker holds more pipelining
    /// sessions than the least one plus one, or has tickets out. One relaxed load per safe point.
    wanted: AtomicBool,
    /// Busy samples left before this worker may overflow again (touched by its own sampler).
    pause: AtomicU32,
}

/// The per-core workers' moves: who should move where, and the workers' runtimes to move to.
pub(crate) struct Moves {
    /// One per worker, by index.
    workers: Box<[WorkerMoves]>,
    /// The workers' runtimes: where a moving session is resumed.
    handles: Arc<[Handle]>,
    /// `sessions_moved{reason="pipelining"}`.
    moved_pipelining: Counter,
    /// `sessions_moved{reason="overflow"}`.
    moved_overflow: Counter,
}

impl Moves {
    /// Moves between the workers of `handles`; none with fewer than two workers or more than
    /// [`MAX_WORKERS`].
    pub(crate) fn new(handles: Arc<[Handle]>, metrics: &ClientMetrics) -> Option<Moves> {
        if !(2..=MAX_WORKERS).contains(&handles.len()) {
            return None;
        }
        Some(Moves {
            workers: (0..handles.len())
                .map(|w| WorkerMoves {
                    pipelining: metrics.worker_pipelining(w),
                    tickets: AtomicU32::new(0),
                    ticket_to: AtomicUsize::new(0),
                    wanted: AtomicBool::new(false),
                    pause: AtomicU32::new(0),
                })
                .collect(),
            handles,
            moved_pipelining: metrics.sessions_moved("pipelining"),
            moved_overflow: metrics.sessions_moved("overflow"),
        })
    }

    /// Whether a session on `worker` at a safe point should look for a move.
    #[inline]
    pub(crate) fn wanted(&self, worker: usize) -> bool {
        self.workers
            .get(worker)
            .is_some_and(|w| w.wanted.load(Ordering::Relaxed))
    }

    /// The runtime of `worker`, to spawn a moved session on.
    pub(crate) fn handle(&self, worker: usize) -> Option<&Handle> {
        self.handles.get(worker)
    }

    /// Counts a pipelining session on `worker` until the returned membership is dropped.
    pub(crate) fn join_pipelining(self: &Arc<Self>, worker: usize) -> Pipelining {
        if let Some(w) = self.workers.get(worker) {
            w.pipelining.inc();
        }
        self.refresh_wanted();
        Pipelining {
            moves: self.clone(),
            worker,
        }
    }

    /// A pipelining session at a safe point: the worker it should move to, if its own holds
    /// more pipelining sessions than the least one plus one. Its membership moves there at once,
    /// so the next session deciding sees the new counts.
    pub(crate) fn shed_pipelining(&self, member: &mut Pipelining) -> Option<usize> {
        let mine = self.workers.get(member.worker)?.pipelining.get();
        let (to, least) = self
            .workers
            .iter()
            .enumerate()
            .map(|(w, moves)| (w, moves.pipelining.get()))
            .min_by_key(|&(_, count)| count)?;
        if mine <= least + 1 {
            return None;
        }
        self.workers[member.worker].pipelining.dec();
        self.workers[to].pipelining.inc();
        member.worker = to;
        self.refresh_wanted();
        self.moved_pipelining.inc();
        Some(to)
    }

    /// A pipelining session moving to `to` for another reason (an overflow ticket): its count
    /// goes with it.
    pub(crate) fn transfer(&self, member: &mut Pipelining, to: usize) {
        let (Some(old), Some(new)) = (self.workers.get(member.worker), self.workers.get(to)) else {
            return;
        };
        old.pipelining.dec();
        new.pipelining.inc();
        member.worker = to;
        self.refresh_wanted();
    }

    /// Any session at a safe point: the worker to move to, if its own worker is overflowing and
    /// has tickets left.
    pub(crate) fn take_ticket(&self, worker: usize) -> Option<usize> {
        let w = self.workers.get(worker)?;
        w.tickets
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| t.checked_sub(1))
            .ok()?;
        if w.tickets.load(Ordering::Relaxed) == 0 {
            self.refresh_wanted();
        }
        self.moved_overflow.inc();
        Some(w.ticket_to.load(Ordering::Relaxed))
    }

    /// Called by `worker`'s busy sampler with every worker's smoothed busy share and its own
    /// client count: an overflowing worker hands an eighth of its clients to the least busy
    /// worker, if that one has room, then pauses.
    pub(crate) fn sample(&self, worker: usize, busy: &[f64], clients: i64) {
        let Some(me) = self.workers.get(worker) else {
            return;
        };
        if me.pause.load(Ordering::Relaxed) > 0 {
            me.pause.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let Some(plan) = overflow(worker, busy, clients) else {
            return;
        };
        me.ticket_to.store(plan.to, Ordering::Relaxed);
        me.tickets.store(plan.tickets, Ordering::Relaxed);
        me.pause.store(OVERFLOW_PAUSE, Ordering::Relaxed);
        self.refresh_wanted();
    }

    /// Which workers' sessions should look for a move.
    fn refresh_wanted(&self) {
        let least = self
            .workers
            .iter()
            .map(|w| w.pipelining.get())
            .min()
            .unwrap_or(0);
        for w in self.workers.iter() {
            let wanted = w.pipelining.get() > least + 1 || w.tickets.load(Ordering::Relaxed) > 0;
            w.wanted.store(wanted, Ordering::Relaxed);
        }
    }
}

/// Clients an overflowing worker hands over, and where to.
#[derive(Debug, PartialEq, Eq)]
struct Overflow {
    /// The least busy other worker.
    to: usize,
    /// How many sessions to hand over: an eighth of the worker's clients, rounded up.
    tickets: u32,
}

/// Whether `worker`, holding `clients`, overflows given every worker's busy share: past
/// [`OVERFLOW_BUSY`] while the least busy other worker is below [`OVERFLOW_ROOM`].
fn overflow(worker: usize, busy: &[f64], clients: i64) -> Option<Overflow> {
    if *busy.get(worker)? < OVERFLOW_BUSY || clients < 2 {
        return None;
    }
    let (to, room) = busy
        .iter()
        .enumerate()
        .filter(|&(w, _)| w != worker)
        .min_by(|a, b| a.1.total_cmp(b.1))?;
    if *room >= OVERFLOW_ROOM {
        return None;
    }
    let tickets = u32::try_from((clients + 7) / 8).unwrap_or(u32::MAX);
    Some(Overflow { to, tickets })
}

/// A pipelining session counted on its worker; dropping it (the session went idle, sent one
/// command at a time again, or ended) takes it off the count.
pub(crate) struct Pipelining {
    /// The moves this session is counted in.
    moves: Arc<Moves>,
    /// The worker it is counted on.
    worker: usize,
}

impl Drop for Pipelining {
    fn drop(&mut self) {
        if let Some(w) = self.moves.workers.get(self.worker) {
            w.pipelining.dec();
        }
        self.moves.refresh_wanted();
    }
}

#[cfg(test)]
#[path = "moves_tests.rs"]
mod tests;
