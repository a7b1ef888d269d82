//! Settings for connections to cluster nodes.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{OutlierConfig, UpstreamTlsConfig};
use crate::values::secret::Secret;
use crate::values::units;

/// `upstream:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Persistent connections to each node, shared by all clients; commands are spread over them
    /// round-robin (never LIFO).
    pub(crate) connections_per_node: usize,
    /// Give up on a TCP connect after this long; the command may then be retried elsewhere.
    #[serde(with = "units::duration")]
    pub(crate) connect_timeout: Duration,
    /// TCP keepalive idle time on node connections; 0 turns keepalive off.
    #[serde(with = "units::duration")]
    pub(crate) tcp_keepalive: Duration,
    /// Time between keepalive probes once `tcp_keepalive` has passed without traffic; unset:
    /// `DEFAULT_KEEPALIVE_INTERVAL`, or `tcp_keepalive` if that is shorter.
    #[serde(with = "units::optional_duration")]
    pub(crate) tcp_keepalive_interval: Option<Duration>,
    /// Unanswered probes after which the connection is dropped; unset: the OS default (9 on
    /// Linux).
    pub(crate) tcp_keepalive_probes: Option<u32>,
    /// After a failed connect, wait at least this long before the next attempt (doubling up to
    /// 16× on repeated failures) so a dead node is not hammered.
    #[serde(with = "units::duration")]
    pub(crate) reconnect_backoff: Duration,
    /// New connections per second to one node (pipelined and dedicated together; bursts of
    /// up to this many); 0 = unlimited.
    pub(crate) max_connects_per_second: u32,
    /// A node connection nobody used for this long is closed (reopened on the next command), so
    /// a sidecar does not hold idle sockets to every node of a large cluster; 0 = never.
    #[serde(with = "units::duration")]
    pub(crate) idle_timeout: Duration,
    /// Commands written to one node connection and not yet answered; at this many the
    /// connection stops taking commands from its queue until replies come back (back-pressure:
    /// queued commands wait, in order; none is dropped).
    pub(crate) max_in_flight_per_connection: usize,
    /// Write-coalescing window: after the first command of a batch, wait up to this long for
    /// more before writing, so more clients share one write; 0 = write at the end of the turn.
    #[serde(with = "units::duration")]
    pub(crate) flush_interval: Duration,
    /// Connections lent to one client at a time (blocking commands, WATCH, pub/sub).
    pub(crate) dedicated: DedicatedConfig,
    /// Outlier detection: ejecting nodes that keep failing, and the health checks that bring
    /// them back.
    pub(crate) outlier: OutlierConfig,
    /// Redis 6+ ACL user redcar authenticates as on every node connection; without it, `AUTH`
    /// uses the `default` user (`requirepass`).
    pub(crate) username: Option<String>,
    /// The password sent with `AUTH` on every node connection (in clear, `{file: PATH}` or
    /// `{env: NAME}`; never shown).
    pub(crate) password: Option<Secret>,
    /// TLS on every node connection: CA, server name, optional client certificate.
    pub(crate) tls: UpstreamTlsConfig,
}

/// Linux's limits on TCP keepalive (`MAX_TCP_KEEPIDLE`/`KEEPINTVL`, `MAX_TCP_KEEPCNT`): the
/// config check and the Envoy converter hold `tcp_keepalive*` to them.
pub(crate) const MAX_KEEPALIVE_SECONDS: Duration = Duration::from_secs(32767);
pub(crate) const MAX_KEEPALIVE_PROBES: u32 = 127;

/// Keepalive probe interval when `tcp_keepalive_interval` is unset (capped by `tcp_keepalive`):
/// with Linux's 9 probes a dead node is noticed 90 s after the idle time, not 11 minutes
/// (the OS's 75 s interval).
pub(crate) const DEFAULT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// `upstream.dedicated:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct DedicatedConfig {
    /// Dedicated connections open at once, over all nodes (busy and idle).
    pub(crate) max: usize,
    /// What a client gets when all `max` are busy.
    pub(crate) exhausted: Exhausted,
    /// With `exhausted: wait`, how long to wait for a connection to come free.
    #[serde(with = "units::duration")]
    pub(crate) wait_timeout: Duration,
    /// An idle dedicated connection is closed after this long; 0 closes it as soon as it is
    /// given back.
    #[serde(with = "units::duration")]
    pub(crate) idle_timeout: Duration,
}

/// Policy when the dedicated pool is exhausted.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Exhausted {
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
    /// The keepalive probe interval node connections use.
    pub(crate) fn keepalive_interval(&self) -> Duration {
        self.tcp_keepalive_interval
            .unwrap_or(self.tcp_keepalive.min(DEFAULT_KEEPALIVE_INTERVAL))
    }

    /// The credentials to present to the nodes, read now; errors name the key.
    pub(crate) fn credentials(&self) -> Result<Option<super::Credentials>, String> {
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
            tcp_keepalive_interval: None,
            tcp_keepalive_probes: None,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use socket2::SockRef;

    use super::UpstreamConfig;
    use crate::upstream::stream::NodeStream;
    use crate::upstream::ConnectLimit;

    /// The keepalive settings a node connection ends up with, read back from its socket.
    async fn keepalive_of(config: &UpstreamConfig) -> (Duration, Duration, u32) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let stream = super::super::conn::connect(&addr, config, &ConnectLimit::new(0), &None)
            .await
            .expect("connect");
        let NodeStream::Tcp(stream) = stream else {
            panic!("plain TCP expected");
        };
        let socket = SockRef::from(&stream);
        (
            socket.tcp_keepalive_time().expect("time"),
            socket.tcp_keepalive_interval().expect("interval"),
            socket.tcp_keepalive_retries().expect("probes"),
        )
    }

    #[tokio::test]
    async fn connect_applies_the_keepalive_interval_and_probes() {
        let config = UpstreamConfig {
            tcp_keepalive: Duration::from_secs(20),
            tcp_keepalive_interval: Some(Duration::from_secs(7)),
            tcp_keepalive_probes: Some(3),
            ..UpstreamConfig::default()
        };
        let (time, interval, probes) = keepalive_of(&config).await;
        assert_eq!(time, Duration::from_secs(20));
        assert_eq!(interval, Duration::from_secs(7));
        assert_eq!(probes, 3);
        // Unset: 10s (or the idle time if shorter), and the OS's probe count.
        let os_probes = {
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None);
            socket
                .expect("socket")
                .tcp_keepalive_retries()
                .expect("probes")
        };
        let (_, interval, probes) = keepalive_of(&UpstreamConfig::default()).await;
        assert_eq!(interval, Duration::from_secs(10));
        assert_eq!(probes, os_probes);
    }
}
