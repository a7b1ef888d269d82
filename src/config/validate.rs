//! Start-up checks: every rejected value names its key and says what would be accepted.
//!
//! What holds after [`Config::validate`] returns `Ok`: every address parses, every secret and
//! certificate file was read once, and every combination the proxy cannot run (no listener, no
//! backend for a route, hedging without replicas, `pack` without per-core workers, ...) has been
//! refused with a message naming the key and what it accepts. The parts built from the config trust
//! it and do not check again. Run at start-up (`Config::load`) and by every reload, which refuses
//! an invalid file and keeps running with the old config.

use std::net::SocketAddr;
use std::time::Duration;

use super::{Config, ConfigError};
use crate::upstream::{MAX_KEEPALIVE_PROBES, MAX_KEEPALIVE_SECONDS};

/// Longest write-coalescing window accepted (`upstream.flush_interval`).
/// Every command may wait up to this long for its write to be coalesced with others, so the
/// window is paid in latency; bench/README.md ("Write-coalescing window") has what it buys.
const MAX_FLUSH_INTERVAL: Duration = Duration::from_millis(10);

impl Config {
    /// Rejects missing, malformed or contradictory settings before anything starts.
    ///
    /// It stops at the first problem, so a user fixes one message at a time; the checks that
    /// need other parts' rules (users, faults, near cache, hot keys, custom commands) run last.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.validate_listeners()?;
        self.validate_cluster()?;
        self.validate_routes()?;
        self.validate_limits()?;
        self.validate_logging()?;
        self.validate_resilience()?;
        self.validate_keepalive()?;
        self.validate_placement()?;
        // Reads the upstream password now, so a missing secret stops start-up.
        self.upstream.credentials().map_err(ConfigError)?;
        // Reads the CA, certificate and key now, so a bad file stops start-up.
        self.upstream.tls.connector().map_err(ConfigError)?;
        // Reads password files and variables now, so a missing secret stops start-up.
        crate::auth::Users::from_config(&self.auth).map_err(ConfigError)?;
        crate::router::validate_faults(&self.router.faults).map_err(ConfigError)?;
        crate::router::validate_node_admin(&self.router.allow_node_admin).map_err(ConfigError)?;
        self.near_cache.validate().map_err(ConfigError)?;
        self.hotkeys.check().map_err(ConfigError)?;
        crate::commands::custom::validate(&self.custom_commands).map_err(ConfigError)
    }

    /// At least one client listener; `listen`, `tls.listen` and `admin` parse as `IP:PORT` and do
    /// not ask for the same fixed port (port 0 may repeat); TLS files are set only with
    /// `tls.listen` and readable; the admin token and cluster facades are sane; `unix_permissions`
    /// is octal bits.
    fn validate_listeners(&self) -> Result<(), ConfigError> {
        if self.listen.is_none() && self.unix.is_none() && self.tls.listen.is_none() {
            return fail(
                "no listener: set `listen` (--listen ADDR), `unix` (--unix PATH) or `tls.listen`",
            );
        }
        if let Some(tls) = &self.tls.listen {
            let tls_addr = socket_addr("tls.listen", tls)?;
            if let Some(listen) = &self.listen {
                if same_fixed_port(socket_addr("listen", listen)?, tls_addr) {
                    return fail(format!(
                        "`tls.listen` and `listen` are both {tls}: TLS needs its own port"
                    ));
                }
            }
            positive("tls.handshake_timeout", self.tls.handshake_timeout)?;
            // Reads the certificate and key now, so a bad file stops start-up.
            self.tls.server_config().map_err(ConfigError)?;
        } else if self.tls.cert.is_some() || self.tls.key.is_some() || self.tls.client_ca.is_some()
        {
            return fail("`tls.cert`/`tls.key`/`tls.client_ca` are set but `tls.listen` is not");
        }
        if let Some(listen) = &self.listen {
            socket_addr("listen", listen)?;
        }
        if let Some(admin) = &self.admin.listen {
            let admin_addr = socket_addr("admin", admin)?;
            if let Some(listen) = &self.listen {
                if same_fixed_port(socket_addr("listen", listen)?, admin_addr) {
                    return fail(format!(
                        "`admin` and `listen` are both {admin}: they need different ports"
                    ));
                }
            }
        }
        // Reads the admin token now, so a missing secret stops start-up.
        self.admin.check().map_err(ConfigError)?;
        self.cluster_facade
            .check("cluster_facade", ("listen", self.listen.is_some()))
            .map_err(ConfigError)?;
        self.tls
            .cluster_facade
            .check(
                "tls.cluster_facade",
                ("tls.listen", self.tls.listen.is_some()),
            )
            .map_err(ConfigError)?;
        if let Some(path) = &self.unix {
            if path.as_os_str().is_empty() {
                return fail("`unix` is an empty path");
            }
        }
        match u32::from_str_radix(&self.unix_permissions, 8) {
            Ok(mode) if mode <= 0o777 => Ok(()),
            _ => fail(format!(
                "`unix_permissions` is `{}`: expected octal permission bits such as 660 or 600",
                self.unix_permissions
            )),
        }
    }

    /// The default backend follows either Sentinel or `cluster.seeds`, never both, and must have
    /// one of them when something routes to it; seeds are checked for shape only, not resolved.
    fn validate_cluster(&self) -> Result<(), ConfigError> {
        let cluster = &self.cluster;
        if let Some(sentinel) = &self.sentinel {
            if !cluster.seeds.is_empty() {
                return fail(
                    "both `sentinel` (--sentinel) and `cluster.seeds` (--cluster) are set: the \
                     default backend follows either one Sentinel-managed primary or a cluster; \
                     remove one (more backends go under `backends:`)",
                );
            }
            sentinel.validate("sentinel").map_err(|e| {
                ConfigError(format!(
                    "{e} (flags: --sentinel HOST:PORT[,HOST:PORT...] --sentinel-master NAME)"
                ))
            })?;
        } else if cluster.seeds.is_empty() && self.uses_default_backend() {
            let hint = if self.backends.is_empty() {
                ""
            } else {
                ", or set `catch_all` to one of `backends:` (the `default` backend is the \
                 `cluster.seeds` cluster)"
            };
            return fail(format!(
                "no cluster seeds: set `cluster.seeds` (--cluster HOST:PORT[,HOST:PORT...]), or \
                 `sentinel` (--sentinel HOST:PORT[,...] --sentinel-master NAME) for a \
                 Sentinel-managed primary{hint}"
            ));
        }
        for seed in &cluster.seeds {
            host_port("cluster.seeds", seed)?;
        }
        positive("cluster.refresh_interval", cluster.refresh_interval)?;
        positive("cluster.refresh_timeout", cluster.refresh_timeout)?;
        if cluster.refresh_min_gap > cluster.refresh_interval {
            return fail(format!(
                "`cluster.refresh_min_gap` ({:?}) is longer than `cluster.refresh_interval` ({:?})",
                cluster.refresh_min_gap, cluster.refresh_interval
            ));
        }
        Ok(())
    }

    /// Bounds on counts, sizes and timeouts, each with the range in the message; the ranges are the
    /// ones docs/configuration.md gives.
    fn validate_limits(&self) -> Result<(), ConfigError> {
        let up = &self.upstream;
        within(
            "upstream.connections_per_node",
            up.connections_per_node,
            1,
            64,
        )?;
        positive("upstream.connect_timeout", up.connect_timeout)?;
        within(
            "upstream.max_in_flight_per_connection",
            up.max_in_flight_per_connection,
            1,
            1 << 20,
        )?;
        // The window delays every command's write by up to its length; past a few milliseconds
        // that is a latency bug, not batching.
        if up.flush_interval > MAX_FLUSH_INTERVAL {
            return fail(format!(
                "`upstream.flush_interval` is {:?}: expected at most {MAX_FLUSH_INTERVAL:?} \
                 (every command may wait this long before it is written)",
                up.flush_interval
            ));
        }
        within("upstream.dedicated.max", up.dedicated.max, 1, 100_000)?;
        if up.dedicated.exhausted == crate::upstream::Exhausted::Wait {
            positive("upstream.dedicated.wait_timeout", up.dedicated.wait_timeout)?;
        }
        positive("router.op_timeout", self.router.op_timeout)?;
        within("router.max_redirects", self.router.max_redirects, 1, 16)?;
        let client = &self.client;
        within("client.max_in_flight", client.max_in_flight, 1, 1 << 20)?;
        within(
            "client.max_connections",
            client.max_connections,
            1,
            1_000_000,
        )?;
        within(
            "client.accept_backlog",
            client.accept_backlog as usize,
            1,
            65_535,
        )?;
        within("client.max_args", client.max_args, 1, 1 << 30)?;
        within("client.max_bulk_len", client.max_bulk_len, 1, 1 << 32)?;
        within("client.max_inline_len", client.max_inline_len, 16, 1 << 30)?;
        // A request keeps its arguments' offsets in 32 bits (`protocol::args`).
        within(
            "client.max_request_bytes",
            client.max_request_bytes,
            1,
            u32::MAX as usize,
        )?;
        if client.max_request_bytes < client.max_inline_len {
            return fail(format!(
                "`client.max_request_bytes` ({}) is smaller than `client.max_inline_len` ({}): \
                 an inline command could never fit",
                client.max_request_bytes, client.max_inline_len
            ));
        }
        within(
            "client.max_reply_bytes",
            client.max_reply_bytes,
            1024,
            usize::MAX,
        )?;
        if client.max_buffered_bytes_total != 0 && client.max_buffered_bytes_total < 1 << 20 {
            return fail(format!(
                "`client.max_buffered_bytes_total` is {} bytes: use 0 (no global budget) or at \
                 least 1mb, or ordinary clients would be paused all the time",
                client.max_buffered_bytes_total
            ));
        }
        within("workers", self.workers, 0, 1024)?;
        positive("drain_timeout", self.drain_timeout)?;
        positive("upgrade_timeout", self.upgrade_timeout)
    }

    /// Read policy, hedging, retry budget and outlier detection.
    /// Outlier settings are checked only when ejection is on (`consecutive_failures > 0`); with it
    /// off they are ignored, so a user can turn ejection off without touching the rest.
    fn validate_resilience(&self) -> Result<(), ConfigError> {
        let router = &self.router;
        if !router.hedge_after.is_zero() && !router.read_policy.uses_replicas() {
            return fail(format!(
                "`router.hedge_after` is {:?} but `router.read_policy` is {}: hedged reads go \
                 to a second node of the shard, so they need a read policy that uses replicas \
                 (prefer-primary, replica, prefer-replica or any)",
                router.hedge_after,
                router.read_policy.name()
            ));
        }
        if !router.hedge_after.is_zero() && router.hedge_after >= router.op_timeout {
            return fail(format!(
                "`router.hedge_after` ({:?}) is not shorter than `router.op_timeout` ({:?}): \
                 no read would ever be hedged",
                router.hedge_after, router.op_timeout
            ));
        }
        let ratio = router.retry_budget.ratio;
        if !(0.0..=10.0).contains(&ratio) {
            return fail(format!(
                "`router.retry_budget.ratio` is {ratio}: expected a share of the traffic from 0 to 10"
            ));
        }
        let outlier = &self.upstream.outlier;
        if outlier.consecutive_failures > 0 {
            positive(
                "upstream.outlier.base_ejection_time",
                outlier.base_ejection_time,
            )?;
            positive(
                "upstream.outlier.health_check_interval",
                outlier.health_check_interval,
            )?;
            if outlier.max_ejection_time < outlier.base_ejection_time {
                return fail(format!(
                    "`upstream.outlier.max_ejection_time` ({:?}) is shorter than \
                     `upstream.outlier.base_ejection_time` ({:?})",
                    outlier.max_ejection_time, outlier.base_ejection_time
                ));
            }
        }
        Ok(())
    }

    /// Values Linux takes for TCP keepalive: whole seconds from 1 to 32767 and 1 to 127 probes.
    /// Anything else makes the socket option, and with it every node connect, fail.
    /// `upstream.tcp_keepalive: 0s` turns keepalive off and skips the other checks.
    fn validate_keepalive(&self) -> Result<(), ConfigError> {
        let up = &self.upstream;
        if up.tcp_keepalive.is_zero() {
            return Ok(());
        }
        let seconds = |key: &str, value: Duration| {
            if (Duration::from_secs(1)..=MAX_KEEPALIVE_SECONDS).contains(&value) {
                return Ok(());
            }
            fail(format!(
                "`{key}` is {value:?}: expected 1s to 32767s while `upstream.tcp_keepalive` is on \
                 (`upstream.tcp_keepalive: 0s` turns keepalive off)"
            ))
        };
        seconds("upstream.tcp_keepalive", up.tcp_keepalive)?;
        if let Some(interval) = up.tcp_keepalive_interval {
            seconds("upstream.tcp_keepalive_interval", interval)?;
        }
        match up.tcp_keepalive_probes {
            Some(probes) if !(1..=MAX_KEEPALIVE_PROBES).contains(&probes) => fail(format!(
                "`upstream.tcp_keepalive_probes` is {probes}: expected 1 to \
                 {MAX_KEEPALIVE_PROBES} (Linux refuses more), or leave it unset for the OS default"
            )),
            _ => Ok(()),
        }
    }

    /// `placement: pack` chooses between per-core workers; the shared runtime has none to choose.
    /// With `threading: auto` the message says why auto settled on shared, so the fix is clear.
    fn validate_placement(&self) -> Result<(), ConfigError> {
        if self.placement != crate::workers::Placement::Pack
            || self.threading_model() == crate::workers::Model::PerCore
        {
            return Ok(());
        }
        let why = if self.threading == crate::workers::Threading::Auto {
            format!(
                " (because `workers` ({}) is more than \
                 `upstream.connections_per_node` ({}))",
                self.worker_threads(),
                self.upstream.connections_per_node
            )
        } else {
            String::new()
        };
        fail(format!(
            "`placement: pack` needs per-core workers, but `threading: {}` runs shared{why}: \
             set `threading: per-core` or `placement: even`",
            self.threading.name()
        ))
    }

    /// `log_level` accepts a plain level or any `EnvFilter` directive (containing `=`); the
    /// directive itself is parsed later, when logging starts, and a bad one stops start-up there.
    fn validate_logging(&self) -> Result<(), ConfigError> {
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return fail(format!(
                "`log_format` is `{}`: expected text or json",
                self.log_format
            ));
        }
        let level = self.log_level.to_ascii_lowercase();
        let known = ["error", "warn", "info", "debug", "trace", "off"];
        if !known.contains(&level.as_str()) && !level.contains('=') {
            return fail(format!(
                "`log_level` is `{}`: expected one of {} (or a directive like redcar=debug)",
                self.log_level,
                known.join(", ")
            ));
        }
        Ok(())
    }
}

