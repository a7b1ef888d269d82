//! Wiring: builds every part from the config, runs the listeners, reloads on SIGHUP, and drains
//! on shutdown.
//!
//! `main.rs` calls [`Listeners::bind`] then [`run`]; tests do the same with port 0. The order in
//! `run` matters and is what a newcomer should keep:
//!
//! 1. raise the descriptor limit, build every part (`Parts::build`) and start its background tasks;
//!    the per-core event loops start before any listener, since they drive the node connections
//!    that read the first slot map;
//! 2. when started by an upgrade, wait until every backend has a complete slot map, then adopt the
//!    clients the old process hands over (docs/operations.md, "Upgrading");
//! 3. start the client listeners and the admin API, then announce readiness (pid file, systemd
//!    `READY=1`);
//! 4. wait for the shutdown future or an upgrade's commit; stop accepting first, then hand the
//!    clients over or drain them within `drain_timeout`, and only then stop the workers.
//!
//! Reloads (SIGHUP) run beside all this and swap parts in place (`reload.rs`); what a reload may
//! change is listed in docs/configuration.md.
#![warn(unreachable_pub, missing_docs)]

mod accept;
mod bind;
mod config_view;
mod convert_envoy;
mod fd_limit;
mod inherit;
mod listen;
mod loops;
mod metrics;
mod parts;
mod reload;
mod upgrade;

pub use convert_envoy::run as convert_envoy;
pub use reload::ConfigSource;
pub use upgrade::upgrade_command;

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
use metrics::ProcessMetrics;
use parts::Parts;

/// Sockets bound before the proxy starts, so tests can bind port 0 and read the address.
#[derive(Default)]
pub struct Listeners {
    /// The TCP socket for `listen` (its local address is where clients connect).
    /// Public so tests can bind `127.0.0.1:0` and read the port; the other fields stay
    /// crate-private.
    pub tcp: Option<TcpListener>,
    /// The TCP socket for `tls.listen` (TLS starts once the proxy runs).
    pub(crate) tls: Option<TcpListener>,
    /// The Unix socket for `unix`, with `unix_permissions` already applied.
    pub(crate) unix: Option<UnixListener>,
    /// The admin API's socket (`admin.listen`); never handed to the workers.
    pub(crate) admin: Option<TcpListener>,
    /// Started by an upgrade in place: the connection to the process this one replaces.
    /// Set only by `inherit_or_bind`; [`Listeners::bind`] leaves it empty.
    takeover: Option<upgrade::Takeover>,
}

impl Listeners {
    /// Binds everything the config asks for.
    /// Fails if any address is taken or malformed, a `unix` path exists and is not a socket, or the
    /// permissions cannot be set; nothing is left half-bound that the caller must clean up (the
    /// sockets drop with the error). Tests read the bound addresses back from the fields.
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
            listeners.admin = Some(bind_admin(addr).await?);
        }
        Ok(listeners)
    }
}

/// The admin listener at `addr`.
/// A plain bind with the OS's default backlog: the admin API takes few connections.
async fn bind_admin(addr: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (`admin`)"))
}

/// Replaces a stale socket file from an earlier run, then applies `permissions` (octal).
/// Refuses to delete anything that is not a socket, so a wrong `unix` path cannot remove a file.
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
/// `source` and applied (see `reload`). On SIGUSR2 a new process is started to take over
/// (`upgrade`); once it has, this one hands its clients over and returns. Started by such an
/// upgrade (`listeners` came from the old process), it first gets ready, then takes over.
///
/// Fails only while starting (a part that cannot be built, event loops that do not start, an
/// upgrade that does not get ready in `upgrade_timeout`); once serving, errors are logged and the
/// proxy keeps running.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
    source: ConfigSource,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    // Every client and node connection is a descriptor: take all the kernel allows.
    fd_limit::raise(config.client.max_connections);
    let (stop_tx, stop_rx) = watch::channel(false);
    // The accept loops and the admin server stop first: at shutdown, or at an upgrade's `Go`.
    let (accept_tx, accept_rx) = watch::channel(false);
    let hangup = reload::watch_sighup();
    let usr2 = upgrade::watch_sigusr2();
    let parts = Parts::build(&config)?;
    parts.spawn_background(&config, &stop_rx);
    let (done_tx, mut done_rx) = mpsc::channel::<()>(1);
    let to_pass = listeners.to_pass(&config)?;
    let Listeners {
        tcp,
        tls,
        unix,
        admin,
        takeover,
    } = listeners;
    let mut parts = parts;
    // The loops drive node connections: they run before a slot map is read.
    start_loops(&mut parts, &done_tx)?;
    let generation = take_over(takeover, &config, &parts, started, &done_tx).await?;
    let sockets = listen::ClientSockets { tcp, tls, unix };
    listen::spawn_client_listeners(&config, sockets, &parts, &accept_rx, &done_tx)?;
    let shown = Arc::new(ArcSwap::from_pointee(redacted(&config)));
    let current = Arc::new(ArcSwap::from_pointee(config.clone()));
    let downstream = parts.downstream.clone();
    if let Some(admin) = admin {
        spawn_admin(admin, &config, &parts, &shown, &accept_rx)?;
    }
    let pid_file = announce(&config, &parts, generation);
    let workers = parts.workers;
    let loops = parts.loops;
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
    watch_reloads(reloadable, hangup, source, &stop_rx);
    let (current_config, pid) = (current.clone(), pid_file.clone());
    let old = upgrade::Old::new(to_pass, generation, current_config, pid, downstream.clone());
    let upgrades = usr2.map(|usr2| tokio::spawn(upgrade::watch(old, usr2, accept_rx.clone())));
    drop(done_tx);
    let committed = upgrade::until_taken_over(shutdown, upgrades).await;
    let _ = accept_tx.send(true);
    // A reload may have changed `drain_timeout`.
    let drain_timeout = current.load().drain_timeout;
    let unix = config.unix.clone();
    let ending = Ending {
        downstream,
        unix,
        pid_file,
    };
    ending
        .wind_down(committed, &mut done_rx, drain_timeout)
        .await;
    let _ = stop_tx.send(true);
    // Per core, the worker threads end with the proxy, after the drain: the loops first (their
    // connects run on the workers' runtimes).
    drop(loops);
    drop(workers);
    Ok(())
}

