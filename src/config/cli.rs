//! Command-line flags (and their `REDCAR_*` environment variables) layered over the YAML file.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use super::{Config, ConfigError};
use crate::values::units::parse_duration;

/// redcar: one Redis endpoint in front of a whole Redis Cluster.
#[derive(Debug, Parser, Default)]
#[command(name = "redcar", version, about, long_about = None)]
pub struct Cli {
    /// YAML config file; flags given here override its values.
    #[arg(long, env = "REDCAR_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// TCP address to accept clients on, e.g. 127.0.0.1:6380.
    #[arg(long, env = "REDCAR_LISTEN", value_name = "ADDR")]
    pub(crate) listen: Option<String>,
    /// Present the --listen listener as a one-node Redis Cluster owning every slot, for clients
    /// that insist on cluster mode (`cluster_facade.enabled`).
    #[arg(long, env = "REDCAR_CLUSTER_FACADE")]
    pub(crate) cluster_facade: bool,
    /// HOST:PORT the cluster facade announces instead of the address each client reached
    /// (`cluster_facade.announce`; behind NAT, Docker or Kubernetes).
    #[arg(long, env = "REDCAR_CLUSTER_FACADE_ANNOUNCE", value_name = "HOST:PORT")]
    cluster_facade_announce: Option<String>,
    /// Unix socket path to accept clients on.
    #[arg(long, env = "REDCAR_UNIX", value_name = "PATH")]
    pub(crate) unix: Option<PathBuf>,
    /// Octal permissions of the Unix socket file (default 660).
    #[arg(long, env = "REDCAR_UNIX_PERMISSIONS", value_name = "OCTAL")]
    pub(crate) unix_permissions: Option<String>,
    /// Cluster seed nodes, comma separated: HOST:PORT[,HOST:PORT...].
    #[arg(
        long,
        env = "REDCAR_CLUSTER",
        value_name = "SEEDS",
        value_delimiter = ','
    )]
    pub(crate) cluster: Vec<String>,
    /// Follow a Sentinel-managed primary instead of a cluster: the sentinels, comma separated
    /// (HOST:PORT[,HOST:PORT...]); needs --sentinel-master.
    #[arg(
        long,
        env = "REDCAR_SENTINEL",
        value_name = "SENTINELS",
        value_delimiter = ','
    )]
    pub(crate) sentinel: Vec<String>,
    /// The primary's name as the sentinels monitor it (`sentinel monitor <name> ...`).
    #[arg(long, env = "REDCAR_SENTINEL_MASTER", value_name = "NAME")]
    sentinel_master: Option<String>,
    /// HTTP admin address serving /healthz and /readyz.
    #[arg(long, env = "REDCAR_ADMIN", value_name = "ADDR")]
    pub(crate) admin: Option<String>,
    /// Bearer token the admin API requires on every endpoint but /healthz and /readyz
    /// (`admin.token`). Prefer the environment variable or `{file: ...}` in the config: a
    /// flag's value is visible in the process list.
    #[arg(
        long,
        env = "REDCAR_ADMIN_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub(crate) admin_token: Option<String>,
    /// Log level: error, warn, info, debug, trace.
    #[arg(long, env = "REDCAR_LOG_LEVEL", value_name = "LEVEL")]
    pub(crate) log_level: Option<String>,
    /// Log format: text or json.
    #[arg(long, env = "REDCAR_LOG_FORMAT", value_name = "FORMAT")]
    pub(crate) log_format: Option<String>,
    /// Worker threads (0 = one per core).
    #[arg(long, env = "REDCAR_WORKERS", value_name = "N")]
    pub(crate) workers: Option<usize>,
    /// Threading model: auto (default), shared (one multi-thread runtime) or per-core (a runtime
    /// per worker).
    #[arg(long, env = "REDCAR_THREADING", value_name = "MODEL")]
    pub(crate) threading: Option<crate::workers::Threading>,
    /// How per-core workers share new clients: even (default), pack (the first worker not yet
    /// busy takes them) or auto (pack while clients come and go, even while they stay).
    #[arg(long, env = "REDCAR_PLACEMENT", value_name = "HOW")]
    pub(crate) placement: Option<crate::workers::Placement>,
    /// Per core: one event loop per worker (true, the default) or one task per client and per
    /// node connection (false).
    #[arg(long, env = "REDCAR_EVENT_LOOP", value_name = "BOOL")]
    pub(crate) event_loop: Option<bool>,
    /// Deadline for one command, redirects and retries included (e.g. 1s, 250ms).
    #[arg(long, env = "REDCAR_OP_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) op_timeout: Option<Duration>,
    /// Password clients must give with AUTH (the `default` user), as redis-server's
    /// --requirepass. Prefer `auth.requirepass` with `{file: ...}` or `{env: ...}` in the
    /// config: a flag's value is visible in the process list.
    #[arg(
        long,
        env = "REDCAR_REQUIREPASS",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub(crate) requirepass: Option<String>,
    /// Where reads go: primary, prefer-primary, replica, prefer-replica or any.
    #[arg(long, env = "REDCAR_READ_POLICY", value_name = "POLICY", value_enum)]
    pub(crate) read_policy: Option<crate::router::ReadPolicy>,
    /// Persistent pipelined connections to each cluster node.
    #[arg(long, env = "REDCAR_CONNECTIONS_PER_NODE", value_name = "N")]
    pub(crate) connections_per_node: Option<usize>,
    /// File holding the serving process's pid (`pid_file`): written at start-up, rewritten by
    /// the new process after an upgrade in place; `redcar upgrade --pid-file` reads it.
    #[arg(long, env = "REDCAR_PID_FILE", value_name = "FILE")]
    pub(crate) pid_file: Option<PathBuf>,
    /// Validate the configuration, print the effective config as YAML and exit.
    #[arg(long)]
    pub check_config: bool,
    /// A tool to run instead of the proxy; none runs the proxy.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Tools that share the binary but not the proxy's configuration.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Connect to every node of a cluster and report settings that cost latency or availability.
    ///
    /// Exit status: 0 ok/info, 1 warn, 2 critical, 3 no seed reachable, 64 bad arguments.
    Doctor(DoctorArgs),
    /// A live terminal view of a running redcar (commands/s, latency per command and node,
    /// errors, connections), read from its admin `/metrics`.
    Top(redcar_top::TopArgs),
    /// Config file tools: convert another proxy's configuration into redcar's.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Upgrade a running redcar in place: start the binary at its path again, which takes over
    /// the listeners and the connected clients (docs/operations.md).
    ///
    /// Sends SIGUSR2 to the process named by the pid file, then waits for the outcome. Exit
    /// status: 0 upgraded, 1 failed (the running process goes on serving), 64 bad arguments or
    /// no such process.
    Upgrade(UpgradeArgs),
}

