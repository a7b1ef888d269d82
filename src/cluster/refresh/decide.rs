//! Deciding what to make of the maps the nodes answered: adopt one, keep a partial one in
//! reserve, reject a stale or unconfirmed one (the rules are in `safety`), and publish the one
//! adopted.
//!
//! What holds: a complete map always wins over a partial one, and a partial map is adopted only
//! while the current map is partial too (or there is none), so a node that lost sight of half the
//! cluster cannot shrink a healthy map. A map that moves slots in a way redcar did not expect (a
//! `Surprise`) is adopted only once a second node's map agrees; one that is behind the config
//! epochs seen before is dropped outright. Every map not adopted is counted by reason (`stale`,
//! `partial`, `unconfirmed`) and pushed to the event log, so the status page shows why the proxy
//! kept its old view.

use std::collections::HashSet;
use std::sync::Arc;

use super::ask::{Asks, Missed};
use super::fetch::FetchError;
use super::Refresher;
use crate::cluster::change::{describe_change, describe_first};
use crate::cluster::safety::{second_opinion, stale_slot, surprise, KnownEpochs, Surprise};
use crate::cluster::{Topology, TopologyMetrics};
use crate::metrics::EventKind;

impl Refresher {
    /// Takes the answers as they arrive until one settles the refresh: true when a complete map
    /// was adopted. `answered` collects the nodes that gave a map, in order.
    ///
    /// The answers are taken in the order they arrive, and every answer that does not settle the
    /// refresh calls `asks.hurry()` so the next node is asked at once instead of after the stagger.
    /// Returns false when the asks ran out without a complete map being adopted; a kept partial map
    /// is still published then, if the current one is not complete.
    pub(super) async fn decide(
        &self,
        current: Option<&Topology>,
        known: &KnownEpochs,
        asks: &mut Asks<'_>,
        answered: &mut Vec<String>,
    ) -> bool {
        let mut partial = None;
        let mut surprising: Option<(Topology, Surprise)> = None;
        while let Some((addr, map)) = asks.next().await {
            let Ok(map) = map else {
                asks.hurry();
                continue;
            };
            answered.push(addr);
            if let Some((candidate, why)) = surprising.take() {
                match second_opinion(known, &candidate, &map) {
                    Some(true) => {
                        tracing::info!(node = candidate.source(), confirmed_by = map.source(), %why, "surprising slot map confirmed");
                        self.publish(current, candidate);
                        return true;
                    }
                    Some(false) => {
                        tracing::warn!(node = candidate.source(), other = map.source(), %why, "surprising slot map not confirmed by another node; keeping the current map");
                        let detail = format!("{why}; {} disagrees", map.source());
                        self.reject("unconfirmed", candidate.source(), detail);
                        return false;
                    }
                    None => {
                        // Behind what redcar knows, or without epochs: it can vouch for nothing.
                        tracing::info!(node = candidate.source(), other = map.source(), %why, "the node asked to confirm a surprising slot map cannot (stale, or no epochs); asking another");
                        surprising = Some((candidate, why));
                        asks.hurry();
                        continue;
                    }
                }
            }
            if !map.is_complete() {
                self.keep_partial(current, known, map, &mut partial);
                asks.hurry();
                continue;
            }
            let Some(current) = current else {
                // The first map has nothing to be compared with.
                self.publish(None, map);
                return true;
            };
            if self.is_stale(known, &map) {
                asks.hurry();
                continue;
            }
            match surprise(current, &map) {
                None => {
                    self.publish(Some(current), map);
                    return true;
                }
                Some(why) => {
                    surprising = Some((map, why));
                    asks.hurry();
                }
            }
        }
        if let Some((candidate, why)) = surprising {
            tracing::warn!(node = candidate.source(), %why, "surprising slot map, and no other node answered to confirm it; keeping the current map");
            let detail = format!("{why}; no other node answered");
            self.reject("unconfirmed", candidate.source(), detail);
            return false;
        }
        // A partial map is better than none, but never replaces a complete one.
        if let Some(map) = partial {
            self.publish(current, map);
        }
        false
    }

    /// Remembers the first acceptable partial map, to adopt if no complete one turns up.
    fn keep_partial(
        &self,
        current: Option<&Topology>,
        known: &KnownEpochs,
        map: Topology,
        kept: &mut Option<Topology>,
    ) {
        let source = map.source().to_string();
        tracing::warn!(node = %source, owned = map.owned_slots(), "partial slot map");
        if current.is_some_and(Topology::is_complete) {
            self.reject(
                "partial",
                &source,
                format!("owns {} of 16384 slots", map.owned_slots()),
            );
            return;
        }
        if self.is_stale(known, &map) {
            return;
        }
        kept.get_or_insert(map);
    }

