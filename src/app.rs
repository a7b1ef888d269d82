//! Wiring: builds every part from the config, runs the listeners, reloads on SIGHUP, and drains
//! on shutdown.
#![warn(unreachable_pub, missing_docs)]

mod accept;
mod bind;
mod fd_limit;
mod listen;
mod metrics;
mod parts;
mod reload;

pub use reload::ConfigSource;

use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use arc_swap::ArcSwap;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, watch};

use crate::admin::AdminState;
use crate::cluster::ClusterState;
use crate::config::Config;
use crate::downstream::Downstream;
use crate::router::Router;
use crate::upstream::Upstreams;
use parts::Parts;

/// Sockets bound before the proxy starts, so tests can bind port 0 and read the address.
#[derive(Default)]
pub struct Listeners {
    /// The TCP socket for `listen` (its local address is where clients connect).
    pub tcp: Option<TcpListener>,
    /// The TCP socket for `tls.listen` (TLS starts once the proxy runs).
    pub(crate) tls: Option<TcpListener>,
    pub(crate) unix: Option<UnixListener>,
    pub(crate) admin: Option<TcpListener>,
}

impl Listeners {
    /// Binds everything the config asks for.
    pub async fn bind(config: &Config) -> anyhow::Result<Listeners> {
        let mut listeners = Listeners::default();
        // Every client listener gets the same listen queue (`client.accept_backlog`).
        let backlog = bind::effective_backlog(config.client.accept_backlog);
        if let Some(addr) = &config.listen {
            listeners.tcp = Some(bind::tcp(addr, backlog, "listen")?);
        }
        if let Some(path) = &config.unix {
            listeners.unix = Some(bind_unix(path, &config.unix_permissions, backlog)?);
        }
        if let Some(addr) = &config.tls.listen {
            listeners.tls = Some(bind::tcp(addr, backlog, "tls.listen")?);
        }
        if let Some(addr) = &config.admin.listen {
            let admin = TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (`admin`)"))?;
            listeners.admin = Some(admin);
        }
        Ok(listeners)
    }
}

/// Replaces a stale socket file from an earlier run, then applies `permissions` (octal).
fn bind_unix(path: &Path, permissions: &str, backlog: u32) -> anyhow::Result<UnixListener> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        anyhow::ensure!(
            meta.file_type().is_socket(),
            "`unix` path {} exists and is not a socket; refusing to replace it",
            path.display()
        );
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove stale socket {}", path.display()))?;
    }
    let listener = bind::unix(path, backlog)?;
    let mode = u32::from_str_radix(permissions, 8).context("`unix_permissions` is not octal")?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set permissions {permissions} on {}", path.display()))?;
    Ok(listener)
}

/// Once the cluster answers, learns the commands it has that the built-in table lacks.
async fn learn_commands(router: Arc<Router>) {
    let cluster = router.cluster().clone();
    let mut seen = 0;
    while cluster.topology().is_none() {
        seen = cluster.changed_since(seen).await;
    }
    match router.planner().learn_commands().await {
        Ok(0) => tracing::debug!("the cluster has no commands beyond the built-in table"),
        Ok(learned) => tracing::info!(
            learned,
            "learned commands from the cluster (modules or newer server)"
        ),
        Err(error) => {
            tracing::warn!(%error, "could not learn commands from the cluster; using the built-in table")
        }
    }
}

