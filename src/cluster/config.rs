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
    /// Periodic refresh: how often the map is checked for a change.
    #[serde(with = "units::duration")]
    pub refresh_interval: Duration,
    /// How the periodic refresh finds out whether the map changed (`change_check.rs`).
    pub(crate) change_check: ChangeCheck,
    /// Deadline for one topology query (a check, or the map fetched whole).
    #[serde(with = "units::duration")]
    pub(crate) refresh_timeout: Duration,
    /// Minimum time between two refreshes, so a burst of MOVED replies triggers one refresh.
    #[serde(with = "units::duration")]
    pub(crate) refresh_min_gap: Duration,
    /// A refresh asked for by an event (MOVED, failures) after a quiet spell waits a random
    /// time up to this, so a fleet of sidecars that all saw the event do not ask at once.
    #[serde(with = "units::duration")]
    pub(crate) refresh_jitter: Duration,
    /// Every this many MOVED replies ask for a refresh; 0: redirects never do.
    pub(crate) redirect_refresh_threshold: u32,
    /// Every this many upstream failures ask for a refresh; 0: failures never do.
    pub(crate) failure_refresh_threshold: u32,
}

/// `cluster.change_check`: what the periodic refresh asks the node the current map came from.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ChangeCheck {
    /// A digest of the node's `CLUSTER NODES` (volatile fields left out), computed by the node
    /// in a short script: catches every change of ownership, role, address and membership.
    #[default]
    Digest,
    /// The topology fields of `CLUSTER INFO` (epochs, node and slot counts): cost independent
    /// of the cluster's size, but blind to a slot moved to the newest primary, a replica moved
    /// to another primary and a changed address.
    Info,
    /// No check: the map is fetched whole every time.
    Off,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            seeds: Vec::new(),
            refresh_interval: Duration::from_secs(5),
            change_check: ChangeCheck::default(),
            refresh_timeout: Duration::from_secs(2),
            refresh_min_gap: Duration::from_millis(100),
            refresh_jitter: Duration::from_secs(1),
            redirect_refresh_threshold: 1,
            failure_refresh_threshold: 3,
        }
    }
}
