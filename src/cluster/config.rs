//! Settings for discovering and refreshing the cluster topology.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::units;

/// `cluster:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Nodes asked for the topology at start-up (HOST:PORT). Later refreshes ask known nodes too.
    pub seeds: Vec<String>,
    /// Periodic topology refresh.
    #[serde(with = "units::duration")]
    pub refresh_interval: Duration,
    /// Deadline for one `CLUSTER SLOTS` query.
    #[serde(with = "units::duration")]
    pub refresh_timeout: Duration,
    /// Minimum time between two refreshes, so a burst of MOVED replies triggers one refresh.
    #[serde(with = "units::duration")]
    pub refresh_min_gap: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            seeds: Vec::new(),
            refresh_interval: Duration::from_secs(5),
            refresh_timeout: Duration::from_secs(2),
            refresh_min_gap: Duration::from_millis(100),
        }
    }
}
