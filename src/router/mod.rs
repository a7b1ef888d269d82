//! Where a command goes and how it gets an answer: slot → node, MOVED/ASK, retries within the
//! command's deadline.

mod call;
mod config;
mod forward;
mod learn;
mod plan;
mod redirect;
mod reply;

pub use call::Call;
pub use config::RouterConfig;
pub use plan::Plan;
pub use reply::redcar_error;

use std::sync::Arc;

use crate::cluster::ClusterState;
use arc_swap::ArcSwapOption;

use crate::commands::{self, CommandSpec, CommandTable};
use crate::upstream::Upstreams;

/// Routes commands; shared by every session (`Arc<Router>`).
pub struct Router {
    cluster: Arc<ClusterState>,
    upstreams: Arc<Upstreams>,
    /// Commands learned from the cluster that the built-in table lacks (module commands);
    /// consulted only when the built-in lookup misses, so the common path does not touch it.
    learned: ArcSwapOption<CommandTable>,
    config: RouterConfig,
}

impl Router {
    pub fn new(
        cluster: Arc<ClusterState>,
        upstreams: Arc<Upstreams>,
        config: RouterConfig,
    ) -> Router {
        Router {
            cluster,
            upstreams,
            learned: ArcSwapOption::empty(),
            config,
        }
    }

    pub fn cluster(&self) -> &Arc<ClusterState> {
        &self.cluster
    }

    /// The spec for a command line: built-in table first, then commands learned from the cluster.
    pub fn lookup(&self, args: &[bytes::Bytes]) -> Option<&'static CommandSpec> {
        commands::lookup(args).or_else(|| self.learned.load().as_ref()?.lookup(args))
    }

    /// The deadline applied to each command.
    pub fn op_timeout(&self) -> std::time::Duration {
        self.config.op_timeout
    }
}
