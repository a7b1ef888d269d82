//! Follows a Sentinel-managed primary and keeps it (with its replicas) as a one-shard topology.
//!
//! The router sees a `ClusterState` whose map gives all 16384 slots to the primary Sentinel
//! names, so pipelining, read policies, retries, health and metrics work unchanged. `follow`
//! re-queries the sentinels every `query_interval`, at once on `+switch-master` (`watch`), and
//! when the router asks for a refresh (e.g. after `-READONLY` from a demoted primary).
//!
//! What holds: the map only ever moves forward in Sentinel's config epoch (a sentinel that missed a
//! failover is ignored, `follow.rs`); when no sentinel answers, the last known primary is kept, the
//! failure is counted in `redcar_topology_refreshes_total` and kept on the map's state, where the
//! error a client gets while there is no map quotes it; redcar never promotes anything itself. User
//! docs: docs/sentinel.md; the top-level `sentinel:` key and `backends.NAME` with `kind: sentinel`
//! both use [`SentinelConfig`].
#![warn(unreachable_pub, missing_docs)]

mod conn;
mod follow;
mod reply;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch as signal};

use crate::cluster::ClusterState;
use crate::metrics::Metrics;
use crate::upstream::Upstreams;
use crate::values::secret::Secret;
use crate::values::units;

use conn::SentinelAuth;

/// A `sentinel` backend in the config file.
/// Public because it is the type of a `Config` field (tests build a `Config`); its fields stay
/// crate-private.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SentinelConfig {
    /// Sentinel addresses (`HOST:PORT`); any one that answers is enough.
    pub(crate) sentinels: Vec<String>,
    /// The monitored primary's name (`sentinel monitor <name> ...`).
    pub(crate) master: String,
    /// ACL user for the sentinels themselves (separate from the data nodes' credentials).
    #[serde(default)]
    pub(crate) sentinel_username: Option<String>,
    /// Password for the sentinels (`{file: PATH}` or `{env: NAME}` also accepted; never shown).
    #[serde(default)]
    pub(crate) sentinel_password: Option<Secret>,
    /// How often the sentinels are asked for the primary's address even without a
    /// `+switch-master` event.
    #[serde(default = "default_query_interval", with = "units::duration")]
    pub(crate) query_interval: Duration,
}

/// One second: a missed `+switch-master` costs at most that much extra time on the old primary.
fn default_query_interval() -> Duration {
    Duration::from_secs(1)
}

// === impl SentinelConfig ===

impl Default for SentinelConfig {
    /// No sentinels and no name: only a base for command-line flags, never valid by itself.
    fn default() -> Self {
        SentinelConfig {
            sentinels: Vec::new(),
            master: String::new(),
            sentinel_username: None,
            sentinel_password: None,
            query_interval: default_query_interval(),
        }
    }
}

impl SentinelConfig {
    /// Start-up checks; `prefix` is where this config sits (`sentinel`, `backends.NAME`), so
    /// each message names the full key.
    /// Run by config validation, which is when the password file or variable is first read; a
    /// sentinel address must be `HOST:PORT` with a non-zero port, but is not resolved here.
    pub(crate) fn validate(&self, prefix: &str) -> Result<(), String> {
        if self.sentinels.is_empty() {
            return Err(format!(
                "`{prefix}.sentinels` is empty: list the sentinels as HOST:PORT"
            ));
        }
        for addr in &self.sentinels {
            let port = addr.rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>()));
            if !matches!(port, Some((host, Ok(port))) if !host.is_empty() && port != 0) {
                return Err(format!(
                    "`{prefix}.sentinels` has `{addr}`: expected HOST:PORT such as 127.0.0.1:26379"
                ));
            }
        }
        if self.master.is_empty() || self.master.contains(char::is_whitespace) {
            return Err(format!(
                "`{prefix}.master` is `{}`: expected the name the sentinels monitor \
                 (`sentinel monitor <name> ...`), without spaces",
                self.master
            ));
        }
        if self.query_interval.is_zero() {
            return Err(format!(
                "`{prefix}.query_interval` must be greater than zero"
            ));
        }
        self.auth(prefix).map(|_| ())
    }

    /// The sentinel credentials (the password read now), if any.
    /// Fails when a username comes without a password, or the password cannot be read.
    fn auth(&self, prefix: &str) -> Result<Option<SentinelAuth>, String> {
        let Some(secret) = &self.sentinel_password else {
            if self.sentinel_username.is_some() {
                return Err(format!(
                    "`{prefix}.sentinel_username` is set without `{prefix}.sentinel_password`"
                ));
            }
            return Ok(None);
        };
        let password = secret.reveal(&format!("{prefix}.sentinel_password"))?;
        Ok(Some(SentinelAuth {
            username: self.sentinel_username.clone(),
            password,
        }))
    }
}

