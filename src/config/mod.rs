//! The configuration tree: YAML file, then command-line flags, then `validate()` before start-up.
//!
//! Each subsystem owns its leaf type (`cluster::ClusterConfig`, `upstream::UpstreamConfig`, ...)
//! so no module imports `config`; this module only composes them and checks they fit together.
//! Every key is documented in docs/configuration.md, and a test keeps the two in sync.
//!
//! The life of a config: `Config::load` reads the file (or starts from `Default`), applies the
//! flags and `REDCAR_*` variables (`cli.rs`), and validates (`validate.rs`, `validate_routes.rs`);
//! `app::run` builds the parts from the result. A SIGHUP runs the same `load` again with the same
//! command line; `app/reload.rs` decides which keys apply live. `Serialize` is what `/config` and
//! `--check-config` print, with every secret redacted (`values::secret`).
//!
//! Adding a key: put it in the owning subsystem's config type with its default, check it in
//! `validate` if it can be wrong, document it in docs/configuration.md, and update
//! tests/surface/config.yaml, the committed copy of every key and default a test compares with.
#![warn(unreachable_pub, missing_docs)]

mod cli;
mod validate;
mod validate_routes;

/// Every secret-typed key by name, and the digests a reload compares.
pub(crate) mod secrets;

pub use cli::{Cli, Command, ConfigCommand, ConvertEnvoyArgs, UpgradeArgs};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::values::units;

use crate::admin::AdminConfig;
use crate::auth::AuthConfig;
use crate::backends::{BackendConfig, RouteConfig, DEFAULT_BACKEND};
use crate::cluster::ClusterConfig;
use crate::commands::CustomCommand;
use crate::downstream::{ClientConfig, FacadeConfig, TlsConfig};
use crate::hotkeys::HotKeysConfig;
use crate::metrics::MetricsConfig;
use crate::near_cache::NearCacheConfig;
use crate::router::RouterConfig;
use crate::sentinel::SentinelConfig;
use crate::upstream::UpstreamConfig;

/// The whole configuration. `Default` holds the documented defaults.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// TCP address clients connect to, e.g. `127.0.0.1:6380`.
    pub listen: Option<String>,
    /// Present the `listen` listener as a one-node Redis Cluster (docs/cluster-facade.md).
    pub cluster_facade: FacadeConfig,
    /// Unix socket path clients connect to (in addition to, or instead of, `listen`).
    pub unix: Option<PathBuf>,
    /// Octal permission bits applied to the Unix socket file.
    pub unix_permissions: String,
    /// HTTP admin API: its address (off when absent) and optional bearer token.
    pub admin: AdminConfig,
    /// Runtime worker threads; 0 means one per available core.
    pub workers: usize,
    /// `shared` (one multi-thread runtime, node connections shared by its workers), `per-core`
    /// (one single-threaded runtime per worker, node connections dealt out to them) or `auto`.
    pub threading: crate::workers::Threading,
    /// Per core: `even` (the default: every worker about as many clients), `pack` (new clients
    /// to the first worker not yet busy) or `auto` (`pack` while clients come and go, `even`
    /// while they stay).
    pub placement: crate::workers::Placement,
    /// Per core: each worker runs one event loop that owns its clients' sockets and its share
    /// of the node connections (`true`, the default), or one task per client and per node
    /// connection (`false`). Connection tasks stay with `upstream.tls` or `near_cache`.
    pub event_loop: bool,
    /// Log filter: error, warn, info, debug, trace (or a tracing directive list).
    pub log_level: String,
    /// `text` or `json`.
    pub log_format: String,
    /// How long SIGTERM/SIGINT waits for in-flight replies before closing clients.
    #[serde(with = "units::duration")]
    pub drain_timeout: Duration,
    /// How long a new process started by an upgrade in place (SIGUSR2, `redcar upgrade`) may
    /// take to be ready (config read, slot map fetched) before the upgrade is called off.
    #[serde(with = "units::duration")]
    pub upgrade_timeout: Duration,
    /// A file holding the serving process's pid: written at start-up, rewritten by a new
    /// process when an upgrade in place hands over to it (`--pid-file`).
    pub pid_file: Option<PathBuf>,
    /// The Redis Cluster in front of which redcar runs: seeds and slot-map refresh.
    pub cluster: ClusterConfig,
    /// Follow one Sentinel-managed primary instead of a cluster (exclusive with
    /// `cluster.seeds`).
    pub sentinel: Option<SentinelConfig>,
    /// Connections to the nodes: per-node pools, timeouts, health, AUTH and TLS.
    pub upstream: UpstreamConfig,
    /// Command routing: read policy, retries, deadlines, hedged reads.
    pub router: RouterConfig,
    /// Client sessions: limits, timeouts, keepalive.
    pub client: ClientConfig,
    /// The Prometheus series, the slow log and the event log.
    pub metrics: MetricsConfig,
    /// The hot-key and big-key monitor (`/hotkeys`).
    pub hotkeys: HotKeysConfig,
    /// Chosen reads served from redcar's memory, kept fresh by the nodes' invalidations
    /// (docs/near-cache.md). Off by default.
    pub near_cache: NearCacheConfig,
    /// Client authentication: `requirepass` and users with their command rules.
    pub auth: AuthConfig,
    /// A TLS listener for clients (certificate, key, optional client CA).
    pub tls: TlsConfig,
    /// Commands redcar does not know and the cluster does not describe (module commands on older
    /// servers), routed by the key positions declared here.
    pub custom_commands: Vec<CustomCommand>,
    /// Named backends (`kind: cluster | standalone | sentinel`); `cluster.seeds` is `default`.
    pub backends: BTreeMap<String, BackendConfig>,
    /// Key-prefix routes to the backends (longest prefix wins).
    pub routes: Vec<RouteConfig>,
    /// The backend for keys no route matches and for keyless commands.
    pub catch_all: String,
    /// Match route prefixes without regard to ASCII case.
    pub routes_ignore_case: bool,
}

