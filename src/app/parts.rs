//! The proxy's parts built from the config, in dependency order: metrics, node connections and
//! worker threads, the slot maps (default and named backends), the router, the sessions' home.
//!
//! The order inside [`Parts::build`] is forced by who needs whom: the worker threads and event
//! loops must exist before any node, so each node deals its connections out to them; the backends'
//! maps before the router, which routes by them; the users before the sessions' home, which checks
//! `AUTH` against them. Nothing here opens a socket to a client; the node connections open lazily
//! once a map names the nodes. Docs: docs/architecture.md (the module table), decisions 0001 (one
//! loop per worker) and 0006 (threads and placement).

use std::sync::Arc;

use anyhow::Context;
use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::config_view::reads_replicas;
use crate::auth::{TenantMetrics, Tenants, Users};
use crate::backends::{self, Backends};
use crate::cluster::{ClusterState, Refresher};
use crate::config::Config;
use crate::downstream::{ClientMetrics, Downstream, Spread};
use crate::metrics::Metrics;
use crate::near_cache::{NearCache, NearCacheMetrics};
use crate::protocol::Limits;
use crate::router::Router;
use crate::upstream::Upstreams;
use crate::workers::{Model, Placement, Workers};

/// Everything `run` wires together, built once at start-up.
pub(super) struct Parts {
    /// The one metrics registry every part registers its group in; `/metrics` renders it.
    pub(crate) metrics: Arc<Metrics>,
    /// Every node connection pool, shared by all backends (a node is one pool whatever names it).
    pub(crate) upstreams: Arc<Upstreams>,
    /// Per core: the worker threads (kept alive for the proxy's life); shared: none.
    pub(crate) workers: Option<Workers>,
    /// Per core with `event_loop`: the workers' event loops (started with the listeners).
    pub(crate) loops: Option<super::loops::Loops>,
    /// The default backend's map (`cluster.seeds` or the Sentinel primary).
    pub(crate) cluster: Arc<ClusterState>,
    /// Whether there is a default backend to refresh at all.
    has_default: bool,
    /// The named backends (`backends:`), each with its own map and refresher, started here.
    pub(crate) backends: Backends,
    /// Each backend's map by name, swapped whole when a reload changes the backends; read by the
    /// admin API and by an upgrade's readiness check.
    pub(crate) backend_states: Arc<crate::admin::BackendStates>,
    /// The backend `catch_all` names (what keys without a route use).
    pub(crate) catch_all: Arc<ClusterState>,
    /// What a backend started later (by a reload) needs: the same pools, metrics and limits.
    pub(crate) context: backends::Context,
    /// Reply size limits for the refresher's own queries.
    pub(crate) limits: Limits,
    /// Plans and forwards every command; its route table is set here and replaced by reloads.
    pub(crate) router: Arc<Router>,
    /// The sessions' home: client sessions, placement over workers, hot keys and the near cache.
    pub(crate) downstream: Arc<Downstream>,
    /// The users in effect (their running state is kept across reloads).
    pub(crate) users: Arc<Users>,
}

impl Parts {
    ///
    /// Fails on settings only the parts themselves can judge (an invalid upstream or auth config
    /// despite validation, worker threads or event loops that cannot start); nothing is spawned
    /// before it returns, so a failure leaves no task behind.
    pub(crate) fn build(config: &Config) -> anyhow::Result<Parts> {
        let reply_limits = Limits::default();
        let metrics = super::metrics::hub(&config.metrics);
        let upstreams = Arc::new(
            Upstreams::new(
                config.upstream.clone(),
                reply_limits.clone(),
                metrics.clone(),
                reads_replicas(config),
            )
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?,
        );
        let workers = start_workers(config, &metrics, &upstreams)?;
        let loops = make_loops(config, workers.as_ref(), &upstreams)?;
        let cluster = Arc::new(ClusterState::with_config(&config.cluster));
        let has_default = !config.cluster.seeds.is_empty() || config.sentinel.is_some();
        let context = backends::Context {
            upstreams: upstreams.clone(),
            metrics: metrics.clone(),
            limits: reply_limits.clone(),
            cluster: config.cluster.clone(),
        };
        let backends = Backends::start(
            &config.backends,
            has_default.then(|| cluster.clone()),
            &context,
        );
        // Validation checked that `catch_all` names a backend.
        let catch_all = backends
            .state(&config.catch_all)
            .unwrap_or_else(|| cluster.clone());
        let router = Arc::new(Router::new(
            catch_all.clone(),
            upstreams.clone(),
            metrics.clone(),
            config.router.clone(),
        ));
        router.planner().set_routes(backends.table(
            &config.routes,
            config.routes_ignore_case,
            &metrics,
        ));
        let users = users(config, &metrics)?;
        let downstream = make_downstream(
            config,
            workers.as_ref(),
            &metrics,
            &router,
            &users,
            &upstreams,
            &catch_all,
        );
        Ok(Parts {
            metrics,
            upstreams,
            workers,
            loops,
            cluster,
            has_default,
            backend_states: Arc::new(ArcSwap::from_pointee(backends.states())),
            backends,
            catch_all,
            context,
            limits: reply_limits,
            router,
            downstream,
            users,
        })
    }

