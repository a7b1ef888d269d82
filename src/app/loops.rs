//! Per core with event loops (`event_loop`): each worker's loop (`downstream::event_loop`),
//! made at start-up so that nodes deal their connections to it, started once the sessions' home
//! exists, and stopped with the proxy.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::downstream::{start_loop, Downstream, LoopListen, LoopListener, LoopSetup, LoopStop};
use crate::reactor::Remote;

/// The workers' loops.
pub(crate) struct Loops {
    /// Made, not started yet.
    setups: Vec<LoopSetup>,
    /// How to post work to each loop, in worker order; handed to the node pools and to every loop
    /// (each reaches its peers through it).
    remotes: Arc<[Arc<Remote>]>,
    /// One thread per started loop, joined on drop.
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Loops {
    /// One loop per worker, not started.
    /// Fails if the OS refuses an epoll instance or an eventfd for one of them.
    pub(super) fn new(workers: usize) -> std::io::Result<Loops> {
        let setups = (0..workers)
            .map(LoopSetup::new)
            .collect::<std::io::Result<Vec<_>>>()?;
        let remotes = setups.iter().map(|s| s.remote().clone()).collect();
        Ok(Loops {
            setups,
            remotes,
            threads: Vec::new(),
        })
    }

    /// How other threads reach each loop, in worker order.
    pub(super) fn remotes(&self) -> Arc<[Arc<Remote>]> {
        self.remotes.clone()
    }

    /// Starts every loop (before anything needs the node connections they drive: a process
    /// started by an upgrade reads its slot map before it listens); `runtimes[i]` runs what
    /// loop `i`'s calls spawn.
    /// Runs once; a second call finds no setups left and starts nothing. Fails if a thread cannot
    /// be spawned (the loops started so far keep running and stop on drop).
    pub(super) fn start(
        &mut self,
        downstream: &Arc<Downstream>,
        runtimes: &[tokio::runtime::Handle],
        done: &mpsc::Sender<()>,
    ) -> std::io::Result<()> {
        for (index, setup) in std::mem::take(&mut self.setups).into_iter().enumerate() {
            let runtime = runtimes[index % runtimes.len()].clone();
            let peers = self.remotes.clone();
            let thread = start_loop(setup, downstream.clone(), runtime, done.clone(), peers)?;
            self.threads.push(thread);
        }
        Ok(())
    }

    /// Gives every loop its copies of the listeners: `listeners(i)` makes loop `i`'s.
    /// Each loop gets its own duplicate of every listening socket (made by `listeners`), so the
    /// kernel spreads new connections across loops. Fails if one cannot be duplicated.
    pub(super) fn listen(
        &self,
        mut listeners: impl FnMut(usize) -> std::io::Result<Vec<LoopListener>>,
    ) -> std::io::Result<()> {
        for (index, remote) in self.remotes.iter().enumerate() {
            remote.post(Box::new(LoopListen(listeners(index)?)));
        }
        Ok(())
    }
}

/// Stops every loop and waits for its thread: called at the end of `run`, after the drain, so no
/// session is cut short by it.
impl Drop for Loops {
    fn drop(&mut self) {
        for remote in self.remotes.iter() {
            remote.post(Box::new(LoopStop));
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
