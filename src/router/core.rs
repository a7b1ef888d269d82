//! What every room of the router shares: the slot map, the node connections, the metrics and
//! the `router:` settings as a reload left them.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::forward::fault::Faults;
use super::{ReadPolicy, RouteTarget, RouterConfig, RouterMetrics};
use crate::cluster::{ClusterState, TopologyMetrics};
use crate::metrics::Metrics;
use crate::upstream::{UpstreamMetrics, Upstreams};

/// The state the rooms share. The forwarder owns it (every other room sends through the
/// forwarder) and the other rooms borrow it, so reaching it costs no reference count.
pub(in crate::router) struct Core {
    /// The catch-all backend's slot map.
    pub(in crate::router) cluster: Arc<ClusterState>,
    /// Every node by address, and the dedicated pool.
    pub(in crate::router) upstreams: Arc<Upstreams>,
    /// The metrics hub: the slow log, the events, and the groups below.
    pub(in crate::router) metrics: Arc<Metrics>,
    /// The groups the rooms count into, taken from `metrics` once so a command never looks one
    /// up: retries, hedges and the retry budget (`router`), redirects (`cluster`), and the
    /// commands sent to any node (`upstream`: the retry budget's measure of traffic).
    pub(in crate::router) counts: Arc<RouterMetrics>,
    /// See `counts`.
    pub(in crate::router) redirects: Arc<TopologyMetrics>,
    /// See `counts`.
    pub(in crate::router) nodes: Arc<UpstreamMetrics>,
    /// `router:` as it is now; a reload (SIGHUP) swaps it whole, so a command never sees half
    /// of one reload. Read lock-free, without allocating, where each setting is needed.
    pub(in crate::router) live: ArcSwap<Live>,
}

/// The router settings a reload can change, prepared once per reload.
pub(in crate::router) struct Live {
    /// `router:` as last loaded.
    pub(in crate::router) config: RouterConfig,
    /// `router.faults`; `None` (the usual case) costs forwarding one check.
    pub(in crate::router) faults: Option<Faults>,
}

impl Live {
    pub(in crate::router) fn new(config: RouterConfig, metrics: &Metrics) -> Live {
        let faults = Faults::new(&config.faults, metrics);
        Live { config, faults }
    }
}

impl Core {
    /// The deadline applied to each command.
    pub(in crate::router) fn op_timeout(&self) -> Duration {
        self.live.load().config.op_timeout
    }

    pub(in crate::router) fn retry_backoff(&self) -> Duration {
        self.live.load().config.retry_backoff
    }

    pub(in crate::router) fn max_redirects(&self) -> usize {
        self.live.load().config.max_redirects
    }

    pub(in crate::router) fn hedge_after(&self) -> Duration {
        self.live.load().config.hedge_after
    }

    pub(in crate::router) fn read_policy(&self) -> ReadPolicy {
        self.live.load().config.read_policy
    }

    pub(in crate::router) fn allow_flush(&self) -> bool {
        self.live.load().config.allow_flush
    }

    /// The slot map a command goes by: its route's backend, or the catch-all one.
    pub(in crate::router) fn state<'a>(
        &'a self,
        target: &'a Option<Arc<RouteTarget>>,
    ) -> &'a ClusterState {
        target.as_ref().map_or(&self.cluster, |t| &t.state)
    }
}
