//! A group of series one module produces, and the hub's set of groups keyed by type.

use std::any::{Any, TypeId};
use std::sync::{Arc, RwLock};

use prometheus_client::registry::Registry;

use super::Totals;

/// The series one producing module defines (in its own `metrics.rs`): made with `Default`,
/// registered once when added to the hub ([`super::Metrics::add`]), then shared.
pub(crate) trait MetricGroup: Any + Send + Sync {
    /// Registers every series of the group (called once, when the group is added).
    fn register(&self, registry: &mut Registry);

    /// Brings gauges kept outside the data path up to date, just before an exposition.
    fn before_encode(&self) {}

    /// Adds the group's share of redcar's own INFO totals, creating no series.
    fn add_totals(&self, _totals: &mut Totals) {}
}

/// The groups added so far, in the order they were added (which is the exposition's).
#[derive(Default)]
pub(super) struct Groups {
    groups: RwLock<Vec<(TypeId, Arc<dyn MetricGroup>)>>,
}

impl Groups {
    /// Group `G` if it was added.
    pub(super) fn find<G: MetricGroup>(&self) -> Option<Arc<G>> {
        let groups = self.groups.read().unwrap_or_else(|e| e.into_inner());
        lookup(&groups)
    }

    /// Group `G`, made and registered with `register` the first time.
    pub(super) fn get_or_add<G: MetricGroup + Default>(&self, register: impl FnOnce(&G)) -> Arc<G> {
        if let Some(group) = self.find() {
            return group;
        }
        let mut groups = self.groups.write().unwrap_or_else(|e| e.into_inner());
        // Another thread may have added it between the two locks.
        if let Some(group) = lookup(&groups) {
            return group;
        }
        let group = Arc::new(G::default());
        register(&group);
        groups.push((TypeId::of::<G>(), group.clone()));
        group
    }

    /// Calls `f` on every group, in the order they were added.
    pub(super) fn each(&self, mut f: impl FnMut(&dyn MetricGroup)) {
        let groups = self.groups.read().unwrap_or_else(|e| e.into_inner());
        for (_, group) in groups.iter() {
            f(group.as_ref());
        }
    }
}

/// `G` among `groups`.
fn lookup<G: MetricGroup>(groups: &[(TypeId, Arc<dyn MetricGroup>)]) -> Option<Arc<G>> {
    let (_, group) = groups.iter().find(|(id, _)| *id == TypeId::of::<G>())?;
    let any: Arc<dyn Any + Send + Sync> = group.clone();
    any.downcast().ok()
}