/// Per core with `event_loop`: starts the workers' event loops (they get the listeners later).
/// Fails if a loop thread cannot be started; without `event_loop` there is nothing to start.
fn start_loops(parts: &mut Parts, done: &mpsc::Sender<()>) -> anyhow::Result<()> {
    if let Some((loops, workers)) = parts.loops.as_mut().zip(parts.workers.as_ref()) {
        loops
            .start(&parts.downstream, workers.handles(), done)
            .map_err(|e| anyhow::anyhow!("cannot start the workers' event loops: {e}"))?;
    }
    Ok(())
}

/// SIGHUP loads the config again from `source` and applies what it may (see `reload`).
/// Without a SIGHUP handler (it could not be installed) reloads are off and nothing is spawned.
fn watch_reloads(
    reloadable: reload::Reloadable,
    hangup: Option<tokio::signal::unix::Signal>,
    source: ConfigSource,
    stop: &watch::Receiver<bool>,
) {
    if let Some(hangup) = hangup {
        tokio::spawn(reload::on_sighup(hangup, reloadable, source, stop.clone()));
    }
}

/// What the end of `run` needs.
struct Ending {
    /// The sessions to drain or hand over.
    downstream: Arc<Downstream>,
    /// The socket file to remove after a drain; left alone after a hand-over (the new process owns
    /// it).
    unix: Option<std::path::PathBuf>,
    /// Removed after a drain only if it still holds this process's pid.
    pid_file: Option<upgrade::PidFile>,
}

impl Ending {
    /// The listeners have stopped: hands the clients over to the process that took over, or
    /// drains them (shutdown), the socket file and the pid file removed.
    async fn wind_down(
        self,
        committed: Option<upgrade::Committed>,
        done: &mut mpsc::Receiver<()>,
        drain_timeout: Duration,
    ) {
        if let Some(committed) = committed {
            // The new process owns the socket file and the pid file now.
            return committed
                .hand_over(self.downstream, done, drain_timeout)
                .await;
        }
        drain(&self.downstream, done, drain_timeout).await;
        if let Some(path) = &self.unix {
            let _ = std::fs::remove_file(path);
        }
        if let Some(pid_file) = &self.pid_file {
            pid_file.remove_if_own();
        }
    }
}

/// Started by an upgrade: gets ready (a complete slot map within `upgrade_timeout` of
/// `started`), tells the old process, and once told to go, adopts the clients it hands over.
/// Returns this process's restart generation (0 when started by hand).
async fn take_over(
    takeover: Option<upgrade::Takeover>,
    config: &Config,
    parts: &Parts,
    started: std::time::Instant,
    done: &mpsc::Sender<()>,
) -> anyhow::Result<u64> {
    let Some(takeover) = takeover else {
        return Ok(0);
    };
    let (generation, old_pid) = (takeover.generation, takeover.old_pid);
    let ready = || {
        parts.catch_all.is_ready()
            && parts
                .backend_states
                .load()
                .iter()
                .all(|(_, b)| b.is_ready())
    };
    let taken = takeover
        .ready(ready, started, config.upgrade_timeout)
        .await?;
    parts.downstream.reserve_ids(taken.next_id);
    let process = parts.metrics.group::<ProcessMetrics>();
    process.set_old_pid(Some(old_pid));
    let workers = parts.workers.as_ref().map(|w| w.handles().clone());
    let on_done = Box::new(move || process.set_old_pid(None));
    taken.adopt_clients(parts.downstream.clone(), workers, done.clone(), on_done);
    tracing::info!(old_pid, generation, "upgrade: this process took over");
    Ok(generation)
}

/// Tells the world this process serves: the restart generation, the pid file, systemd.
/// A pid file that cannot be written is logged, not fatal: the proxy serves either way. After an
/// upgrade, `MAINPID` tells systemd which process it now supervises.
fn announce(config: &Config, parts: &Parts, generation: u64) -> Option<upgrade::PidFile> {
    parts
        .metrics
        .group::<ProcessMetrics>()
        .set_generation(generation);
    let pid_file = config.pid_file.as_deref().map(upgrade::PidFile::new);
    if let Some(pid_file) = &pid_file {
        if let Err(error) = pid_file.write_own() {
            tracing::error!(%error, path = ?config.pid_file, "cannot write the pid file");
        }
    }
    match generation {
        0 => upgrade::notify("READY=1"),
        _ => upgrade::notify(&format!("MAINPID={}\nREADY=1", std::process::id())),
    }
    pid_file
}

/// Serves the admin API on `admin` until `stop`, behind `admin.token` when one is set.
/// Fails only if `admin.token` cannot be resolved (file or variable missing); the admin API sees
/// the config through `shown`, the redacted copy a reload replaces.
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

/// Tells the sessions to finish (the listeners were stopped), then waits until every session
/// and accept loop has dropped its `done` sender, at most `timeout`.
/// Sessions still open after `timeout` are not waited for: `run` returns and they close with the
/// runtime.
async fn drain(downstream: &Downstream, done: &mut mpsc::Receiver<()>, timeout: Duration) {
    tracing::info!(
        clients = downstream.connected_clients(),
        "shutting down: draining clients"
    );
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
