//! Accept loops for the TCP and Unix-socket listeners; each client gets its own session task,
//! registered with the sessions' home (`clients.rs`) while it runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::accept::Accept;
use super::clients::Downstream;
use super::facade::{Endpoint, Facade};
use super::session;
use super::ListenerMetrics;

/// Accepts clients until `shutdown`. Each session holds a clone of `done`; the caller knows
/// every session has ended when all clones are dropped. With a `facade`, sessions answer as a
/// one-node cluster at the address each client reached (see `facade.rs`).
pub(crate) async fn serve<L: Accept>(
    listener: L,
    downstream: Arc<Downstream>,
    facade: Option<Arc<Facade>>,
    mut shutdown: watch::Receiver<bool>,
    done: mpsc::Sender<()>,
) {
    let gauges = downstream.client_metrics.listener(L::LABEL);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept_client() => accepted,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                let endpoint = facade
                    .as_ref()
                    .and_then(|f| announced::<L>(f, &stream, &peer));
                let session = NewSession {
                    peer,
                    listener: L::LABEL,
                    facade: endpoint,
                };
                spawn_session(stream, session, &gauges, &downstream, &done)
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

/// What a new session is told about its client.
struct NewSession {
    peer: Arc<str>,
    listener: &'static str,
    /// Set on a cluster-facade listener: the node the client is told it talks to.
    /// Boxed: most listeners have no facade, and this is part of every session's state.
    facade: Option<Box<Endpoint>>,
}

/// The facade's endpoint for a new client; without one (no announce address and the socket
/// cannot say its own), the client is served as on an ordinary listener.
fn announced<L: Accept>(facade: &Facade, stream: &L::Stream, peer: &str) -> Option<Box<Endpoint>> {
    let endpoint = facade.endpoint(L::local_addr(stream)).map(Box::new);
    if endpoint.is_none() {
        tracing::warn!(%peer, "cluster facade: the client's local address is unknown; serving it without the facade");
    }
    endpoint
}

fn spawn_session<S>(
    stream: S,
    session: NewSession,
    gauges: &ListenerMetrics,
    downstream: &Arc<Downstream>,
    done: &mpsc::Sender<()>,
) where
    S: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + super::movable::Movable
        + Send
        + Unpin
        + 'static,
{
    let count = downstream.crowd.connected.fetch_add(1, Ordering::SeqCst);
    let max = downstream.config.load().max_connections;
    if count >= max {
        downstream.crowd.connected.fetch_sub(1, Ordering::SeqCst);
        downstream.client_metrics.refused.inc();
        let peer = &session.peer;
        tracing::warn!(%peer, max, "client refused: client.max_connections reached");
        tokio::spawn(refuse(stream));
        return;
    }
    let NewSession {
        peer,
        listener,
        facade,
    } = session;
    // Registered before the task starts, so the task holds only what the session needs (its
    // state is part of every connected client's memory).
    let client = downstream.connect(peer.clone(), listener, gauges, done);
    // Boxed: the session's state machine is a few hundred bytes, and an unboxed future is
    // copied whole each time tokio moves it into its task cell; a box moves as one pointer.
    tokio::spawn(Box::pin(async move {
        let downstream = &client.downstream;
        let moving = session::serve(stream, downstream, client.id, &peer, facade).await;
        // `placement: auto` moved the session to another worker: it goes on there.
        if let Some(moving) = moving {
            session::hand_over(moving, client, peer);
        }
    }));
}

/// Tells a client over `client.max_connections` why, as Redis does over `maxclients`, and closes.
async fn refuse<S>(mut stream: S)
where
    S: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let reply = b"-ERR redcar: max number of clients reached (client.max_connections)\r\n";
    let write = async {
        stream.write_all(reply).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// Out of file descriptors and similar: pause instead of spinning, and keep serving.
async fn accept_failed(error: std::io::Error) {
    tracing::warn!(%error, "accept failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}