/// An ejected primary usually means a failover is coming: ask for a fresh slot map at once, then
/// every `upstream.outlier.health_check_interval` while any primary of the map is ejected, so
/// the promoted replica is found within one interval of the promotion rather than at the next
/// periodic refresh.
async fn refresh_while_ejected(
    cluster: Arc<ClusterState>,
    upstreams: Arc<Upstreams>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ejections = upstreams.ejections();
    loop {
        // Read each round: a reload may change it.
        let interval = upstreams.outlier().health_check_interval;
        let primary_ejected = cluster
            .topology()
            .is_some_and(|t| t.shards().iter().any(|s| s.primary.is_ejected()));
        if primary_ejected {
            cluster.request_refresh();
        }
        tokio::select! {
            changed = ejections.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(interval), if primary_ejected => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Runs the proxy until `shutdown` completes, then drains: listeners stop, sessions finish the
/// replies they owe (bounded by `drain_timeout`). On SIGHUP the config is loaded again from
/// `source` and applied (see `reload`).
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
    source: ConfigSource,
) -> anyhow::Result<()> {
    // Every client and node connection is a descriptor: take all the kernel allows.
    fd_limit::raise(config.client.max_connections);
    let (stop_tx, stop_rx) = watch::channel(false);
    let hangup = reload::watch_sighup();
    let parts = Parts::build(&config)?;
    parts.spawn_background(&config, &stop_rx);
    let (done_tx, mut done_rx) = mpsc::channel::<()>(1);
    let Listeners {
        tcp,
        tls,
        unix,
        admin,
    } = listeners;
    let sockets = listen::ClientSockets { tcp, tls, unix };
    listen::spawn_client_listeners(&config, sockets, &parts, &stop_rx, &done_tx)?;
    let shown = Arc::new(ArcSwap::from_pointee(redacted(&config)));
    let current = Arc::new(ArcSwap::from_pointee(config.clone()));
    let downstream = parts.downstream.clone();
    if let Some(admin) = admin {
        spawn_admin(admin, &config, &parts, &shown, &stop_rx)?;
    }
    let workers = parts.workers;
    let reloadable = reload::Reloadable {
        router: parts.router,
        downstream: downstream.clone(),
        upstreams: parts.upstreams,
        cluster: parts.cluster,
        backends: parts.backends,
        backend_states: parts.backend_states,
        context: parts.context,
        metrics: parts.metrics,
        shown,
        current: current.clone(),
        secrets: config.secret_digests()?,
    };
    if let Some(hangup) = hangup {
        tokio::spawn(reload::on_sighup(
            hangup,
            reloadable,
            source,
            stop_rx.clone(),
        ));
    }
    drop(done_tx);

    shutdown.await;
    // A reload may have changed `drain_timeout`.
    drain(
        &downstream,
        &stop_tx,
        &mut done_rx,
        current.load().drain_timeout,
    )
    .await;
    if let Some(path) = &config.unix {
        let _ = std::fs::remove_file(path);
    }
    // Per core, the worker threads end with the proxy, after the drain.
    drop(workers);
    Ok(())
}

/// Serves the admin API on `admin` until `stop`, behind `admin.token` when one is set.
fn spawn_admin(
    admin: TcpListener,
    config: &Config,
    parts: &Parts,
    shown: &Arc<ArcSwap<serde_json::Value>>,
    stop: &watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let token = config.admin.token_digest().map_err(anyhow::Error::msg)?;
    warn_if_open(admin.local_addr()?, token.is_some());
    let state = AdminState {
        cluster: parts.catch_all.clone(),
        backends: parts.backend_states.clone(),
        downstream: parts.downstream.clone(),
        metrics: parts.metrics.clone(),
        config: shown.clone(),
        sampler: Default::default(),
        token,
    };
    tokio::spawn(crate::admin::serve(admin, state, stop.clone()));
    Ok(())
}

/// Stops the listeners and tells the sessions to finish, then waits until every session and
/// accept loop has dropped its `done` sender, at most `timeout`.
async fn drain(
    downstream: &Downstream,
    stop: &watch::Sender<bool>,
    done: &mut mpsc::Receiver<()>,
    timeout: Duration,
) {
    tracing::info!(
        clients = downstream.connected_clients(),
        "shutting down: draining clients"
    );
    let _ = stop.send(true);
    downstream.drain();
    // `recv` returns None when every sender is gone.
    if tokio::time::timeout(timeout, done.recv()).await.is_err() {
        tracing::warn!(
            clients = downstream.connected_clients(),
            "drain timeout: closing remaining clients"
        );
    }
}

/// True when some read policy (`router.read_policy` or a route's) reads from replicas: node
/// connections then send READONLY first.
pub(crate) fn reads_replicas(config: &Config) -> bool {
    config.router.read_policy.uses_replicas()
        || config
            .routes
            .iter()
            .any(|r| r.read_policy.is_some_and(|p| p.uses_replicas()))
}

/// Logs the admin address; warns when anyone beyond this host may read the admin API.
fn warn_if_open(addr: std::net::SocketAddr, token: bool) {
    tracing::info!(addr = %addr, token, "admin listening");
    if !token && !addr.ip().is_loopback() {
        tracing::warn!(
            addr = %addr,
            "the admin API listens beyond loopback without a token: whoever reaches it reads \
             metrics, topology, client addresses and the config; set `admin.token` \
             (--admin-token, REDCAR_ADMIN_TOKEN) or bind `admin` to 127.0.0.1"
        );
    }
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

/// The configuration as `/config` shows it. Passwords (`auth`) serialize as `(redacted)`, so no
/// secret leaves the process.
fn redacted(config: &Config) -> serde_json::Value {
    serde_json::to_value(config).unwrap_or(serde_json::Value::Null)
}
