//! The client listeners (TCP, TLS, Unix socket): each gets its accept loops, per worker or
//! shared, and its cluster facade when one is configured.
//!
//! Which path a socket takes: with per-core event loops (`event_loop`), TCP and Unix clients are
//! accepted by the loops themselves and TLS by accept tasks on the workers; per core without loops,
//! every listener gets one accept task per worker; shared, one task on the main runtime. Each path
//! logs `listening (...)` once per socket, with its address.

use std::sync::Arc;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};

use super::accept::spawn_accept_loops;
use super::parts::Parts;
use crate::config::Config;
use crate::downstream::TlsListener;

/// The sockets clients connect to, bound before the proxy starts.
pub(super) struct ClientSockets {
    /// Plain TCP clients (`listen`); may carry the cluster facade (`cluster_facade`).
    pub(crate) tcp: Option<TcpListener>,
    /// TLS clients (`tls.listen`); the handshake runs on the worker that accepted.
    pub(crate) tls: Option<TcpListener>,
    /// Unix-socket clients (`unix`); never a facade.
    pub(crate) unix: Option<UnixListener>,
}

/// Starts accepting on every bound client socket. Each accept loop and session holds a clone
/// of `done`, so the drain knows when all are gone.
///
/// Fails if the TLS server config cannot be built (certificates unreadable since validation), a
/// socket cannot be moved to the workers, or the loops cannot be given theirs.
pub(super) fn spawn_client_listeners(
    config: &Config,
    sockets: ClientSockets,
    parts: &Parts,
    stop: &watch::Receiver<bool>,
    done: &mpsc::Sender<()>,
) -> anyhow::Result<()> {
    let sockets = match parts.loops.as_ref() {
        Some(loops) => listen_on_loops(config, sockets, loops, &parts.downstream)?,
        None => sockets,
    };
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
/// `None` when the facade is off for this listener (`Facade::new` decides).
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

/// Per core with event loops: the TCP and Unix listeners are served by the loops (each loop
/// accepts on its own copy of each socket); what is left (TLS) gets accept loops as usual.
/// Returns the sockets still to serve (TLS only). Every loop gets its own `try_clone` of each
/// socket, registered on that loop's epoll, and its own listener gauges.
fn listen_on_loops(
    config: &Config,
    sockets: ClientSockets,
    loops: &super::loops::Loops,
    downstream: &Arc<crate::downstream::Downstream>,
) -> anyhow::Result<ClientSockets> {
    use crate::downstream::{ClientMetrics, LoopListener};
    let ClientSockets { tcp, tls, unix } = sockets;
    let tcp = tcp.map(|l| l.into_std()).transpose()?;
    let unix = unix.map(|l| l.into_std()).transpose()?;
    if let Some(tcp) = &tcp {
        tracing::info!(addr = %tcp.local_addr()?, "listening (TCP)");
    }
    if unix.is_some() {
        tracing::info!(path = ?config.unix, "listening (Unix socket)");
    }
    let facade = facade(&config.cluster_facade, false, "TCP");
    let metrics = downstream.metrics.group::<ClientMetrics>();
    let listeners = |_: usize| -> std::io::Result<Vec<LoopListener>> {
        let mut each = Vec::new();
        if let Some(tcp) = &tcp {
            let gauges = metrics.listener("tcp");
            each.push(LoopListener::tcp(tcp.try_clone()?, facade.clone(), gauges)?);
        }
        if let Some(unix) = &unix {
            let gauges = metrics.listener("unix");
            each.push(LoopListener::unix(unix.try_clone()?, gauges)?);
        }
        Ok(each)
    };
    loops
        .listen(listeners)
        .map_err(|e| anyhow::anyhow!("cannot give the workers' event loops the listeners: {e}"))?;
    Ok(ClientSockets {
        tcp: None,
        tls,
        unix: None,
    })
}
