//! SIGHUP: load the config again exactly as at start-up, refuse it if invalid, else apply what
//! can change while running and keep (with a warning) what needs a restart.
//!
//! Each running part holds its reloadable settings behind an `ArcSwap` (or atomics) and offers a
//! `reconfigure`; this module only decides what goes where. The running config is owned by the
//! one reload task, so two SIGHUPs never apply concurrently.
//!
//! The order inside `Reloadable::apply` holds two guarantees: nothing is changed unless the whole
//! file loads, validates and its users resolve (every fallible step comes first), and the route
//! table is replaced only after the backends it names have started, so no command is routed to a
//! backend that does not exist yet. The outcome is counted in `redcar_config_reloads_total{result}`
//! and logged; docs/configuration.md lists, per key, whether a reload applies it.

use std::sync::Arc;

use arc_swap::ArcSwap;
use serde_json::Value;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::watch;

use super::config_view::{reads_replicas, redacted};
use super::metrics::ProcessMetrics;
use crate::auth::{Tenants, Users};
use crate::backends::{Backends, Context};
use crate::cluster::ClusterState;
use crate::config::secrets::SecretDigests;
use crate::config::{Config, ConfigError};
use crate::downstream::Downstream;
use crate::metrics::Metrics;
use crate::router::Router;
use crate::upstream::Upstreams;

mod secrets;

/// Loads the config the way start-up did (file, then the same flags, then validation).
/// Built by `main.rs` from the command line it was started with, so a reload reads the same file
/// and applies the same flag overrides. Called on a blocking thread: it reads files.
pub type ConfigSource = Arc<dyn Fn() -> Result<Config, ConfigError> + Send + Sync>;

/// The running parts a reload reconfigures.
pub(super) struct Reloadable {
    /// Takes the new `router.*` settings and route table.
    pub(crate) router: Arc<Router>,
    /// Takes the new `client.*` settings and users; open sessions see them from their next command.
    pub(crate) downstream: Arc<Downstream>,
    /// Only outlier detection changes here; the rest of `upstream.*` needs a restart.
    pub(crate) upstreams: Arc<Upstreams>,
    /// The default backend's map; its refresh timings (`cluster.*`) change in place.
    pub(crate) cluster: Arc<ClusterState>,
    /// The named backends: a reload starts new ones and stops removed ones.
    pub(crate) backends: Backends,
    /// What `/readyz` checks; replaced with `backends`.
    pub(crate) backend_states: Arc<crate::admin::BackendStates>,
    /// What starting a backend needs.
    pub(crate) context: Context,
    /// For the route table's metrics and the reload counter.
    pub(crate) metrics: Arc<Metrics>,
    /// What `/config` shows (redacted); also read at shutdown for `drain_timeout`.
    pub(crate) shown: Arc<ArcSwap<Value>>,
    /// The config in effect; `drain_timeout` is read from it at shutdown.
    pub(crate) current: Arc<ArcSwap<Config>>,
    /// Digests of the secrets in effect (read at start-up, then by each reload), so a reload
    /// can name a secret whose file or variable changed.
    pub(crate) secrets: SecretDigests,
    /// The users in effect (retired when a reload replaces them: subscribers then look at
    /// their rights again), and their running state, which the next users take over.
    pub(crate) users: Arc<Users>,
    /// Shared by every generation of users, so per-tenant limits and counters survive a reload.
    pub(crate) tenants: Arc<Tenants>,
}

/// Takes over SIGHUP (whose default action ends the process). Called before anything is
/// served, so a SIGHUP sent once redcar is ready never kills it.
pub(super) fn watch_sighup() -> Option<Signal> {
    match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(error) => {
            tracing::error!(%error, "cannot watch SIGHUP: config reload is off");
            None
        }
    }
}

/// Reloads on each SIGHUP, until `shutdown`.
/// Signals that arrive while one reload runs are coalesced by the signal stream into one more
/// reload, never two at once. A refused reload leaves every part as it was.
pub(super) async fn on_sighup(
    mut hangup: Signal,
    mut parts: Reloadable,
    source: ConfigSource,
    mut shutdown: watch::Receiver<bool>,
) {
    let process = parts.metrics.group::<ProcessMetrics>();
    loop {
        tokio::select! {
            got = hangup.recv() => if got.is_none() { return },
            _ = shutdown.changed() => return,
        }
        tracing::info!("SIGHUP: reloading the config");
        let source = source.clone();
        // Reading files (config, password files, certificates) blocks.
        let loaded = match tokio::task::spawn_blocking(move || source()).await {
            Ok(loaded) => loaded,
            Err(error) => Err(ConfigError(format!("the config loader failed: {error}"))),
        };
        match loaded.and_then(|config| parts.apply(config)) {
            Ok(()) => process.config_reload(true),
            Err(error) => {
                process.config_reload(false);
                tracing::error!(%error, "config reload refused; the running config stays");
            }
        }
    }
}