/// Every refusal goes through here, so all are `ConfigError`s with a message only.
/// Shared with `validate_routes.rs`, which words its messages the same way.
pub(super) fn fail<T>(message: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(message.into()))
}

/// Listeners must be numeric: no DNS lookup at start-up, and no doubt which interface is bound.
/// Fails with the key, the value and an example of what parses.
fn socket_addr(key: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse().map_err(|_| {
        ConfigError(format!(
            "`{key}` is `{value}`: expected IP:PORT such as 127.0.0.1:6380"
        ))
    })
}

/// Whether two listeners ask for one port: the same address with a fixed port. Port 0 asks the
/// system to pick a free port, so two port-0 listeners on one IP get two different ones.
/// Used for `listen` against `tls.listen` and `admin`; the bind itself still fails if another
/// process holds the port.
fn same_fixed_port(a: SocketAddr, b: SocketAddr) -> bool {
    a == b && a.port() != 0
}

/// Seeds may be host names, so only the shape HOST:PORT is checked here.
/// The port must be 1 to 65535; IPv6 hosts go in brackets (`[::1]:7000`), split at the last `:`.
pub(super) fn host_port(key: &str, value: &str) -> Result<(), ConfigError> {
    let port = value
        .rsplit_once(':')
        .map(|(host, port)| (host, port.parse::<u16>()));
    match port {
        Some((host, Ok(port))) if !host.is_empty() && port != 0 => Ok(()),
        _ => fail(format!(
            "`{key}` has `{value}`: expected HOST:PORT such as 127.0.0.1:7000"
        )),
    }
}