/// Keeps `state` pointing at the current primary (and its replicas) named by the sentinels until
/// `shutdown` fires.
///
/// Spawns the `+switch-master` watcher beside the query loop; both end at `shutdown`. If the
/// password can no longer be read, the failure is recorded on `state` (the error clients get while
/// there is no map quotes it) and nothing is followed until shutdown. Called by
/// `Parts::spawn_background` for the top-level `sentinel` and by the backends for each `kind:
/// sentinel` entry.
pub(crate) async fn follow(
    config: SentinelConfig,
    state: Arc<ClusterState>,
    upstreams: Arc<Upstreams>,
    metrics: Arc<Metrics>,
    mut shutdown: signal::Receiver<bool>,
) {
    // Validated at start-up; a password file that vanished since is reported like any failure.
    let auth = match config.auth("sentinel") {
        Ok(auth) => auth,
        Err(reason) => {
            tracing::error!(%reason, "cannot follow the sentinels");
            state.note_refresh_error(reason);
            let _ = shutdown.changed().await;
            return;
        }
    };
    let timeout = upstreams.connect_timeout();
    // One pending notice is enough: the query it triggers sees every switch before it.
    let (notify, switches) = mpsc::channel(1);
    let watcher = watch::Switches {
        sentinels: config.sentinels.clone(),
        master: config.master.clone(),
        auth: auth.clone(),
        timeout,
        retry: config.query_interval,
        notify,
    };
    tokio::spawn(watcher.run(shutdown.clone()));
    let follower = follow::Follower {
        sentinels: config.sentinels,
        master: config.master,
        auth,
        query_interval: config.query_interval,
        timeout,
        state,
        upstreams,
        metrics,
        current: None,
    };
    follower.run(switches, shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(sentinels: &[&str], master: &str) -> SentinelConfig {
        SentinelConfig {
            sentinels: sentinels.iter().map(|s| s.to_string()).collect(),
            master: master.to_string(),
            ..SentinelConfig::default()
        }
    }

    #[test]
    fn validation_names_the_key() {
        let ok = config(&["127.0.0.1:26379", "sentinel-2:26379"], "mymaster");
        assert_eq!(ok.validate("sentinel"), Ok(()));
        let none = config(&[], "m").validate("backends.s").expect_err("empty");
        assert!(none.contains("`backends.s.sentinels` is empty"), "{none}");
        let bad = config(&["127.0.0.1"], "m")
            .validate("sentinel")
            .expect_err("no port");
        assert!(
            bad.contains("`sentinel.sentinels` has `127.0.0.1`"),
            "{bad}"
        );
        let port0 = config(&["h:0"], "m").validate("sentinel");
        assert!(port0.is_err());
        let unnamed = config(&["h:1"], "")
            .validate("sentinel")
            .expect_err("no name");
        assert!(unnamed.contains("`sentinel.master`"), "{unnamed}");
        let mut slow = config(&["h:1"], "m");
        slow.query_interval = Duration::ZERO;
        assert!(slow.validate("sentinel").is_err());
    }

    #[test]
    fn a_username_needs_a_password_and_the_password_is_read() {
        let mut user_only = config(&["h:1"], "m");
        user_only.sentinel_username = Some("u".into());
        let error = user_only.validate("sentinel").expect_err("no password");
        assert!(error.contains("`sentinel.sentinel_password`"), "{error}");
        let mut both = user_only.clone();
        both.sentinel_password = Some(Secret::Plain("pw".into()));
        let auth = both.auth("sentinel").expect("ok").expect("some");
        assert_eq!(
            (auth.username.as_deref(), auth.password.as_str()),
            (Some("u"), "pw")
        );
        let mut missing = config(&["h:1"], "m");
        missing.sentinel_password = Some(Secret::Env {
            env: "REDCAR_TEST_SURELY_UNSET_SENTINEL_PW".into(),
        });
        assert!(missing.validate("sentinel").is_err());
    }
}
