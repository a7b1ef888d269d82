//! Accept loops for the TCP and Unix-socket listeners; each client gets its own session task.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};

use super::session;
use super::ClientConfig;
use crate::router::Router;

/// What every session shares.
pub struct Downstream {
    pub router: Arc<Router>,
    pub config: ClientConfig,
    next_id: AtomicU64,
    connected: AtomicUsize,
}

impl Downstream {
    pub fn new(router: Arc<Router>, config: ClientConfig) -> Downstream {
        Downstream {
            router,
            config,
            next_id: AtomicU64::new(1),
            connected: AtomicUsize::new(0),
        }
    }

    pub(super) fn next_client_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Clients connected right now.
    pub fn connected_clients(&self) -> usize {
        self.connected.load(Ordering::Relaxed)
    }
}

/// Counts a client while its session runs.
struct Connected<'a>(&'a Downstream);

impl<'a> Connected<'a> {
    fn new(downstream: &'a Downstream) -> Self {
        downstream.connected.fetch_add(1, Ordering::Relaxed);
        Connected(downstream)
    }
}

impl Drop for Connected<'_> {
    fn drop(&mut self) {
        self.0.connected.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Accepts TCP clients until `shutdown`. Each session holds a clone of `done`; the caller knows
/// every session has ended when all clones are dropped.
pub async fn serve_tcp(
    listener: TcpListener,
    downstream: Arc<Downstream>,
    mut shutdown: watch::Receiver<bool>,
    done: mpsc::Sender<()>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, _peer)) => {
                let _ = stream.set_nodelay(true);
                spawn_session(stream, &downstream, &shutdown, &done);
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

/// Accepts Unix-socket clients until `shutdown`.
pub async fn serve_unix(
    listener: UnixListener,
    downstream: Arc<Downstream>,
    mut shutdown: watch::Receiver<bool>,
    done: mpsc::Sender<()>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, _peer)) => spawn_session(stream, &downstream, &shutdown, &done),
            Err(e) => accept_failed(e).await,
        }
    }
}

fn spawn_session<S>(
    stream: S,
    downstream: &Arc<Downstream>,
    shutdown: &watch::Receiver<bool>,
    done: &mpsc::Sender<()>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let downstream = downstream.clone();
    let shutdown = shutdown.clone();
    let done = done.clone();
    tokio::spawn(async move {
        let _counted = Connected::new(&downstream);
        session::serve(stream, &downstream, shutdown).await;
        drop(done);
    });
}

/// Out of file descriptors and similar: pause instead of spinning, and keep serving.
async fn accept_failed(error: std::io::Error) {
    tracing::warn!(%error, "accept failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}
