//! Settings for discovering and refreshing the cluster topology.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::values::units;

/// `cluster:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Nodes asked for the topology at start-up (HOST:PORT). Later refreshes ask known nodes too.
    pub seeds: Vec<String>,
    /// Periodic topology refresh.
    #[serde(with = "units::duration")]
    pub refresh_interval: Duration,
    /// Deadline for one `CLUSTER SLOTS` + `CLUSTER NODES` query.
    #[serde(with = "units::duration")]
    pub(crate) refresh_timeout: Duration,
    /// Minimum time between two refreshes, so a burst of MOVED replies triggers one refresh.
    #[serde(with = "units::duration")]
    pub(crate) refresh_min_gap: Duration,
    /// Every this many MOVED replies ask for a refresh; 0: redirects never do.
    pub(crate) redirect_refresh_threshold: u32,
    /// Every this many upstream failures ask for a refresh; 0: failures never do.
    pub(crate) failure_refresh_threshold: u32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            seeds: Vec::new(),
            refresh_interval: Duration::from_secs(5),
            refresh_timeout: Duration::from_secs(2),
            refresh_min_gap: Duration::from_millis(100),
            redirect_refresh_threshold: 1,
            failure_refresh_threshold: 3,
        }
    }
}