/// Flags of `redcar upgrade`.
#[derive(Debug, Args)]
pub struct UpgradeArgs {
    /// The pid file the running redcar writes (its `--pid-file` / `pid_file`).
    #[arg(long, value_name = "FILE")]
    pub pid_file: PathBuf,
    /// How long to wait for the outcome (the running process's `upgrade_timeout` bounds the
    /// new process's start).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// `redcar config ...` tools (see docs/migrating-from-envoy.md).
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the redcar config equivalent to an Envoy redis_proxy listener and its
    /// envoy.clusters.redis cluster. Exit status: 0 converted (warnings on stderr), 1 not.
    ConvertEnvoy(ConvertEnvoyArgs),
}

/// Flags of `redcar config convert-envoy`.
#[derive(Debug, Args)]
pub struct ConvertEnvoyArgs {
    /// An Envoy bootstrap (static_resources), Istio EnvoyFilter manifests (YAML, one or more
    /// documents) or an Envoy admin config_dump (JSON); `-` reads stdin.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The listener to convert when several have a redis_proxy filter.
    #[arg(long, value_name = "NAME")]
    pub listener: Option<String>,
    /// Convert only this cluster of the prefix routes (one redcar per cluster); without it,
    /// prefix routes over several clusters become redcar's `backends:` and `routes:`.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
}

/// Flags of `redcar doctor` (see docs/doctor.md).
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Cluster seed nodes, comma separated: HOST:PORT[,HOST:PORT...].
    #[arg(
        long,
        env = "REDCAR_CLUSTER",
        value_name = "SEEDS",
        value_delimiter = ',',
        required = true
    )]
    pub(crate) cluster: Vec<String>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Bound on each connect and each command (e.g. 2s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,
    /// ACL user to authenticate as on every node (Redis 6+); needs --password.
    #[arg(
        long,
        env = "REDCAR_UPSTREAM_USER",
        value_name = "USER",
        requires = "password"
    )]
    pub(crate) user: Option<String>,
    /// Password for AUTH on every node (the `default` user's without --user). Prefer the
    /// environment variable: a flag's value is visible in the process list.
    #[arg(
        long,
        env = "REDCAR_UPSTREAM_PASSWORD",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub(crate) password: Option<String>,
    /// Connect to the nodes over TLS (as `upstream.tls.enabled`); needs --cacert.
    #[arg(long, requires = "cacert")]
    pub(crate) tls: bool,
    /// PEM file of the CA that signed the nodes' certificates (`upstream.tls.ca_file`).
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub(crate) cacert: Option<PathBuf>,
    /// PEM client certificate, for nodes with `tls-auth-clients yes`; needs --key.
    #[arg(long, value_name = "FILE", requires_all = ["tls", "key"])]
    pub(crate) cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, value_name = "FILE", requires_all = ["tls", "cert"])]
    pub(crate) key: Option<PathBuf>,
    /// Name to send as SNI and verify in the nodes' certificates (default: each node's host).
    #[arg(long, value_name = "NAME", requires = "tls")]
    pub(crate) sni: Option<String>,
}

