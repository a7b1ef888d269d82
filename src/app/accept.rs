//! Where each listener's accept loop runs: on the shared runtime, or (`threading: per-core`) on
//! every worker, each accepting on the same socket so the kernel hands each client to one. A TLS
//! listener is built on each worker too, so its handshakes and sessions run there.
//!
//! Per core, the socket is detached from the main runtime and a duplicate of it is registered on
//! each worker's runtime: several accept loops on one socket, and whichever worker's loop wakes
//! first takes the client, gated by how busy each worker is (`Gated`, docs/decisions/0006). With
//! `event_loop` the loops accept instead (`loops.rs`); this module is then not used for the plain
//! TCP and Unix listeners.

use std::io;
use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};

use crate::downstream::{serve as serve_clients, Accept, Downstream, Facade, Gated};
use crate::workers::Workers;

/// A listener that can be handed to other runtimes: detached from this one's I/O driver, copied
/// (one socket, several handles) and registered again on the runtime that will accept on it.
pub(super) trait Movable: Sized + Send + 'static {
    /// The std socket type, which is `Send` and belongs to no runtime.
    type Std: Send + 'static;
    /// Deregisters from the current runtime; fails if the socket cannot be taken back (e.g.
    /// closed).
    fn detach(self) -> io::Result<Self::Std>;
    /// A new descriptor for the same socket (`dup`); each worker owns one and closes it on exit.
    fn duplicate(socket: &Self::Std) -> io::Result<Self::Std>;
    /// Registers on the runtime this is called from, so it must run on the worker's runtime.
    fn attach(socket: Self::Std) -> io::Result<Self>;
}

impl Movable for TcpListener {
    type Std = std::net::TcpListener;

    fn detach(self) -> io::Result<Self::Std> {
        self.into_std()
    }

    fn duplicate(socket: &Self::Std) -> io::Result<Self::Std> {
        socket.try_clone()
    }

    fn attach(socket: Self::Std) -> io::Result<Self> {
        TcpListener::from_std(socket)
    }
}

impl Movable for UnixListener {
    type Std = std::os::unix::net::UnixListener;

    fn detach(self) -> io::Result<Self::Std> {
        self.into_std()
    }

    fn duplicate(socket: &Self::Std) -> io::Result<Self::Std> {
        socket.try_clone()
    }

    fn attach(socket: Self::Std) -> io::Result<Self> {
        UnixListener::from_std(socket)
    }
}

/// Starts the accept loop of `listener`: one on this runtime, or one per worker. `build` turns
/// the socket into what accepts clients (the listener itself, or a TLS listener around it) on the
/// runtime that will run the loop, so its tasks and sessions run there. Per core, each worker's
/// socket is gated by the workers' client counts ([`Gated`]).
///
/// Fails only if the socket cannot be detached or duplicated, before any loop starts; a worker that
/// cannot attach its copy logs the error and that worker accepts nothing. Every loop ends when
/// `stop` turns true, dropping its `done` sender, which is what the drain waits for.
pub(super) fn spawn_accept_loops<L, A>(
    listener: L,
    build: impl Fn(Gated<L>) -> A + Clone + Send + 'static,
    workers: Option<&Workers>,
    downstream: &Arc<Downstream>,
    facade: Option<Arc<Facade>>,
    stop: &watch::Receiver<bool>,
    done: &mpsc::Sender<()>,
) -> io::Result<()>
where
    L: Movable,
    A: Accept + Send + 'static,
{
    let Some(workers) = workers else {
        tokio::spawn(serve_clients(
            build(Gated::new(listener, None)),
            downstream.clone(),
            facade,
            stop.clone(),
            done.clone(),
        ));
        return Ok(());
    };
    let socket = listener.detach()?;
    for handle in workers.handles().iter() {
        let (socket, downstream, build) =
            (L::duplicate(&socket)?, downstream.clone(), build.clone());
        let (facade, stop, done) = (facade.clone(), stop.clone(), done.clone());
        handle.spawn(async move {
            match L::attach(socket) {
                Ok(listener) => {
                    let listener = build(Gated::new(listener, downstream.spread()));
                    serve_clients(listener, downstream, facade, stop, done).await
                }
                Err(e) => tracing::error!(listener = A::LABEL, "worker cannot accept: {e}"),
            }
        });
    }
    Ok(())
}
