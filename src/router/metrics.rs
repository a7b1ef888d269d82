//! The series `router` produces: retries, hedged reads, retries the budget refused, replicas'
//! "absent" answers asked again of the primary, and injected faults.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::metrics::{MetricGroup, Totals};

/// `kind`: `delay` or `error`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

/// What the router did beyond sending a command once.
#[derive(Default)]
pub(crate) struct RouterMetrics {
    /// `retries`: commands sent again after a failure or a transient error reply.
    retries: Counter,
    /// `hedged_reads`: second reads sent because the first was slow.
    hedges: Counter,
    /// Retries refused because `router.retry_budget` was spent.
    retry_budget_exhausted: Counter,
    /// Replicas' "absent" answers (nil, empty, 0) asked again of the primary
    /// (`router.replica_miss_check`).
    replica_miss_checks: Counter,
    /// `faults_injected{kind}`.
    faults: Family<KindLabel, Counter>,
}

/// The kinds of injected fault, made at 0 at start-up so the dashboard's panel has a series
/// from the first scrape.
const FAULT_KINDS: [&str; 2] = ["delay", "error"];

impl MetricGroup for RouterMetrics {
    fn register(&self, r: &mut Registry) {
        for kind in FAULT_KINDS {
            self.faults.get_or_create_owned(&KindLabel { kind });
        }
        r.register(
            "faults_injected",
            "Commands delayed or answered with an error by router.faults, by kind (delay, error)",
            self.faults.clone(),
        );
        r.register(
            "hedged_reads",
            "Reads sent to a second node because the first had not answered within router.hedge_after",
            self.hedges.clone(),
        );
        r.register(
            "retry_budget_exhausted",
            "Retries not made because router.retry_budget was spent",
            self.retry_budget_exhausted.clone(),
        );
        r.register(
            "replica_miss_checks",
            "Replies from a replica that a missing key would produce (nil, empty, 0, ...) asked again of the slot's primary (router.replica_miss_check)",
            self.replica_miss_checks.clone(),
        );
        r.register(
            "retries",
            "Commands sent again after a failure or a TRYAGAIN/CLUSTERDOWN/LOADING/MASTERDOWN reply",
            self.retries.clone(),
        );
    }

    fn add_totals(&self, totals: &mut Totals) {
        totals.retries = self.retries.get();
    }
}

impl RouterMetrics {
    /// A command about to be sent again (after a connection failure or a transient error reply).
    pub(crate) fn retry(&self) {
        self.retries.inc();
    }

    /// A read sent to a second node (`router.hedge_after`).
    pub(crate) fn hedge(&self) {
        self.hedges.inc();
    }

    /// A replica's "no such key" sent to the slot's primary to confirm.
    pub(crate) fn replica_miss_check(&self) {
        self.replica_miss_checks.inc();
    }

    /// A retry refused by `router.retry_budget`.
    pub(crate) fn retry_budget_exhausted(&self) {
        self.retry_budget_exhausted.inc();
    }

    /// The counter of injected faults of one `kind` (`delay` or `error`), made once at start-up
    /// so injecting costs one atomic add.
    pub(crate) fn faults(&self, kind: &'static str) -> Counter {
        self.faults.get_or_create_owned(&KindLabel { kind })
    }
}
