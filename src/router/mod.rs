//! Where a command goes and how it gets an answer: slot → node, MOVED/ASK, retries within the
//! command's deadline.

mod call;
mod config;
mod forward;
mod plan;
mod redirect;
mod reply;

pub use call::Call;
pub use config::RouterConfig;
pub use plan::Plan;
pub use reply::redcar_error;

use std::sync::Arc;

use crate::cluster::ClusterState;
use crate::commands::CommandTable;
use crate::upstream::Upstreams;

/// Routes commands; shared by every session (`Arc<Router>`).
pub struct Router {
    cluster: Arc<ClusterState>,
    upstreams: Arc<Upstreams>,
    commands: Arc<CommandTable>,
    config: RouterConfig,
}

impl Router {
    pub fn new(
        cluster: Arc<ClusterState>,
        upstreams: Arc<Upstreams>,
        commands: Arc<CommandTable>,
        config: RouterConfig,
    ) -> Router {
        Router {
            cluster,
            upstreams,
            commands,
            config,
        }
    }

    pub fn cluster(&self) -> &Arc<ClusterState> {
        &self.cluster
    }

    pub fn commands(&self) -> &CommandTable {
        &self.commands
    }

    /// The deadline applied to each command.
    pub fn op_timeout(&self) -> std::time::Duration {
        self.config.op_timeout
    }
}