impl Reloadable {
    /// Applies a loaded, validated config; logs what changed and what needs a restart.
    /// Fails (changing nothing) when the new users cannot be built or a secret cannot be read.
    fn apply(&mut self, loaded: Config) -> Result<(), ConfigError> {
        let running = self.current.load_full();
        // What the file's secrets read now, before restart-only ones get their running values.
        let read = loaded.secret_digests()?;
        let (config, mut restart) = effective(&running, loaded);
        // Resolved again here (password files and variables), as start-up does.
        let users =
            Arc::new(Users::from_config_in(&config.auth, &self.tenants).map_err(ConfigError)?);
        let secrets = secrets::compare(&self.secrets, read, &running, &config);
        secrets::merge(&mut restart, &secrets.restart);
        for key in &restart {
            tracing::warn!(
                key = %key,
                "config reload: `{key}` changed in the file but needs a restart; the running value stays"
            );
        }
        let mut changed = changed_keys(&running, &config);
        secrets::merge(&mut changed, &secrets.live);
        self.secrets = secrets.running;
        self.router.reconfigure(config.router.clone());
        self.downstream
            .reconfigure(config.client.clone(), users.clone());
        std::mem::replace(&mut self.users, users).retire();
        self.upstreams.set_outlier(config.upstream.outlier.clone());
        self.cluster.reconfigure(config.cluster.clone());
        self.context.cluster = config.cluster.clone();
        self.backends.update(&config.backends, &self.context);
        let table = self
            .backends
            .table(&config.routes, config.routes_ignore_case, &self.metrics);
        self.router.planner().set_routes(table);
        self.backend_states.store(Arc::new(self.backends.states()));
        self.shown.store(Arc::new(redacted(&config)));
        self.current.store(Arc::new(config));
        if changed.is_empty() {
            tracing::info!("config reloaded: nothing to change");
        } else {
            tracing::info!(changed = %changed.join(", "), "config reloaded");
        }
        Ok(())
    }
}

/// The config to run with after a reload: `loaded`, except that settings needing a restart keep
/// their running values. Also returns those settings' keys where the file changed them.
/// Pure, so the tests check every key's fate without a running proxy. The restart list names the
/// leaf keys that changed, so the warning says exactly which setting was not applied.
fn effective(running: &Config, loaded: Config) -> (Config, Vec<String>) {
    let mut config = loaded;
    let mut restart = Vec::new();
    macro_rules! keep {
        ($($field:ident).+) => {
            if config.$($field).+ != running.$($field).+ {
                restart.extend(changed_paths(&running.$($field).+, &config.$($field).+, stringify!($($field).+)));
                config.$($field).+ = running.$($field).+.clone();
            }
        };
    }
    // Sockets, threads, the log subscriber and the metrics registry are set up once.
    keep!(listen);
    keep!(cluster_facade);
    keep!(unix);
    keep!(unix_permissions);
    keep!(admin);
    keep!(workers);
    keep!(threading);
    keep!(placement);
    keep!(log_level);
    keep!(log_format);
    keep!(metrics);
    // Written at start-up and by the process an upgrade hands over to.
    keep!(pid_file);
    // The hot-key sketches are sized once, before the first client.
    keep!(hotkeys);
    keep!(tls);
    keep!(custom_commands);
    // The Sentinel follower is started once with its sentinels and credentials.
    keep!(sentinel);
    // The budget's gauges and limit are shared by every session from the start.
    keep!(client.max_buffered_bytes_total);
    // The listen queue is set when the listeners are bound.
    keep!(client.accept_backlog);
    // The client-side caching table is made once, with its bound.
    keep!(client.tracking_table_max_keys);
    // The near cache is made once, with its rules, bound and heartbeat.
    keep!(near_cache);
    // Node connections are built once (count, handshake, buffers); only outlier detection is
    // shared settings that every node reads when it needs them.
    let outlier = std::mem::replace(
        &mut config.upstream.outlier,
        running.upstream.outlier.clone(),
    );
    keep!(upstream);
    config.upstream.outlier = outlier;
    // READONLY is sent when a node connection opens: a policy that starts or stops using
    // replicas needs new connections.
    if config.router.read_policy.uses_replicas() != running.router.read_policy.uses_replicas() {
        restart.push("router.read_policy".to_string());
        config.router.read_policy = running.router.read_policy;
    }
    if reads_replicas(&config) != reads_replicas(running) {
        restart.push("routes (a read_policy that starts or stops reading replicas)".to_string());
        config.routes = running.routes.clone();
    }
    // The router holds the catch-all backend's state from the start: that backend keeps
    // running as it is.
    keep!(catch_all);
    let name = &running.catch_all;
    if config.backends.get(name) != running.backends.get(name) {
        if let Some(backend) = running.backends.get(name) {
            restart.push(format!("backends.{name} (the catch_all backend)"));
            config.backends.insert(name.clone(), backend.clone());
        }
    }
    (config, restart)
}

/// Dotted keys whose values differ between two configs (for the log). Secrets serialize
/// redacted: `reload::secrets` names those that changed, by what they read.
fn changed_keys(old: &Config, new: &Config) -> Vec<String> {
    changed_paths(old, new, "")
}

/// Leaf paths under `prefix` where the serialized values differ; `prefix` itself when the
/// values differ but serialize alike (a secret).
fn changed_paths<T: serde::Serialize + PartialEq>(old: &T, new: &T, prefix: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let (Ok(a), Ok(b)) = (serde_json::to_value(old), serde_json::to_value(new)) else {
        return vec![prefix.to_string()];
    };
    diff(&a, &b, prefix, &mut paths);
    if paths.is_empty() && old != new && !prefix.is_empty() {
        paths.push(prefix.to_string());
    }
    paths
}

/// Keys of `a` first, then those only in `b`; a key missing on one side compares as null.
fn diff(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                diff(
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                    &child,
                    out,
                );
            }
        }
        _ if a != b => out.push(path.to_string()),
        _ => {}
    }
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod tests;
