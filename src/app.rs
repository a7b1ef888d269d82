//! Wiring: builds every part from the config, runs the listeners, reloads on SIGHUP, and drains
//! on shutdown.
#![warn(unreachable_pub, missing_docs)]

mod accept;
mod bind;
mod config_view;
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
use crate::config::Config;
use crate::downstream::Downstream;
use config_view::redacted;
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
        tenants: parts.users.tenants().clone(),
        users: parts.users,
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
