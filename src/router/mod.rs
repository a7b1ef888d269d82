//! Where a command goes and how it gets an answer: slot → node, MOVED/ASK, retries within the
//! command's deadline.
//!
//! `Router` only owns the rooms and hands them out; each room is a small type with the methods
//! of one concern, in its own folder, over the shared `core` (slot map, node connections,
//! metrics, the live `router:` settings):
//! - `Forwarder` (`forward/`): one command to one node: MOVED/ASK, retries and their budget,
//!   hedged reads, NOSCRIPT healing, fault injection, a route's backend and its mirror. It owns
//!   the core; every other path sends through it;
//! - `Planner` (`plan/`): decides, before any I/O, what to do with one command; knows the
//!   commands (built in, declared, learned from the cluster) and plans against the route table
//!   (`routes/`: the table, prefix matching, mirroring);
//! - `Fanout` (`fanout/`): starts the plans that take more than one request (`Plan::Compound`) and
//!   serves keyless commands sent to every primary (or node), merging their replies;
//! - `Splitter` (`split/`): a multi-key command whose keys span slots, split per slot and merged
//!   back;
//! - `Stateful` (`stateful/`): commands bound to the client's connection: transactions, WATCH,
//!   blocking commands, WAIT.
//!
//! `forward/resolve.rs` picks the node of a shard by read policy (a split part's too); `reply`
//! and `replies` write and read the reply frames every folder uses; `fuzz` is the planner's fuzz
//! entry.
#![warn(unreachable_pub, missing_docs)]

mod compound;
mod config;
mod core;
mod fanout;
mod forward;
mod fuzz;
mod metrics;
mod plan;
mod replies;
mod reply;
mod routes;
mod split;
mod stateful;

pub(crate) use config::{ReadPolicy, RouterConfig};
pub(crate) use fanout::{validate_node_admin, Fanout};
pub(crate) use forward::{classify, validate_faults, Call, FirstHop, Forwarder, Verdict};
pub use fuzz::fuzz_plan;
pub(crate) use metrics::RouterMetrics;
pub(crate) use plan::{Plan, Planner};
pub(crate) use reply::{error_with_prefix, redcar_error};
pub(crate) use routes::{Mirror, MirrorMetrics, Route, RouteTable, RouteTarget};
pub(crate) use stateful::{Stateful, Transaction, TxStep, Written, MOVED_FROM_WORKERS};

use std::sync::Arc;

use crate::cluster::ClusterState;
use crate::metrics::Metrics;
use crate::upstream::Upstreams;

/// Routes commands; shared by every session (`Arc<Router>`). It owns the rooms and hands them
/// out; handing one out costs nothing (a reference, or a copy of one).
pub(crate) struct Router {
    /// The single-command path, and the owner of the state every room shares.
    forwarder: Forwarder,
    /// The planner's own state: the commands learned or declared, the route table.
    commands: plan::Commands,
}

impl Router {
    pub(crate) fn new(
        cluster: Arc<ClusterState>,
        upstreams: Arc<Upstreams>,
        metrics: Arc<Metrics>,
        config: RouterConfig,
    ) -> Router {
        Router {
            forwarder: Forwarder::new(cluster, upstreams, metrics, config),
            commands: plan::Commands::default(),
        }
    }

    /// Applies reloaded `router:` settings: commands dispatched from now on use them; commands
    /// already running keep the deadline they started with.
    pub(crate) fn reconfigure(&self, config: RouterConfig) {
        self.forwarder.reconfigure(config);
    }

    /// The single-command path (`forward`), which every other room sends through.
    pub(crate) fn forwarder(&self) -> &Forwarder {
        &self.forwarder
    }

    /// Planning a command, the commands known, the route table.
    pub(crate) fn planner(&self) -> Planner<'_> {
        Planner::new(&self.forwarder.core, &self.commands)
    }

    /// Plans of more than one request (`start`): splits, fan-outs, scripts, routed commands.
    pub(crate) fn fanout(&self) -> Fanout<'_> {
        Fanout::new(&self.forwarder)
    }

    /// Commands bound to the client's connection: transactions, WATCH, blocking, WAIT.
    pub(crate) fn stateful(&self) -> Stateful<'_> {
        Stateful::new(&self.forwarder)
    }

    pub(crate) fn cluster(&self) -> &Arc<ClusterState> {
        &self.forwarder.core.cluster
    }

    /// The node connections (client-side caching subscribes to their invalidations).
    pub(crate) fn upstreams(&self) -> &Arc<Upstreams> {
        &self.forwarder.core.upstreams
    }
}