impl Cli {
    /// The `doctor` subcommand's options, when it was given (the proxy's flags are ignored then).
    /// Seeds are trimmed, so `--cluster "a:1, b:2"` works; a password without `--user` is the
    /// one-argument `AUTH`. Called by `main.rs` before any config is loaded: doctor needs none.
    pub fn doctor_options(&self) -> Option<redcar_doctor::DoctorOptions> {
        let Some(Command::Doctor(args)) = &self.command else {
            return None;
        };
        Some(redcar_doctor::DoctorOptions {
            seeds: args.cluster.iter().map(|s| s.trim().to_string()).collect(),
            json: args.json,
            timeout: args.timeout,
            credentials: args
                .password
                .clone()
                .map(|password| redcar_doctor::Credentials {
                    username: args.user.clone(),
                    password,
                }),
            tls: redcar_tls::UpstreamTlsConfig {
                enabled: args.tls,
                ca_file: args.cacert.clone(),
                server_name: args.sni.clone(),
                cert_file: args.cert.clone(),
                key_file: args.key.clone(),
            },
        })
    }

    /// Overrides `config` with every flag that was given.
    /// Flags win over the file, key by key; an absent flag leaves the file's value (or the
    /// default). The same `Cli` is applied again at every reload, so a flag keeps overriding a
    /// reloaded file. `--admin-token` and `--requirepass` become plain secrets, as if written in
    /// clear in the file.
    pub(crate) fn apply(&self, config: &mut Config) -> Result<(), ConfigError> {
        set(&mut config.listen, self.listen.clone().map(Some));
        if self.cluster_facade {
            config.cluster_facade.enabled = true;
        }
        set(
            &mut config.cluster_facade.announce,
            self.cluster_facade_announce.clone().map(Some),
        );
        set(&mut config.unix, self.unix.clone().map(Some));
        set(&mut config.unix_permissions, self.unix_permissions.clone());
        set(&mut config.admin.listen, self.admin.clone().map(Some));
        if let Some(token) = &self.admin_token {
            config.admin.token = Some(crate::auth::Secret::Plain(token.clone()));
        }
        set(&mut config.log_level, self.log_level.clone());
        set(&mut config.log_format, self.log_format.clone());
        set(&mut config.workers, self.workers);
        set(&mut config.threading, self.threading);
        set(&mut config.placement, self.placement);
        set(&mut config.event_loop, self.event_loop);
        set(&mut config.router.op_timeout, self.op_timeout);
        set(&mut config.router.read_policy, self.read_policy);
        if let Some(password) = &self.requirepass {
            config.auth.requirepass = Some(crate::auth::Secret::Plain(password.clone()));
        }
        set(
            &mut config.upstream.connections_per_node,
            self.connections_per_node,
        );
        if !self.cluster.is_empty() {
            config.cluster.seeds = self
                .cluster
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
        }
        set(&mut config.pid_file, self.pid_file.clone().map(Some));
        self.apply_sentinel(config);
        Ok(())
    }

    /// `--sentinel` and `--sentinel-master` create or override the `sentinel:` section.
    /// Either flag alone creates the section (from its defaults), so validation can name what is
    /// missing; `--sentinel` replaces the file's list, it does not add to it.
    fn apply_sentinel(&self, config: &mut Config) {
        if self.sentinel.is_empty() && self.sentinel_master.is_none() {
            return;
        }
        let sentinel = config.sentinel.get_or_insert_with(Default::default);
        if !self.sentinel.is_empty() {
            sentinel.sentinels = self
                .sentinel
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
        }
        set(&mut sentinel.master, self.sentinel_master.clone());
    }
}

/// The one way a flag overrides: only when it was given.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}
