//! Follows a Sentinel-managed primary and keeps it (with its replicas) as a one-shard topology.
//!
//! Scaffolding: the config shape and the entry point are fixed here so the `backends:` config can
//! wire a `sentinel` backend; the follower itself is filled in by the Sentinel work.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::cluster::ClusterState;
use crate::config::secret::Secret;
use crate::config::units;
use crate::metrics::Metrics;
use crate::upstream::Upstreams;

/// A `sentinel` backend in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SentinelConfig {
    /// Sentinel addresses (`HOST:PORT`); any one that answers is enough.
    pub sentinels: Vec<String>,
    /// The monitored primary's name (`sentinel monitor <name> ...`).
    pub master: String,
    /// ACL user for the sentinels themselves (separate from the data nodes' credentials).
    #[serde(default)]
    pub sentinel_username: Option<String>,
    /// Password for the sentinels (`{file: PATH}` or `{env: NAME}` also accepted; never shown).
    #[serde(default)]
    pub sentinel_password: Option<Secret>,
    /// How often the sentinels are asked for the primary's address even without a
    /// `+switch-master` event.
    #[serde(default = "default_query_interval", with = "units::duration")]
    pub query_interval: Duration,
}

fn default_query_interval() -> Duration {
    Duration::from_secs(1)
}

/// Keeps `state` pointing at the current primary (and its replicas) named by the sentinels until
/// `shutdown` fires.
pub async fn follow(
    config: SentinelConfig,
    state: Arc<ClusterState>,
    upstreams: Arc<Upstreams>,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = (config, state, upstreams, metrics);
    let _ = shutdown.changed().await;
}
