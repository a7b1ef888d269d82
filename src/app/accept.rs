//! Where each listener's accept loop runs: on the shared runtime, or (`threading: per-core`) on
//! every worker, each accepting on the same socket so the kernel hands each client to one.

use std::io;
use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};

use crate::downstream::{serve as serve_clients, Accept, Downstream, Facade};
use crate::workers::Workers;

/// A listener that can be handed to other runtimes: detached from this one's I/O driver, copied
/// (one socket, several handles) and registered again on the runtime that will accept on it.
pub(super) trait Movable: Accept + Sized + Send + 'static {
    type Std: Send + 'static;
    fn detach(self) -> io::Result<Self::Std>;
    fn duplicate(socket: &Self::Std) -> io::Result<Self::Std>;
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

/// Starts the accept loop of `listener`: one on this runtime, or one per worker.
pub(super) fn spawn_accept_loops<L: Movable>(
    listener: L,
    workers: Option<&Workers>,
    downstream: &Arc<Downstream>,
    facade: Option<Arc<Facade>>,
    stop: &watch::Receiver<bool>,
    done: &mpsc::Sender<()>,
) -> io::Result<()> {
    let Some(workers) = workers else {
        tokio::spawn(serve_clients(
            listener,
            downstream.clone(),
            facade,
            stop.clone(),
            done.clone(),
        ));
        return Ok(());
    };
    let socket = listener.detach()?;
    for handle in workers.handles().iter() {
        let (socket, downstream) = (L::duplicate(&socket)?, downstream.clone());
        let (facade, stop, done) = (facade.clone(), stop.clone(), done.clone());
        handle.spawn(async move {
            match L::attach(socket) {
                Ok(listener) => serve_clients(listener, downstream, facade, stop, done).await,
                Err(e) => tracing::error!(listener = L::LABEL, "worker cannot accept: {e}"),
            }
        });
    }
    Ok(())
}
