//! The series `cluster` produces: slot-map refreshes, the checks that spare most of them, the
//! maps it rejected, and the MOVED/ASK redirects followed (the router follows them, but they
//! report a topology that moved).
//! Slots owned and readiness per backend are gauges set at scrape time (`admin/readiness.rs`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::metrics::{MetricGroup, Totals};

/// `redirects{kind, node}`: `kind` is `moved` or `ask`, `node` the target the redirect named.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RedirectLabel {
    kind: &'static str,
    node: String,
}

/// `topology_refreshes{result}`: `ok` or `failed`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// `topology_checks{probe, result}`: the cheap probe used (`digest` or `info`) and what it found.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CheckLabel {
    probe: &'static str,
    result: &'static str,
}

/// `topology_rejected{reason}`: `stale`, `unconfirmed` or `partial`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// The label values each family is made with at start-up, at 0: the dashboard's panels and the
/// alerting rules (`increase(...{result="failed"}[5m])`) then have a series from the first
/// scrape, and `rate()` sees the first event (a series born at 1 hides it).
const REFRESH_RESULTS: [&str; 2] = ["ok", "failed"];
/// The cheap probes that decide whether a full refresh is needed.
const CHECK_PROBES: [&str; 2] = ["digest", "info"];
/// What a probe found; `changed` and `failed` are followed by a refresh.
const CHECK_RESULTS: [&str; 3] = ["unchanged", "changed", "failed"];
/// Why a map was not adopted (see `refresh::decide`).
const REJECT_REASONS: [&str; 3] = ["stale", "unconfirmed", "partial"];
/// The two redirects Redis Cluster sends.
const REDIRECT_KINDS: [&str; 2] = ["moved", "ask"];

/// Refreshes by result, checks by probe and result, rejected maps by reason, redirects by kind
/// and node.
#[derive(Default)]
pub(crate) struct TopologyMetrics {
    /// Counted by the router when it follows a redirect; per target node, made at 0 for every
    /// primary of an adopted map.
    redirects: Family<RedirectLabel, Counter>,
    /// Counted by the refresher, once per refresh.
    refreshes: Family<ResultLabel, Counter>,
    /// Counted by the refresher's change checks, per probe.
    checks: Family<CheckLabel, Counter>,
    /// Counted when a read map is not adopted.
    rejected: Family<ReasonLabel, Counter>,
}

impl MetricGroup for TopologyMetrics {
    /// Registers the families with every known label value at 0 (the redirects' nodes are
    /// known once a map is adopted: [`TopologyMetrics::redirect_targets`]).
    fn register(&self, r: &mut Registry) {
        for result in REFRESH_RESULTS {
            self.refreshes.get_or_create_owned(&ResultLabel { result });
        }
        for (probe, result) in CHECK_PROBES
            .iter()
            .flat_map(|p| CHECK_RESULTS.iter().map(move |r| (*p, *r)))
        {
            self.checks
                .get_or_create_owned(&CheckLabel { probe, result });
        }
        for reason in REJECT_REASONS {
            self.rejected.get_or_create_owned(&ReasonLabel { reason });
        }
        r.register(
            "redirects",
            "MOVED and ASK replies followed",
            self.redirects.clone(),
        );
        r.register(
            "topology_refreshes",
            "Slot map refreshes, by result",
            self.refreshes.clone(),
        );
        r.register(
            "topology_checks",
            "Checks whether the slot map changed, by probe (digest, info) and result \
             (unchanged, changed, failed); changed and failed ones are followed by a refresh",
            self.checks.clone(),
        );
        r.register(
            "topology_rejected",
            "Slot maps read but not adopted, by reason (stale, unconfirmed, partial)",
            self.rejected.clone(),
        );
    }

    /// Feeds the refresh counts to the status page and `INFO`'s `topology_refreshes_*` fields.
    fn add_totals(&self, totals: &mut Totals) {
        (totals.refreshes_ok, totals.refreshes_failed) = self.refreshes();
    }
}

impl TopologyMetrics {
    /// A followed redirect: `moved` or `ask`, to `node`. Rare, so the label allocation is fine.
    pub(crate) fn redirect(&self, kind: &'static str, node: &str) {
        let label = RedirectLabel {
            kind,
            node: node.to_string(),
        };
        self.redirects.get_or_create(&label).inc();
    }

    /// The nodes of an adopted map, `gone` those of the map before it: each node's redirect
    /// series (both kinds) start at 0, and the zero ones of a node that left the map go, so
    /// nodes that come and go do not pile up series. A node's series that counted redirects
    /// stay, as they always did.
    pub(crate) fn redirect_targets<'a>(
        &self,
        nodes: impl IntoIterator<Item = &'a str>,
        gone: impl IntoIterator<Item = &'a str>,
    ) {
        for node in gone {
            for kind in REDIRECT_KINDS {
                let label = RedirectLabel {
                    kind,
                    node: node.to_string(),
                };
                if self.redirects.get(&label).is_some_and(|c| c.get() == 0) {
                    self.redirects.remove(&label);
                }
            }
        }
        for node in nodes {
            for kind in REDIRECT_KINDS {
                let label = RedirectLabel {
                    kind,
                    node: node.to_string(),
                };
                self.redirects.get_or_create_owned(&label);
            }
        }
    }

    /// A topology refresh that succeeded or failed.
    ///
    /// Counted once per refresh attempt, whatever triggered it (the timer, a redirect, a failed
    /// check).
    pub(crate) fn refresh(&self, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.refreshes.get_or_create(&ResultLabel { result }).inc();
    }

    /// A check of the map: `probe` `digest` or `info`, `result` `unchanged`, `changed` or
    /// `failed`.
    pub(crate) fn check(&self, probe: &'static str, result: &'static str) {
        self.checks
            .get_or_create(&CheckLabel { probe, result })
            .inc();
    }

    /// A slot map read but not adopted: `stale` (an owner with a lower config epoch),
    /// `unconfirmed` (a surprising change no second node agreed with) or `partial` (unowned
    /// slots while the current map is complete).
    pub(crate) fn rejected(&self, reason: &'static str) {
        self.rejected.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Refreshes that succeeded and that failed so far, without creating series.
    fn refreshes(&self) -> (u64, u64) {
        let count = |result| {
            self.refreshes
                .get(&ResultLabel { result })
                .map_or(0, |c| c.get())
        };
        (count("ok"), count("failed"))
    }
}