/// The defaults docs/configuration.md lists. No listener is set, so the default alone does not
/// validate.
impl Default for Config {
    fn default() -> Self {
        Config {
            listen: None,
            cluster_facade: FacadeConfig::default(),
            unix: None,
            unix_permissions: "660".to_string(),
            admin: AdminConfig::default(),
            workers: 0,
            threading: crate::workers::Threading::Auto,
            placement: crate::workers::Placement::Auto,
            event_loop: true,
            log_level: "info".to_string(),
            log_format: "text".to_string(),
            drain_timeout: Duration::from_secs(10),
            upgrade_timeout: Duration::from_secs(30),
            pid_file: None,
            cluster: ClusterConfig::default(),
            sentinel: None,
            upstream: UpstreamConfig::default(),
            router: RouterConfig::default(),
            client: ClientConfig::default(),
            metrics: MetricsConfig::default(),
            hotkeys: HotKeysConfig::default(),
            near_cache: NearCacheConfig::default(),
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
            custom_commands: Vec::new(),
            backends: BTreeMap::new(),
            routes: Vec::new(),
            catch_all: DEFAULT_BACKEND.to_string(),
            routes_ignore_case: false,
        }
    }
}

/// A setting that stops start-up; the message names the key.
/// Shown as `redcar: invalid configuration: ...`; at start-up the process exits with status 64, at
/// a reload the running config stays and the error is logged. Made only by loading and validating,
/// with a message that names the key and what it accepts.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub(crate) String);

impl Config {
    /// Reads a YAML file; unknown keys are errors, missing keys take their defaults.
    /// Fails if the file cannot be read or parsed; the message starts with the file's path.
    fn from_yaml_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
        Self::from_yaml(&text)
            .map_err(|ConfigError(msg)| ConfigError(format!("{}: {msg}", path.display())))
    }

    /// Parses YAML text (an empty document gives the defaults).
    /// Not validated: callers that need a runnable config call `validate` (as `load` does); the
    /// Envoy converter and tests parse without it. Unknown keys fail, with the key's path in the
    /// message.
    pub(crate) fn from_yaml(text: &str) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        yaml_serde::from_str(text).map_err(|e| ConfigError(e.to_string()))
    }

    /// Builds the effective config: the file named by `--config` (if any), then CLI overrides,
    /// then validation.
    /// Also what every reload calls (the `ConfigSource` `main.rs` builds); it reads secret files
    /// and certificates, so it blocks and runs off the runtime during a reload.
    pub fn load(cli: &Cli) -> Result<Config, ConfigError> {
        let mut config = match &cli.config {
            Some(path) => Config::from_yaml_file(path)?,
            None => Config::default(),
        };
        cli.apply(&mut config)?;
        config.validate()?;
        Ok(config)
    }

    /// Worker threads to start: `workers`, or the number of available cores.
    /// 1 when the number of cores cannot be read.
    pub fn worker_threads(&self) -> usize {
        if self.workers > 0 {
            return self.workers;
        }
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// Whether each per-core worker runs an event loop (see `event_loop`): per core, and
    /// neither upstream TLS nor the near cache (whose connections stay tasks) in use.
    /// Read once at start-up: `event_loop`, `threading`, `upstream.tls` and `near_cache` all need a
    /// restart to change, so this cannot flip under a running proxy.
    pub(crate) fn event_loops(&self) -> bool {
        self.event_loop
            && self.threading_model() == crate::workers::Model::PerCore
            && !self.upstream.tls.enabled
            && !self.near_cache.enabled
    }

    /// The threading model that runs (`threading`, with `auto` settled).
    /// `auto` looks at the worker count and `upstream.connections_per_node`
    /// (`workers::Threading::resolve`, docs/decisions/0006-threads-and-placement.md).
    pub fn threading_model(&self) -> crate::workers::Model {
        self.threading
            .resolve(self.worker_threads(), self.upstream.connections_per_node)
    }
}

#[cfg(test)]
mod tests;
