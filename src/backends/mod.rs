//! Named backends (`backends:`) and the route table over them (`routes:`): each backend is a
//! `ClusterState` with its own topology source, started and stopped as a unit, so the router
//! serves a standalone node or a Sentinel-managed primary exactly like a cluster (a one-shard
//! map owning every slot).
//!
//! What holds across reloads: a backend whose entry did not change keeps running, with its map and
//! its nodes' connections, so a reload that only edits routes costs no reconnects; a changed or
//! removed backend is stopped by dropping it (its topology source ends when the stop sender goes)
//! and a changed one started afresh. Route tables are rebuilt on every reload over whatever
//! backends are running, and commands already planned keep the table they were planned with. All
//! backends share one upstream registry, so two backends naming the same node share its
//! connections.
#![warn(unreachable_pub, missing_docs)]

mod config;

pub(crate) use config::{BackendConfig, MirrorConfig, RouteConfig, DEFAULT_BACKEND};

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

use crate::cluster::{ClusterConfig, ClusterState, Refresher, Topology};
use crate::metrics::Metrics;
use crate::protocol::Limits;
use crate::router::{Mirror, MirrorMetrics, Route, RouteTable, RouteTarget};
use crate::upstream::Upstreams;

/// One running backend.
struct Backend {
    /// What it was started with: a reload restarts it only when this differs from the new entry.
    pub(crate) config: BackendConfig,
    /// Its slot map, shared with the router's route table and the admin pages.
    pub(crate) state: Arc<ClusterState>,
    /// Held only to be dropped: the topology source waits on the receiver and stops when the
    /// backend is dropped (a reload removed or changed it).
    _stop: watch::Sender<bool>,
}

/// What starting a backend needs from the rest of the proxy.
#[derive(Clone)]
pub(crate) struct Context {
    /// The node pools every backend shares: a node named by two backends is one pool.
    pub(crate) upstreams: Arc<Upstreams>,
    /// Where refreshers, Sentinel followers and mirrors count.
    pub(crate) metrics: Arc<Metrics>,
    /// Reply size limits for the refreshers' own queries.
    pub(crate) limits: Limits,
    /// `cluster:` timings, shared by every `kind: cluster` backend.
    pub(crate) cluster: ClusterConfig,
}

/// The running backends by name; the `cluster.seeds` cluster is added as `default`.
#[derive(Default)]
pub(crate) struct Backends {
    /// The named backends (`backends:`), by name; ordered, so admin pages list them stably.
    running: BTreeMap<String, Arc<Backend>>,
    /// The `default` backend's state (run by the wiring itself), when `cluster.seeds` is set.
    default: Option<Arc<ClusterState>>,
}

impl Backends {
    /// Starts every backend of `configs`; `default` is the `cluster.seeds` cluster, if any.
    pub(crate) fn start(
        configs: &BTreeMap<String, BackendConfig>,
        default: Option<Arc<ClusterState>>,
        context: &Context,
    ) -> Backends {
        let mut backends = Backends {
            running: BTreeMap::new(),
            default,
        };
        backends.update(configs, context);
        backends
    }

    /// Brings the running set in line with `configs` (a reload): unchanged backends keep
    /// running (and their maps), changed ones restart, removed ones stop.
    pub(crate) fn update(&mut self, configs: &BTreeMap<String, BackendConfig>, context: &Context) {
        self.running
            .retain(|name, b| configs.get(name) == Some(&b.config));
        for (name, config) in configs {
            if !self.running.contains_key(name) {
                tracing::info!(backend = %name, kind = config.kind(), "starting backend");
                let backend = start(config, context);
                self.running.insert(name.clone(), Arc::new(backend));
            }
        }
    }

    /// A backend's slot map by name (`default` included).
    pub(crate) fn state(&self, name: &str) -> Option<Arc<ClusterState>> {
        if name == DEFAULT_BACKEND {
            return self.default.clone();
        }
        self.running.get(name).map(|b| b.state.clone())
    }