    /// Applies the epoch rule against what earlier maps said, logging and counting a rejection.
    fn is_stale(&self, known: &KnownEpochs, candidate: &Topology) -> bool {
        let Some(stale) = stale_slot(known, candidate, candidate.source()) else {
            return false;
        };
        let epoch = stale
            .epoch
            .map_or_else(|| "unknown".to_string(), |e| e.to_string());
        tracing::warn!(
            node = candidate.source(),
            slot = stale.slot,
            owner = %stale.owner,
            %epoch,
            known_owner = %stale.current_owner,
            known_epoch = stale.current_epoch,
            "rejected a stale slot map: it gives a slot to an owner whose config epoch is lower than (or, without CLUSTER NODES, not known to be above) the known owner's"
        );
        self.reject(
            "stale",
            candidate.source(),
            format!(
                "slot {} owner {} has epoch {epoch} < known owner {}'s {}",
                stale.slot, stale.owner, stale.current_owner, stale.current_epoch
            ),
        );
        true
    }

    /// The node's map; a failure is logged (with its reason) and noted for the status page.
    pub(super) async fn fetch_logged(&self, addr: &str) -> Result<Topology, Missed> {
        self.fetch(addr)
            .await
            .map_err(|FetchError { reason, late }| {
                tracing::warn!(node = %addr, %reason, "topology refresh failed");
                self.state.note_refresh_error(format!("{addr}: {reason}"));
                if late {
                    Missed::Late
                } else {
                    Missed::Failed
                }
            })
    }

    /// Makes `topology` the map every worker routes by, and tidies what hangs off the old one.
    ///
    /// Logs and records what changed only when the slot summary differs, so a refresh that finds
    /// the same map logs nothing. Then, in this order: the redirect series follow the new
    /// primaries, each node learns whether it has anything to serve (standby otherwise), migrations
    /// in flight are told of the new map, the config epochs are remembered for the next staleness
    /// check, the map is adopted, and the upstream registry drops the nodes that are neither in the
    /// new map nor seeds. Adoption comes before the sweep so a node only the old map had is no
    /// longer referenced when it is forgotten.
    fn publish(&self, previous: Option<&Topology>, topology: Topology) {
        let summary = topology.summary();
        if previous.is_none_or(|p| p.summary() != summary) {
            let nodes: Vec<&str> = topology.addrs().map(|a| a.as_ref()).collect();
            let detail = match previous {
                None => describe_first(&topology, &nodes),
                Some(p) => {
                    let before: Vec<&str> = p.addrs().map(|a| a.as_ref()).collect();
                    describe_change(p, &before, &topology, &nodes)
                }
            };
            // What changed, in one readable line; the whole map (a line per range: ~19 KB for a
            // fragmented 16+16 cluster) only at debug, and always on /topology.
            tracing::info!(
                source = topology.source(),
                ranges = topology.ranges().len(),
                shards = topology.shards().len(),
                change = %detail,
                "adopted new slot map"
            );
            tracing::debug!(source = topology.source(), slots = %summary, "the adopted slot map");
            let events = &self.metrics.events;
            events.push(EventKind::TopologyAdopted, topology.source(), detail);
        }
        let config = self.state.config();
        let seeds = &config.seeds;
        let keep: HashSet<Arc<str>> = topology.addrs().cloned().collect();
        let kept = |addr: &str| keep.contains(addr);
        // Redirect series for the primaries only: a MOVED or ASK names a slot's owner or its
        // importing primary, never a replica (and a 1,000-node map's 500 replicas would carry
        // 1,000 zero series).
        let primaries: HashSet<&str> = primary_addrs(&topology).collect();
        let gone = previous
            .into_iter()
            .flat_map(primary_addrs)
            .filter(|a| !primaries.contains(a));
        self.metrics
            .group::<TopologyMetrics>()
            .redirect_targets(primaries.iter().copied(), gone);
        topology.assign_standby(self.upstreams.reads_replicas());
        if let Some(previous) = previous {
            self.state.migrating().note_new_map(previous, &topology);
        }
        self.state.remember_epochs(&topology);
        // Adopted first, so a node only the old map had is free and forgotten now.
        self.state.adopt(topology);
        // A set, not a walk of the old map per registered node: 1,000 × 1,000 comparisons.
        let before: HashSet<&str> = previous
            .into_iter()
            .flat_map(|p| p.addrs().map(|a| &**a))
            .collect();
        let in_previous = |addr: &str| before.contains(addr);
        self.upstreams.retain(
            |addr| kept(addr) || seeds.iter().any(|s| s == addr),
            |addr| usize::from(in_previous(addr)),
        );
    }

    /// Counts a map not adopted and records it in the event log.
    ///
    /// `reason` is the label of the `rejected` counter and must be one of a few fixed words (a
    /// free-form label would grow the series without bound); `detail` is free text for the event
    /// log only.
    fn reject(&self, reason: &'static str, source: &str, detail: String) {
        self.metrics.group::<TopologyMetrics>().rejected(reason);
        let detail = format!("{reason}: {detail}");
        self.metrics
            .events
            .push(EventKind::TopologyRejected, source, detail);
    }
}

/// The addresses of `topology`'s primaries.
fn primary_addrs(topology: &Topology) -> impl Iterator<Item = &str> {
    topology.shards().iter().map(|s| s.primary.addr().as_ref())
}
