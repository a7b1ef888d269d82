//! What every client of a loop shares during a turn (the loop's node connections, its tally,
//! its timers, the clients listed for a write or another turn), and the loop's timings.

use std::time::Duration;

use tokio::time::Instant;

use super::super::clients::Downstream;
use super::super::session::record::HotKeySink;
use super::super::slow::LatencyWatch;
use super::conns::Conns;
use super::timers::Timers;
use crate::hotkeys::HotKeySampler;
use crate::metrics::CommandTally;
use crate::router::Router;

/// Mail that stops a loop (the workers end with the proxy).
pub(crate) struct Stop;

/// Replies waiting for the rest of their read's replies are written anyway once this big.
pub(super) const HOLD_MAX: usize = 64 * 1024;

/// How often the loop looks at deadlines of commands sent in place, while some are owed.
pub(super) const DEADLINE_SWEEP: Duration = Duration::from_millis(10);

/// How often the loop looks at its node connections' idle limits and its other chores.
pub(super) const CHORES: Duration = Duration::from_millis(100);

/// What every client of a loop shares during a turn.
pub(super) struct Work<'d> {
    /// What every session shares (config, users, metrics, tracking).
    pub(super) d: &'d Downstream,
    /// Plans and forwards the clients' commands.
    pub(super) router: &'d Router,
    /// This loop's worker number.
    pub(super) index: usize,
    /// This loop's share of every node's connections.
    pub(super) conns: Conns,
    /// How commands are recorded.
    pub(super) recorder: LoopRecorder<'d>,
    /// Key positions, reused by every command's plan.
    pub(super) scratch: Vec<usize>,
    /// The clock read once per loop turn.
    pub(super) now: Instant,
    /// The clients' timers (idle, age, request, budget, throttle).
    pub(super) timers: Timers,
    /// Clients to write to, run again or watch this turn.
    pub(super) lists: TurnLists,
}

/// How the loop's commands are recorded: counted, sampled for the hot keys, timed.
pub(super) struct LoopRecorder<'d> {
    /// The per-command series, counted locally and flushed before writes.
    pub(super) tally: CommandTally<'d>,
    /// Picks the commands sampled for the hot keys.
    pub(super) sampler: HotKeySampler,
    /// The request is kept (a reference count) for the slow log and the hot keys.
    pub(super) keep_raw: bool,
    /// `client.close_idle_when_slow`'s latency watch (fed by clients that have it on).
    pub(super) latency: &'d LatencyWatch,
}

/// Clients listed for the rest of this loop turn (each at most once: see `LoopClient::listed`).
#[derive(Default)]
pub(super) struct TurnLists {
    /// To write to, and to give another turn, before the turn ends.
    pub(super) write: Vec<u64>,
    /// To give another turn of running (a paused read resumed, a call finished).
    pub(super) run: Vec<u64>,
    /// Owing replies sent in place: their deadlines are swept.
    pub(super) watched: Vec<u64>,
}

impl<'d> Work<'d> {
    /// Where finished commands are recorded for `/hotkeys`.
    pub(super) fn hot(&self, client: u64) -> HotKeySink<'d> {
        HotKeySink {
            keys: &self.d.hotkeys,
            client,
        }
    }
}