    /// The background tasks: the default backend's map (refresher or Sentinel), latency watch,
    /// node health checks, refreshes while a primary is ejected, learning the cluster's commands.
    /// Called once, right after `build`, on the main runtime; every task ends when `stop` turns
    /// true. Custom commands are declared before learning starts, so a declared command is never
    /// replaced by what the cluster reports.
    pub(crate) fn spawn_background(&self, config: &Config, stop: &watch::Receiver<bool>) {
        match &config.sentinel {
            Some(sentinel) => {
                tokio::spawn(crate::sentinel::follow(
                    sentinel.clone(),
                    self.cluster.clone(),
                    self.upstreams.clone(),
                    self.metrics.clone(),
                    stop.clone(),
                ));
            }
            None if self.has_default => {
                let refresher = Refresher::new(
                    self.cluster.clone(),
                    self.upstreams.clone(),
                    self.limits.clone(),
                    self.metrics.clone(),
                );
                tokio::spawn(refresher.run(stop.clone()));
            }
            None => {}
        }
        tokio::spawn(self.downstream.clone().watch_latency(stop.clone()));
        tokio::spawn(crate::upstream::run_health_checks(
            self.upstreams.clone(),
            stop.clone(),
        ));
        tokio::spawn(refresh_while_ejected(
            self.cluster.clone(),
            self.upstreams.clone(),
            stop.clone(),
        ));
        self.router
            .planner()
            .declare_commands(&config.custom_commands);
        tokio::spawn(learn_commands(self.router.clone()));
    }
}

/// Per core: the workers' standing, and on each worker the task that samples how busy it is.
fn start_spread(workers: &Workers, placement: Placement, metrics: &Metrics) -> Arc<Spread> {
    let spread = Spread::new(workers.handles().len(), placement, metrics);
    let spread = Arc::new(spread.with_handles(workers.handles().clone(), metrics));
    for (worker, handle) in workers.handles().iter().enumerate() {
        handle.spawn(spread.clone().watch_busy(worker));
    }
    spread
}

/// Per core: the worker threads exist before any node, so every node's connections are dealt
/// out to them.
fn start_workers(
    config: &Config,
    metrics: &Metrics,
    upstreams: &Upstreams,
) -> anyhow::Result<Option<Workers>> {
    let model = config.threading_model();
    metrics
        .group::<ClientMetrics>()
        .set_workers(model.name(), config.worker_threads());
    match model {
        Model::PerCore => {
            let workers = Workers::start(config.worker_threads())
                .context("cannot start the worker threads (`threading: per-core`)")?;
            upstreams.set_workers(workers.handles().clone());
            tracing::info!(
                workers = workers.handles().len(),
                setting = config.threading.name(),
                placement = config.placement.name(),
                "threading: per-core (one runtime per worker; node connections dealt out to the workers)"
            );
            Ok(Some(workers))
        }
        Model::Shared => {
            tracing::info!(
                workers = config.worker_threads(),
                setting = config.threading.name(),
                "threading: shared (one multi-thread runtime; node connections shared by its workers)"
            );
            Ok(None)
        }
    }
}

/// Once the cluster answers, learns the commands it has that the built-in table lacks.
/// Waits for the first map rather than a fixed delay, so a slow cluster only delays learning. A
/// failure is logged and the built-in table stays in use: commands it lacks are refused, not
/// misrouted.
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

/// An ejected primary usually means a failover is coming: ask for a check of the slot map at
/// once (`CLUSTER INFO`, which changes when the cluster marks the node failed and when it
/// promotes a replica), then every `upstream.outlier.health_check_interval` while any primary of
/// the map is ejected, so the promoted replica is found within one interval of the promotion
/// rather than at the next periodic refresh.
/// Ends when the ejection channel closes (the pools are gone) or at shutdown.
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
            // A check first: the map changes only once the cluster promotes a replica.
            cluster.request_check();
        }
        tokio::select! {
            changed = ejections.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(interval), if primary_ejected => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// The users, with the running state every later reload's users take over.
/// Fails on an auth config the user store refuses (e.g. a secret that cannot be read).
fn users(config: &Config, metrics: &Metrics) -> anyhow::Result<Arc<Users>> {
    let tenants = Tenants::new(metrics.group::<TenantMetrics>());
    let users = Users::from_config_in(&config.auth, &tenants)
        .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    Ok(Arc::new(users))
}

/// Per core with `event_loop`: the workers' event loops, made before any node so that nodes deal
/// their connections to them (started later, with the listeners).
fn make_loops(
    config: &Config,
    workers: Option<&Workers>,
    upstreams: &Upstreams,
) -> anyhow::Result<Option<super::loops::Loops>> {
    let (Some(workers), true) = (workers, config.event_loops()) else {
        return Ok(None);
    };
    let loops = super::loops::Loops::new(workers.handles().len())
        .context("cannot make the workers' event loops (`event_loop`)")?;
    upstreams.set_loops(loops.remotes());
    tracing::info!("event_loop: each worker's loop serves its clients and node connections");
    Ok(Some(loops))
}

/// Where clients are served from: the placement over the workers, the hot keys, the near cache.
/// Hot keys and the near cache are always built; each is inert when its config is off.
fn make_downstream(
    config: &Config,
    workers: Option<&Workers>,
    metrics: &Arc<Metrics>,
    router: &Arc<Router>,
    users: &Arc<Users>,
    upstreams: &Upstreams,
    catch_all: &Arc<ClusterState>,
) -> Arc<Downstream> {
    let spread = workers
        .as_ref()
        .map(|w| start_spread(w, config.placement, metrics));
    let hotkeys = crate::hotkeys::HotKeys::new(&config.hotkeys, config.worker_threads());
    let near_cache = NearCache::start(
        &config.near_cache,
        upstreams.tracking(),
        catch_all.clone(),
        NearCacheMetrics::clone(&metrics.group()),
    );
    Arc::new(
        Downstream::new(
            router.clone(),
            config.client.clone(),
            metrics.clone(),
            users.clone(),
            spread,
        )
        .with_hotkeys(Arc::new(hotkeys))
        .with_near_cache(near_cache),
    )
}
