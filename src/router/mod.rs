//! Where a command goes and how it gets an answer: slot → node, MOVED/ASK, retries within the
//! command's deadline.

mod call;
mod config;
mod dedicated;
mod fanout;
mod fanout_merge;
mod fault;
mod forward;
mod fuzz;
mod hedge;
mod info;
mod info_merge;
mod learn;
mod multi;
mod node_admin;
mod plan;
mod pubsub_merge;
mod redirect;
mod replies;
mod reply;
mod retry;
mod retry_budget;
mod routes;
mod scan_cursor;
mod scripts;
mod select;
mod slowlog;
mod split;
mod split_send;
mod transaction;
mod wait;

pub use call::Call;
pub use config::RouterConfig;
pub use dedicated::Watch;
pub use fault::{validate as validate_faults, FaultRule};
pub use fuzz::fuzz_plan;
pub use multi::Multi;
pub use node_admin::validate as validate_node_admin;
pub use plan::Plan;
pub use redirect::{classify, Verdict};
pub use reply::{error_with_prefix, redcar_error};
pub use retry_budget::RetryBudgetConfig;
pub use routes::{Mirror, Route, RouteTable, RouteTarget};
pub use select::ReadPolicy;
pub use transaction::transaction_payload;
pub use wait::Written;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::ClusterState;
use arc_swap::{ArcSwap, ArcSwapOption};

use crate::commands::{self, CommandSpec, CommandTable};
use crate::metrics::Metrics;
use crate::upstream::Upstreams;

/// Routes commands; shared by every session (`Arc<Router>`).
pub struct Router {
    cluster: Arc<ClusterState>,
    upstreams: Arc<Upstreams>,
    metrics: Arc<Metrics>,
    /// Commands learned from the cluster that the built-in table lacks (module commands);
    /// consulted only when the built-in lookup misses, so the common path does not touch it.
    learned: ArcSwapOption<CommandTable>,
    /// Scripts seen in EVAL and SCRIPT LOAD, to heal NOSCRIPT replies to EVALSHA.
    scripts: scripts::ScriptCache,
    /// Caps retries to a share of the traffic.
    retry_budget: retry_budget::RetryBudget,
    /// `router:` as it is now; a reload (SIGHUP) swaps it whole, so a command never sees half
    /// of one reload. Read lock-free, without allocating, where each setting is needed.
    live: ArcSwap<Live>,
    /// `routes:` over the named backends; `cluster` above is the catch-all backend. Swapped
    /// whole on reload.
    routes: ArcSwap<RouteTable>,
    /// True when `routes` has entries: the one branch a config without routes pays per command.
    routed: AtomicBool,
}

/// The router settings a reload can change, prepared once per reload.
struct Live {
    config: RouterConfig,
    /// `router.faults`; `None` (the usual case) costs forwarding one check.
    faults: Option<fault::Faults>,
}

impl Router {
    pub fn new(
        cluster: Arc<ClusterState>,
        upstreams: Arc<Upstreams>,
        metrics: Arc<Metrics>,
        config: RouterConfig,
    ) -> Router {
        let faults = fault::Faults::new(&config.faults, &metrics);
        Router {
            cluster,
            upstreams,
            metrics,
            learned: ArcSwapOption::empty(),
            scripts: scripts::ScriptCache::default(),
            retry_budget: retry_budget::RetryBudget::new(config.retry_budget.clone()),
            live: ArcSwap::from_pointee(Live { config, faults }),
            routes: ArcSwap::from_pointee(RouteTable::default()),
            routed: AtomicBool::new(false),
        }
    }

    /// Installs a route table (start-up and reload): commands planned from now on use it.
    pub fn set_routes(&self, table: RouteTable) {
        let routed = !table.is_empty();
        self.routes.store(Arc::new(table));
        self.routed.store(routed, Ordering::Relaxed);
    }

    /// Applies reloaded `router:` settings: commands dispatched from now on use them; commands
    /// already running keep the deadline they started with.
    pub fn reconfigure(&self, config: RouterConfig) {
        self.retry_budget.set_config(config.retry_budget.clone());
        let faults = fault::Faults::new(&config.faults, &self.metrics);
        self.live.store(Arc::new(Live { config, faults }));
    }

    pub fn cluster(&self) -> &Arc<ClusterState> {
        &self.cluster
    }

    /// The spec for a command line: built-in table first, then commands learned from the cluster.
    pub fn lookup(&self, args: &[bytes::Bytes]) -> Option<&'static CommandSpec> {
        commands::lookup(args).or_else(|| self.learned.load().as_ref()?.lookup(args))
    }

    /// The deadline applied to each command.
    pub fn op_timeout(&self) -> Duration {
        self.live.load().config.op_timeout
    }

    fn retry_backoff(&self) -> Duration {
        self.live.load().config.retry_backoff
    }

    fn max_redirects(&self) -> usize {
        self.live.load().config.max_redirects
    }

    fn hedge_after(&self) -> Duration {
        self.live.load().config.hedge_after
    }

    fn read_policy(&self) -> ReadPolicy {
        self.live.load().config.read_policy
    }

    fn allow_flush(&self) -> bool {
        self.live.load().config.allow_flush
    }
}