/// For durations where zero would mean "never" or "at once" and neither makes sense.
pub(super) fn positive(key: &str, value: Duration) -> Result<(), ConfigError> {
    if value.is_zero() {
        return fail(format!("`{key}` must be greater than zero"));
    }
    Ok(())
}

/// Both ends inclusive.
/// Shared with the route checks (`mirror.max_in_flight`).
pub(super) fn within(key: &str, value: usize, min: usize, max: usize) -> Result<(), ConfigError> {
    if value < min || value > max {
        return fail(format!(
            "`{key}` is {value}: expected a value from {min} to {max}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listeners(listen: &str, admin: &str, tls: Option<&str>) -> Result<(), ConfigError> {
        let mut config = Config::from_yaml(&format!(
            "listen: {listen}\nadmin: {admin}\ncluster:\n  seeds: [127.0.0.1:7000]\n"
        ))
        .expect("parses");
        config.tls.listen = tls.map(String::from);
        config.validate_listeners()
    }

    /// Port 0 means "the system picks", so two port-0 listeners never collide; two listeners on
    /// one fixed port do.
    #[test]
    fn port_zero_listeners_may_share_an_ip_but_a_fixed_port_may_not() {
        assert!(listeners("127.0.0.1:0", "127.0.0.1:0", None).is_ok());
        assert!(listeners("127.0.0.1:6380", "127.0.0.1:6381", None).is_ok());
        let same = listeners("127.0.0.1:6380", "127.0.0.1:6380", None);
        assert!(same.is_err_and(|e| e.to_string().contains("different ports")));
        // tls.listen: checked before the certificate is read, so a collision fails first.
        let tls = listeners("127.0.0.1:6380", "127.0.0.1:9000", Some("127.0.0.1:6380"));
        assert!(tls.is_err_and(|e| e.to_string().contains("TLS needs its own port")));
        // Both on port 0: past the port check (it then fails for want of a certificate).
        let tls_zero = listeners("127.0.0.1:0", "127.0.0.1:9000", Some("127.0.0.1:0"));
        assert!(tls_zero.is_err_and(|e| !e.to_string().contains("own port")));
    }
}
