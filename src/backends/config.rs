//! `backends:` and `routes:` in the config file: named upstreams of three kinds, and the key-prefix
//! routes that send commands to them.

use serde::{Deserialize, Serialize};

use crate::router::ReadPolicy;
use crate::sentinel::SentinelConfig;

/// The name of the backend that `cluster.seeds` (`--cluster`) defines.
pub(crate) const DEFAULT_BACKEND: &str = "default";

/// One named backend (`backends.<name>`); `kind` picks the variant.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum BackendConfig {
    /// A Redis Cluster found from its seeds, refreshed like the default one (`cluster:` timings).
    Cluster(ClusterBackend),
    /// One primary (and replicas for reads), no cluster mode: one shard owning every slot.
    Standalone(StandaloneBackend),
    /// A primary that Sentinel names and fails over.
    Sentinel(SentinelConfig),
}

/// `kind: cluster`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterBackend {
    /// Nodes asked for the topology (HOST:PORT).
    pub(crate) seeds: Vec<String>,
}

/// `kind: standalone`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StandaloneBackend {
    /// The node that takes writes (HOST:PORT).
    pub(crate) primary: String,
    /// Replicas of `primary` that a read policy may read from.
    #[serde(default)]
    pub(crate) replicas: Vec<String>,
}

/// One entry of `routes:`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Keys starting with this (the longest matching prefix wins) go to `backend`.
    pub(crate) prefix: String,
    /// A name from `backends:`, or `default` (the `cluster.seeds` cluster).
    pub(crate) backend: String,
    /// Remove `prefix` from the keys before forwarding (`sess:42` is stored as `42`).
    #[serde(default)]
    pub(crate) strip_prefix: bool,
    /// Where this route's reads go; `router.read_policy` when absent.
    #[serde(default)]
    pub(crate) read_policy: Option<ReadPolicy>,
    /// Copy this route's commands to a second backend (fire-and-forget).
    #[serde(default)]
    pub(crate) mirror: Option<MirrorConfig>,
}

/// `routes[].mirror`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct MirrorConfig {
    /// The backend that receives the copies.
    pub(crate) backend: String,
    /// Share of the route's commands copied, 0 to 100.
    #[serde(default = "hundred")]
    pub(crate) percent: u32,
    /// Copy reads too (writes only by default).
    #[serde(default)]
    pub(crate) reads: bool,
    /// Copies awaiting the mirror's reply; more are dropped (`redcar_mirror_dropped_total`).
    #[serde(default = "default_mirror_in_flight")]
    pub(crate) max_in_flight: usize,
}

/// `routes[].mirror.percent`'s default: every command of the route is copied.
fn hundred() -> u32 {
    100
}

/// `routes[].mirror.max_in_flight`'s default, documented in docs/configuration.md.
fn default_mirror_in_flight() -> usize {
    1000
}

impl BackendConfig {
    /// `cluster`, `standalone` or `sentinel`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            BackendConfig::Cluster(_) => "cluster",
            BackendConfig::Standalone(_) => "standalone",
            BackendConfig::Sentinel(_) => "sentinel",
        }
    }
}
