//! Settings for connections to cluster nodes.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::units;

/// `upstream:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Persistent connections to each node, shared by all clients; commands are spread over them
    /// round-robin (never LIFO).
    pub connections_per_node: usize,
    /// Give up on a TCP connect after this long; the command may then be retried elsewhere.
    #[serde(with = "units::duration")]
    pub connect_timeout: Duration,
    /// TCP keepalive idle time on node connections; 0 turns keepalive off.
    #[serde(with = "units::duration")]
    pub tcp_keepalive: Duration,
    /// After a failed connect, wait at least this long before the next attempt (doubling up to
    /// 16× on repeated failures) so a dead node is not hammered.
    #[serde(with = "units::duration")]
    pub reconnect_backoff: Duration,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            connections_per_node: 2,
            connect_timeout: Duration::from_secs(1),
            tcp_keepalive: Duration::from_secs(60),
            reconnect_backoff: Duration::from_millis(50),
        }
    }
}
