//! The threading model (`threading: auto | shared | per-core`, and what `auto` settles to), how
//! per-core workers share new clients (`placement: even | pack | auto`, applied by
//! `downstream::spread`), and the per-core worker threads: one single-threaded tokio runtime per
//! core, each running its own accept loop, its clients' sessions and its share of the node
//! connections, and which of them the current thread is.
//!
//! The alternative (`threading: shared`) is one multi-thread runtime whose workers steal each
//! other's tasks: a session and the node connection it queues on may run on different threads,
//! so replies and queued commands cross threads and wake parked workers (futex). Per core, a
//! node's `connections_per_node` connections are dealt out to the workers in turn, and a session
//! uses one on its own thread, so its whole path — client socket, node connection, reply — stays
//! there, with no more connections than the shared runtime opens. See docs/decisions/0006-threads-and-placement.md.
#![warn(unreachable_pub, missing_docs)]

use std::cell::Cell;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::runtime::Handle;
use tokio::sync::watch;

/// How the data plane uses threads (`threading`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Threading {
    /// `per-core` when every worker gets a connection to every node of its own
    /// (`workers` ≤ `connections_per_node`), `shared` otherwise.
    #[default]
    Auto,
    /// One multi-thread runtime; node connections shared by all workers.
    Shared,
    /// One single-threaded runtime per worker; node connections dealt out to the workers.
    PerCore,
}

/// The threading model that runs: `threading` with `auto` settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// One multi-thread runtime; node connections shared by all workers.
    Shared,
    /// One single-threaded runtime per worker thread.
    PerCore,
}

impl Model {
    /// How the log and the docs name it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Model::Shared => "shared",
            Model::PerCore => "per-core",
        }
    }
}

impl Threading {
    /// The model that runs: `auto` settled for `workers` threads and `connections_per_node`.
    /// Per core pays only while each worker has its own connection to every node: a worker
    /// without one hands every command to another thread, which is what `shared` does anyway,
    /// and then `shared` also balances the load across threads.
    pub(crate) fn resolve(self, workers: usize, connections_per_node: usize) -> Model {
        match self {
            Threading::Auto if workers <= connections_per_node => Model::PerCore,
            Threading::Auto | Threading::Shared => Model::Shared,
            Threading::PerCore => Model::PerCore,
        }
    }

    /// The name used in the config file and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Threading::Auto => "auto",
            Threading::Shared => "shared",
            Threading::PerCore => "per-core",
        }
    }
}

impl std::str::FromStr for Threading {
    type Err = String;

    fn from_str(text: &str) -> Result<Threading, String> {
        match text {
            "auto" => Ok(Threading::Auto),
            "shared" => Ok(Threading::Shared),
            "per-core" => Ok(Threading::PerCore),
            other => Err(format!(
                "`{other}`: expected `auto`, `shared` or `per-core`"
            )),
        }
    }
}

/// How per-core workers share new clients (`placement`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// New clients packed as with `pack`; then busy sessions move between workers at safe
    /// points: pipelining ones are kept even, and an overflowing worker hands clients to one with
    /// room (`downstream::moves`).
    #[default]
    Auto,
    /// Every worker holds about as many clients as the others (within one).
    Even,
    /// New clients go to the first worker that is not yet busy (`downstream::spread`), so a
    /// light load runs on few threads, with bigger batches and fewer wake-ups per command.
    Pack,
}

impl Placement {
    /// The name used in the config file and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Placement::Auto => "auto",
            Placement::Even => "even",
            Placement::Pack => "pack",
        }
    }
}

impl std::str::FromStr for Placement {
    type Err = String;

    fn from_str(text: &str) -> Result<Placement, String> {
        match text {
            "auto" => Ok(Placement::Auto),
            "even" => Ok(Placement::Even),
            "pack" => Ok(Placement::Pack),
            other => Err(format!("`{other}`: expected `auto`, `even` or `pack`")),
        }
    }
}

thread_local! {
    static WORKER: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Marks the calling thread as (a thread of) per-core worker `index`: a worker's event loop.
pub(crate) fn enter_worker(index: usize) {
    WORKER.with(|w| w.set(Some(index)));
}

/// The per-core worker this thread is, if it is one.
#[inline]
pub(crate) fn current() -> Option<usize> {
    WORKER.with(Cell::get)
}

/// Running per-core workers; dropping this stops them (after their tasks were told to finish).
pub(crate) struct Workers {
    /// Each worker's runtime, by worker index: where its sessions and connections run.
    handles: Arc<[Handle]>,
    /// Set when this is dropped: every worker finishes its tasks and ends.
    stop: watch::Sender<bool>,
    /// The worker threads, joined on drop.
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    /// Starts `count` worker threads, each with a single-threaded runtime (I/O and timers on).
    pub(crate) fn start(count: usize) -> std::io::Result<Workers> {
        let (stop, stopped) = watch::channel(false);
        let mut handles = Vec::with_capacity(count);
        let mut threads = Vec::with_capacity(count);
        for index in 0..count {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(runtime.handle().clone());
            let mut stopped = stopped.clone();
            let thread = std::thread::Builder::new()
                .name(format!("redcar-worker-{index}"))
                .spawn(move || {
                    WORKER.with(|w| w.set(Some(index)));
                    runtime.block_on(async move {
                        let _ = stopped.wait_for(|stop| *stop).await;
                    });
                })?;
            threads.push(thread);
        }
        Ok(Workers {
            handles: handles.into(),
            stop,
            threads,
        })
    }

    /// One runtime handle per worker, in worker order.
    pub(crate) fn handles(&self) -> &Arc<[Handle]> {
        &self.handles
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_knows_its_index_and_other_threads_are_none() {
        assert_eq!(current(), None);
        let workers = Workers::start(2).expect("workers");
        for (index, handle) in workers.handles().iter().enumerate() {
            let (tx, rx) = std::sync::mpsc::channel();
            handle.spawn(async move {
                let _ = tx.send(current());
            });
            assert_eq!(rx.recv().expect("task ran"), Some(index));
        }
    }

    #[test]
    fn threading_parses_its_three_names() {
        for model in [Threading::Auto, Threading::Shared, Threading::PerCore] {
            assert_eq!(model.name().parse::<Threading>(), Ok(model));
        }
        assert!("both".parse::<Threading>().is_err());
    }

    #[test]
    fn auto_is_per_core_only_while_every_worker_has_a_connection_per_node() {
        assert_eq!(Threading::Auto.resolve(2, 2), Model::PerCore);
        assert_eq!(Threading::Auto.resolve(1, 2), Model::PerCore);
        assert_eq!(Threading::Auto.resolve(4, 2), Model::Shared);
        assert_eq!(Threading::Auto.resolve(8, 8), Model::PerCore);
        // An explicit choice stands whatever the counts.
        assert_eq!(Threading::Shared.resolve(1, 2), Model::Shared);
        assert_eq!(Threading::PerCore.resolve(8, 1), Model::PerCore);
    }
}