    /// Every backend with its state, `default` first (readiness, admin pages).
    pub(crate) fn states(&self) -> Vec<(String, Arc<ClusterState>)> {
        let default = self
            .default
            .iter()
            .map(|s| (DEFAULT_BACKEND.to_string(), s.clone()));
        let named = self
            .running
            .iter()
            .map(|(name, b)| (name.clone(), b.state.clone()));
        default.chain(named).collect()
    }

    /// The route table for `routes` over the running backends. Validation has checked that
    /// every name exists; a name that does not is skipped with an error in the log.
    pub(crate) fn table(
        &self,
        routes: &[RouteConfig],
        ignore_case: bool,
        metrics: &Metrics,
    ) -> RouteTable {
        let target = |name: &str, read_policy| {
            let state = self.state(name)?;
            let single_node = self
                .running
                .get(name)
                .is_some_and(|b| !matches!(b.config, BackendConfig::Cluster(_)));
            Some(Arc::new(RouteTarget {
                backend: Arc::from(name),
                state,
                read_policy,
                single_node,
            }))
        };
        // Any backend may be a mirror's (a reload can name one): each has its mirror series at
        // 0 from the start, so the dashboard's mirror panel shows 0 rather than nothing.
        let mirrors = metrics.group::<MirrorMetrics>();
        for (name, _) in self.states() {
            mirrors.counters(&name);
        }
        let mut built = Vec::with_capacity(routes.len());
        for route in routes {
            let Some(main) = target(&route.backend, route.read_policy) else {
                tracing::error!(backend = %route.backend, "route to an unknown backend skipped");
                continue;
            };
            let mirror = route.mirror.as_ref().and_then(|m| {
                let to = target(&m.backend, None)?;
                let counters = metrics.group::<MirrorMetrics>().counters(&m.backend);
                Some(Mirror::new(
                    to,
                    m.percent,
                    m.reads,
                    m.max_in_flight,
                    counters,
                ))
            });
            built.push(Route {
                prefix: Box::from(route.prefix.as_bytes()),
                strip: route.strip_prefix,
                target: main,
                mirror,
            });
        }
        RouteTable::new(built, ignore_case)
    }
}

/// Starts one backend's topology source.
///
/// A cluster gets a refresher, a Sentinel backend a follower, both stopped through the backend's
/// `_stop`; a standalone backend's map is built here once and never changes. Never fails: a backend
/// whose nodes do not answer simply has no map yet, and its commands wait up to `op_timeout`
/// (docs/configuration.md, `backends`).
fn start(config: &BackendConfig, context: &Context) -> Backend {
    let (stop, stopped) = watch::channel(false);
    let state = match config {
        BackendConfig::Cluster(cluster) => {
            let settings = ClusterConfig {
                seeds: cluster.seeds.clone(),
                ..context.cluster.clone()
            };
            let state = Arc::new(ClusterState::with_config(&settings));
            let refresher = Refresher::new(
                state.clone(),
                context.upstreams.clone(),
                context.limits.clone(),
                context.metrics.clone(),
            );
            tokio::spawn(refresher.run(stopped));
            state
        }
        BackendConfig::Standalone(standalone) => {
            // A fixed map: nothing to follow, so nothing to stop.
            let state = Arc::new(ClusterState::with_config(&context.cluster));
            let source: Arc<str> = Arc::from(standalone.primary.as_str());
            let topology = Topology::single_shard(
                &standalone.primary,
                &standalone.replicas,
                &context.upstreams,
                source,
            );
            topology.assign_standby(context.upstreams.reads_replicas());
            state.adopt(topology);
            state
        }
        BackendConfig::Sentinel(sentinel) => {
            let state = Arc::new(ClusterState::with_config(&context.cluster));
            tokio::spawn(crate::sentinel::follow(
                sentinel.clone(),
                state.clone(),
                context.upstreams.clone(),
                context.metrics.clone(),
                stopped,
            ));
            state
        }
    };
    Backend {
        config: config.clone(),
        state,
        _stop: stop,
    }
}
