//! Starting a worker's loop: its poll and door exist from start-up (nodes are dealt connections
//! before any client connects); its thread starts once the sessions' home is built.
//!
//! Why two steps: the node connections are dealt to the loops while the upstream registry is built,
//! before any client exists, so each loop's poll and waker (its door, [`Remote`]) must exist first;
//! the loop itself can only run once the sessions' shared home (`Downstream`) exists, which needs
//! the registry. The thread is named `redcar-loop-N` and pinned to worker N's identity, so
//! per-worker figures and thread-local state (tallies, pools) belong to one worker.

use std::io;
use std::sync::Arc;
use std::task::Context;

use slab::Slab;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::super::clients::Downstream;
use super::conns::Conns;
use super::timers::Timers;
use super::tokens::{self, TokenKind};
use super::work::{LoopRecorder, TurnLists, Work, CHORES};
use super::Loop;
use crate::metrics::CommandTally;
use crate::reactor::{LoopWaker, Remote};

/// A loop before its thread starts: its poll, and the door other threads reach it by.
pub(crate) struct LoopSetup {
    /// The worker's number, 0-based; also the index of its door in `peers`.
    index: usize,
    /// The loop's poll, made now so node connections can register with it before the thread starts.
    poll: mio::Poll,
    /// The door other threads wake the loop and post work through.
    remote: Arc<Remote>,
}

impl LoopSetup {
    /// The loop of worker `index`.
    pub(crate) fn new(index: usize) -> io::Result<LoopSetup> {
        let poll = mio::Poll::new()?;
        let remote = Arc::new(Remote::new(index, poll.registry())?);
        Ok(LoopSetup {
            index,
            poll,
            remote,
        })
    }

    /// How other threads reach the loop.
    pub(crate) fn remote(&self) -> &Arc<Remote> {
        &self.remote
    }
}

/// Starts the loop's thread: it serves its node connections, and the listeners it is sent
/// ([`LoopListen`](super::LoopListen)), until it gets [`Stop`](super::Stop).
///
/// `peers`: every loop's door, in worker order. `runtime`: the worker's tokio runtime, which runs
/// what the loop's calls spawn and their timers. `done` is held while the loop has clients (the
/// drain waits for it). A panic inside the loop aborts the process (see the body): a stalled
/// share of every client is worse than a restart.
pub(crate) fn start(
    setup: LoopSetup,
    downstream: Arc<Downstream>,
    runtime: tokio::runtime::Handle,
    done: mpsc::Sender<()>,
    peers: Arc<[Arc<Remote>]>,
) -> io::Result<std::thread::JoinHandle<()>> {
    let index = setup.index;
    std::thread::Builder::new()
        .name(format!("redcar-loop-{index}"))
        .spawn(move || {
            crate::workers::enter_worker(index);
            crate::reactor::enter_loop(index);
            let _runtime = runtime.enter();
            let home = downstream.clone();
            let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Loop::new(setup, &downstream, home, done, peers).run()
            }));
            if served.is_err() {
                // A loop serves a share of every client and node connection: without it the
                // proxy would keep listening but stall those. Better to end now and be
                // restarted by the service manager.
                tracing::error!(worker = index, "a worker's event loop panicked; aborting");
                std::process::abort();
            }
        })
}

impl<'d> Loop<'d> {
    /// Builds the loop's state on its own thread. A drain already started (a shutdown during
    /// start-up) is noticed here and applied at once, so a late-starting loop does not accept
    /// clients.
    fn new(
        setup: LoopSetup,
        d: &'d Downstream,
        home: Arc<Downstream>,
        done: mpsc::Sender<()>,
        peers: Arc<[Arc<Remote>]>,
    ) -> Loop<'d> {
        let LoopSetup {
            index,
            poll,
            remote,
        } = setup;
        let now = Instant::now();
        let cpu = super::thread_cpu::ThreadCpu::of_this_thread();
        let metrics = &*d.metrics;
        let drain_waker = LoopWaker::new(&remote, tokens::token(TokenKind::Loop, 0, 0));
        let mut drain = d.exits.drain.signal(u64::MAX - index as u64);
        // Registers the loop with the drain (or finds it started already).
        let draining = drain
            .poll_started(&mut Context::from_waker(drain_waker.waker()))
            .is_ready();
        let mut event_loop = Loop {
            poll,
            remote,
            clients: Slab::new(),
            admitted: 0,
            listeners: Vec::new(),
            work: Work {
                d,
                router: &d.router,
                index,
                conns: Conns::default(),
                recorder: LoopRecorder {
                    tally: CommandTally::new(metrics),
                    sampler: d.hotkeys.sampler(index as u64),
                    keep_raw: metrics.slowlog.is_enabled() || d.hotkeys.is_enabled(),
                    latency: &d.crowd.latency,
                },
                scratch: Vec::new(),
                now,
                timers: Timers::default(),
                lists: TurnLists::default(),
            },
            woken: Vec::new(),
            mail: Vec::new(),
            next_sweep: now,
            next_chores: now + CHORES,
            cpu_reported: cpu.used().unwrap_or_default(),
            cpu,
            draining: false,
            peers,
            home,
            done: Some(done),
            slow: Some(d.crowd.latency.subscribe()),
            drain,
            drain_waker,
        };
        if draining {
            event_loop.on_drain();
        }
        event_loop
    }
}
