//! The client listeners (TCP, TLS, Unix socket): each gets its accept loops, per worker or
//! shared, and its cluster facade when one is configured.

use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};

use super::accept::spawn_accept_loops;
use super::parts::Parts;
use crate::config::Config;
use crate::downstream::TlsListener;

/// The sockets clients connect to, bound before the proxy starts.
pub(super) struct ClientSockets {
    pub(crate) tcp: Option<TcpListener>,
    pub(crate) tls: Option<TcpListener>,
    pub(crate) unix: Option<UnixListener>,
}

/// Starts accepting on every bound client socket. Each accept loop and session holds a clone
/// of `done`, so the drain knows when all are gone.
pub(super) fn spawn_client_listeners(
    config: &Config,
    sockets: ClientSockets,
    parts: &Parts,
    stop: &watch::Receiver<bool>,
    done: &mpsc::Sender<()>,
) -> anyhow::Result<()> {
    let workers = parts.workers.as_ref();
    let downstream = &parts.downstream;
    if let Some(tcp) = sockets.tcp {
        tracing::info!(addr = %tcp.local_addr()?, "listening (TCP)");
        let facade = facade(&config.cluster_facade, false, "TCP");
        spawn_accept_loops(tcp, |tcp| tcp, workers, downstream, facade, stop, done)?;
    }
    if let Some(tcp) = sockets.tls {
        let server_config = config
            .tls
            .server_config()
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
        tracing::info!(addr = %tcp.local_addr()?, "listening (TLS)");
        let (timeout, stop_tls) = (config.tls.handshake_timeout, stop.clone());
        let facade = facade(&config.tls.cluster_facade, true, "TLS");
        spawn_accept_loops(
            tcp,
            move |tcp| TlsListener::start(tcp, server_config.clone(), timeout, stop_tls.clone()),
            workers,
            downstream,
            facade,
            stop,
            done,
        )?;
    }
    if let Some(unix) = sockets.unix {
        tracing::info!(path = ?config.unix, "listening (Unix socket)");
        // Never a facade: a Unix socket cannot be announced as a cluster node (see validate.rs).
        spawn_accept_loops(unix, |unix| unix, workers, downstream, None, stop, done)?;
    }
    Ok(())
}

/// A listener's cluster facade, logged when it is on.
fn facade(
    config: &crate::downstream::FacadeConfig,
    tls: bool,
    listener: &str,
) -> Option<Arc<crate::downstream::Facade>> {
    let facade = crate::downstream::Facade::new(config, tls)?;
    tracing::info!(
        listener,
        announce = %facade.describe(),
        "cluster facade on: answering CLUSTER SLOTS/SHARDS/NODES/INFO/MYID as a one-node cluster"
    );
    Some(facade)
}
