//! Settings for connections to cluster nodes.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{OutlierConfig, UpstreamTlsConfig};
use crate::config::secret::Secret;
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
    /// New connections per second to one node (pipelined and dedicated together; bursts of
    /// up to this many); 0 = unlimited.
    pub max_connects_per_second: u32,
    /// A node connection nobody used for this long is closed (reopened on the next command), so
    /// a sidecar does not hold idle sockets to every node of a large cluster; 0 = never.
    #[serde(with = "units::duration")]
    pub idle_timeout: Duration,
    /// Commands written to one node connection and not yet answered; at this many the
    /// connection stops taking commands from its queue until replies come back (back-pressure:
    /// queued commands wait, in order; none is dropped).
    pub max_in_flight_per_connection: usize,
    /// Write-coalescing window: after the first command of a batch, wait up to this long for
    /// more before writing, so more clients share one write; 0 = write at the end of the turn.
    #[serde(with = "units::duration")]
    pub flush_interval: Duration,
    /// Connections lent to one client at a time (blocking commands, WATCH, pub/sub).
    pub dedicated: DedicatedConfig,
    /// Outlier detection: ejecting nodes that keep failing, and the health checks that bring
    /// them back.
    pub outlier: OutlierConfig,
    /// Redis 6+ ACL user redcar authenticates as on every node connection; without it, `AUTH`
    /// uses the `default` user (`requirepass`).
    pub username: Option<String>,
    /// The password sent with `AUTH` on every node connection (in clear, `{file: PATH}` or
    /// `{env: NAME}`; never shown).
    pub password: Option<Secret>,
    /// TLS on every node connection: CA, server name, optional client certificate.
    pub tls: UpstreamTlsConfig,
}

/// `upstream.dedicated:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DedicatedConfig {
    /// Dedicated connections open at once, over all nodes (busy and idle).
    pub max: usize,
    /// What a client gets when all `max` are busy.
    pub exhausted: Exhausted,
    /// With `exhausted: wait`, how long to wait for a connection to come free.
    #[serde(with = "units::duration")]
    pub wait_timeout: Duration,
    /// An idle dedicated connection is closed after this long; 0 closes it as soon as it is
    /// given back.
    #[serde(with = "units::duration")]
    pub idle_timeout: Duration,
}

/// Policy when the dedicated pool is exhausted.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Exhausted {
    /// Wait up to `wait_timeout`, then fail.
    Wait,
    /// Fail at once.
    Fail,
}

impl Default for DedicatedConfig {
    fn default() -> Self {
        DedicatedConfig {
            max: 64,
            exhausted: Exhausted::Wait,
            wait_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl UpstreamConfig {
    /// The credentials to present to the nodes, read now; errors name the key.
    pub fn credentials(&self) -> Result<Option<super::Credentials>, String> {
        match (&self.username, &self.password) {
            (None, None) => Ok(None),
            (Some(_), None) => {
                Err("`upstream.username` is set without `upstream.password`".to_string())
            }
            (username, Some(secret)) => Ok(Some(super::Credentials {
                username: username.clone(),
                password: secret.reveal("upstream.password")?,
            })),
        }
    }
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            connections_per_node: 2,
            connect_timeout: Duration::from_secs(1),
            tcp_keepalive: Duration::from_secs(60),
            reconnect_backoff: Duration::from_millis(50),
            max_connects_per_second: 100,
            idle_timeout: Duration::from_secs(300),
            max_in_flight_per_connection: 4096,
            flush_interval: Duration::ZERO,
            dedicated: DedicatedConfig::default(),
            outlier: OutlierConfig::default(),
            username: None,
            password: None,
            tls: UpstreamTlsConfig::default(),
        }
    }
}
