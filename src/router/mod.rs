//! Where a command goes and how it gets an answer: slot → node, MOVED/ASK, retries within the
//! command's deadline.
//!
//! `plan` decides, before any I/O, what to do with one command (`learn` adds the commands the
//! cluster knows; `fuzz` is the planner's fuzz entry), and `multi` starts the plans that take
//! more than one request. Then one folder per way of serving a command:
//! - `forward/`: one command to one node: MOVED/ASK, retries and their budget, hedged reads,
//!   NOSCRIPT healing, fault injection; every other path sends through it;
//! - `split/`: a multi-key command whose keys span slots, split per slot and merged back;
//! - `fanout/`: keyless commands sent to every primary (or node) and their merged replies;
//! - `stateful/`: commands bound to the client's connection: transactions, WATCH, blocking
//!   commands, WAIT;
//! - `routes/`: key-prefix routes to named backends, and mirroring.
//!
//! `select` picks the node of a shard by read policy; `reply` and `replies` write and read the
//! reply frames every folder uses.
#![warn(unreachable_pub, missing_docs)]

mod config;
mod fanout;
mod forward;
mod fuzz;
mod learn;
mod multi;
mod plan;
mod replies;
mod reply;
mod routes;
mod select;
mod split;
mod stateful;

pub(crate) use config::RouterConfig;
pub(crate) use fanout::validate_node_admin;
pub(crate) use forward::{classify, validate_faults, Call, Verdict};
pub use fuzz::fuzz_plan;
pub(crate) use plan::Plan;
pub(crate) use reply::{error_with_prefix, redcar_error};
pub(crate) use routes::{Mirror, Route, RouteTable, RouteTarget};
pub(crate) use select::ReadPolicy;
pub(crate) use stateful::{transaction_payload, Watch, Written};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::ClusterState;
use arc_swap::{ArcSwap, ArcSwapOption};

use crate::commands::{self, CommandSpec, CommandTable};
use crate::metrics::Metrics;
use crate::upstream::Upstreams;

/// Routes commands; shared by every session (`Arc<Router>`).
pub(crate) struct Router {
    cluster: Arc<ClusterState>,
    upstreams: Arc<Upstreams>,
    metrics: Arc<Metrics>,
    /// Commands learned from the cluster that the built-in table lacks (module commands);
    /// consulted only when the built-in lookup misses, so the common path does not touch it.
    learned: ArcSwapOption<CommandTable>,
    /// Scripts seen in EVAL and SCRIPT LOAD, to heal NOSCRIPT replies to EVALSHA.
    scripts: forward::ScriptCache,
    /// Caps retries to a share of the traffic.
    retry_budget: forward::RetryBudget,
    /// `router:` as it is now; a reload (SIGHUP) swaps it whole, so a command never sees half
    /// of one reload. Read lock-free, without allocating, where each setting is needed.
    live: ArcSwap<Live>,
    /// `routes:` over the named backends; `cluster` above is the catch-all backend. Swapped
    /// whole on reload.
    routes: ArcSwap<RouteTable>,
    /// True when `routes` has entries: the one branch a config without routes pays per command.
    routed: AtomicBool,
    /// `live.config.replica_miss_check`, read with one load by every nil reply to a read (most
    /// replies to GETs of absent keys) instead of a snapshot of `live`.
    replica_miss_check: AtomicBool,
}

/// The router settings a reload can change, prepared once per reload.
struct Live {
    config: RouterConfig,
    /// `router.faults`; `None` (the usual case) costs forwarding one check.
    faults: Option<forward::Faults>,
}

impl Router {
    pub(crate) fn new(
        cluster: Arc<ClusterState>,
        upstreams: Arc<Upstreams>,
        metrics: Arc<Metrics>,
        config: RouterConfig,
    ) -> Router {
        let faults = forward::Faults::new(&config.faults, &metrics);
        let replica_miss_check = AtomicBool::new(config.replica_miss_check);
        Router {
            cluster,
            upstreams,
            metrics,
            learned: ArcSwapOption::empty(),
            scripts: forward::ScriptCache::default(),
            retry_budget: forward::RetryBudget::new(config.retry_budget.clone()),
            live: ArcSwap::from_pointee(Live { config, faults }),
            routes: ArcSwap::from_pointee(RouteTable::default()),
            routed: AtomicBool::new(false),
            replica_miss_check,
        }
    }

    /// Installs a route table (start-up and reload): commands planned from now on use it.
    pub(crate) fn set_routes(&self, table: RouteTable) {
        let routed = !table.is_empty();
        self.routes.store(Arc::new(table));
        self.routed.store(routed, Ordering::Relaxed);
    }

    /// Applies reloaded `router:` settings: commands dispatched from now on use them; commands
    /// already running keep the deadline they started with.
    pub(crate) fn reconfigure(&self, config: RouterConfig) {
        self.retry_budget.set_config(config.retry_budget.clone());
        let faults = forward::Faults::new(&config.faults, &self.metrics);
        self.replica_miss_check
            .store(config.replica_miss_check, Ordering::Relaxed);
        self.live.store(Arc::new(Live { config, faults }));
    }

    pub(crate) fn cluster(&self) -> &Arc<ClusterState> {
        &self.cluster
    }

    /// The node connections (client-side caching subscribes to their invalidations).
    pub(crate) fn upstreams(&self) -> &Arc<Upstreams> {
        &self.upstreams
    }

    /// The spec for a command line: built-in table first, then commands learned from the cluster.
    pub(crate) fn lookup(&self, args: &[bytes::Bytes]) -> Option<&'static CommandSpec> {
        commands::lookup(args).or_else(|| self.learned.load().as_ref()?.lookup(args))
    }

    /// The deadline applied to each command.
    pub(crate) fn op_timeout(&self) -> Duration {
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
