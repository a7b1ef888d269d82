//! Gauges an alert needs as absolute values rather than rates: slots owned and readiness per
//! backend, and the client limit in effect. They are set when `/metrics` is scraped, from state
//! the proxy keeps anyway, so nothing on the data path updates them.

use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::MetricGroup;

/// The `backend` label: `default` or a `backends:` name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BackendLabel {
    /// Owned, since backend names come from the config and change with reloads.
    backend: String,
}

/// Without these, "slots uncovered" could only be guessed from failed refreshes and "client
/// limit near" had to hard-code the default limit (examples/prometheus/redcar.rules.yml).
#[derive(Default)]
pub(crate) struct ReadinessGauges {
    /// `redcar_cluster_slots_owned`: 16384 on a healthy backend.
    slots_owned: Family<BackendLabel, Gauge>,
    /// `redcar_cluster_ready`: what `/readyz` judges, per backend.
    ready: Family<BackendLabel, Gauge>,
    /// `redcar_client_max_connections`, from the redacted config in effect (a reload may change
    /// it).
    client_max_connections: Gauge,
    /// The backends with series, so a reload's removed backend loses its own.
    backends: Mutex<Vec<String>>,
}

impl MetricGroup for ReadinessGauges {
    /// The per-backend series appear at the first scrape, when `set_backends` first runs.
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "cluster_slots_owned",
            "Slots (of 16384) that have an owner in the slot map redcar routes by, by backend",
            self.slots_owned.clone(),
        );
        registry.register(
            "cluster_ready",
            "1 once every slot of the backend has had an owner (what /readyz answers), else 0",
            self.ready.clone(),
        );
        registry.register(
            "client_max_connections",
            "client.max_connections in effect: clients beyond it are refused",
            self.client_max_connections.clone(),
        );
    }
}

impl ReadinessGauges {
    /// Every backend's figures as of now: `(name, slots owned, ready)`; backends not listed
    /// any more (a reload removed them) lose their series.
    pub(crate) fn set_backends<'a>(&self, now: impl IntoIterator<Item = (&'a str, usize, bool)>) {
        let mut known = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = Vec::new();
        for (backend, slots_owned, ready) in now {
            let label = BackendLabel {
                backend: backend.to_string(),
            };
            self.slots_owned
                .get_or_create(&label)
                .set(i64::try_from(slots_owned).unwrap_or(i64::MAX));
            self.ready.get_or_create(&label).set(i64::from(ready));
            seen.push(label.backend);
        }
        for backend in known.iter().filter(|b| !seen.contains(b)) {
            let label = BackendLabel {
                backend: backend.clone(),
            };
            self.slots_owned.remove(&label);
            self.ready.remove(&label);
        }
        *known = seen;
    }

    /// Saturates rather than wrapping for a limit beyond `i64::MAX`.
    pub(crate) fn set_client_max_connections(&self, limit: u64) {
        self.client_max_connections
            .set(i64::try_from(limit).unwrap_or(i64::MAX));
    }
}
