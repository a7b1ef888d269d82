//! What the admin endpoints read: the state `serve` is handed, shared by every handler.

use std::sync::Arc;

use super::sampler::Sampler;
use crate::cluster::ClusterState;
use crate::downstream::Downstream;
use crate::metrics::Metrics;
use crate::values::secret::PasswordDigest;

/// Every backend's slot map by name, as `/readyz` and `/topology` read it; a reload swaps it.
pub(crate) type BackendStates = arc_swap::ArcSwap<Vec<(String, Arc<ClusterState>)>>;

/// What the admin endpoints read (never write).
pub(crate) struct AdminState {
    /// The catch-all backend (the only one without `backends:`).
    pub(crate) cluster: Arc<ClusterState>,
    /// Every backend by name (`default` is the `cluster.seeds` cluster); a reload replaces it.
    pub(crate) backends: Arc<BackendStates>,
    /// The sessions: `/clients`, `/hotkeys` and the client figures of the status page.
    pub(crate) downstream: Arc<Downstream>,
    /// The registry `/metrics` encodes, plus the slow log and event log the JSON endpoints show.
    pub(crate) metrics: Arc<Metrics>,
    /// The configuration in effect, already redacted; a reload (SIGHUP) replaces it.
    pub(crate) config: Arc<arc_swap::ArcSwap<serde_json::Value>>,
    /// Recent counter samples, for the status page's rates (filled by a task `serve` starts).
    pub(crate) sampler: Arc<Sampler>,
    /// `admin.token`'s digest: when set, every endpoint but `/healthz` and `/readyz` needs it.
    /// Read at start-up only (restart to change it).
    pub(crate) token: Option<PasswordDigest>,
}
