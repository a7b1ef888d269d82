//! Keeps the slot map fresh. Every `refresh_interval` it asks the node the current map came from
//! for a fingerprint of its view (`change_check`: one small command) and fetches the map whole
//! only when that changed; a MOVED reply fetches it at once, a failing node asks for a
//! `CLUSTER INFO` check (`pace`: both after a random wait up to `refresh_jitter` when they start
//! a burst). A fetch asks known nodes — another one as soon as one is slow to answer (`ask`) —
//! for `CLUSTER SHARDS` (or `CLUSTER SLOTS`), `CLUSTER NODES` and `CLUSTER INFO` (`fetch`), and
//! swaps in the new snapshot atomically, unless it is older than what is known (config epochs)
//! or a surprising change no second node confirms (`decide`, `safety`).

mod ask;
mod decide;
mod dialect;
mod fetch;
mod pace;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use rand::seq::SliceRandom;
use tokio::sync::watch as signal;
use tokio::time::Instant;

use self::ask::Asks;
use self::dialect::{Checked, Dialect};
use self::pace::{Due, Pace, Ticks};
use super::TopologyMetrics;
use super::{ClusterState, Topology};
use crate::metrics::Metrics;
use crate::protocol::Limits;
use crate::upstream::{Node, Upstreams};

/// How long one refresh query may go unanswered before the next node is asked too (at most
/// `refresh_timeout`). A node answers in well under a millisecond (about 30 µs of its CPU for a
/// 6-node cluster), so this fires only for a node that is frozen, overloaded or unreachable, and
/// costs one more query.
const ASK_NEXT_AFTER: Duration = Duration::from_millis(100);

/// The refresh task.
pub(crate) struct Refresher {
    /// The backend's state: where maps are adopted and refresh requests come from.
    state: Arc<ClusterState>,
    /// Every node by address: the fetches use the nodes' ordinary connections.
    upstreams: Arc<Upstreams>,
    /// Parse limits for the nodes' topology replies.
    limits: Limits,
    /// Where refreshes, checks, rejections and events are counted.
    metrics: Arc<Metrics>,
    /// What the cluster's nodes turned out not to answer (`CLUSTER SHARDS`, the digest script).
    dialect: Dialect,
}

impl Refresher {
    /// The refresher of `state`'s map, asking through `upstreams`' node connections.
    pub(crate) fn new(
        state: Arc<ClusterState>,
        upstreams: Arc<Upstreams>,
        limits: Limits,
        metrics: Arc<Metrics>,
    ) -> Refresher {
        Refresher {
            state,
            upstreams,
            limits,
            metrics,
            dialect: Dialect::default(),
        }
    }

    /// Fetches the map now, then checks it every `refresh_interval` (more often while a
    /// primary is ejected or a replica the cluster knows is left out: `pace::Ticks`) or on
    /// request, until `shutdown` fires.
    pub(crate) async fn run(self, mut shutdown: signal::Receiver<bool>) {
        let mut ticks = Ticks::new(Instant::now());
        let mut pace = Pace::default();
        let mut due = Due::Full;
        loop {
            let started = Instant::now();
            if self.round(due).await {
                ticks.fetched(started);
            }
            // Read each round, so reloaded intervals apply from the next one.
            let config = self.state.config();
            let current = self.state.topology();
            let replicas = self.upstreams.reads_replicas();
            let (interval, tick) = ticks.next(&config, current.as_deref(), replicas, started);
            let want = tokio::select! {
                _ = tokio::time::sleep(interval) => None,
                want = self.state.refresh_wanted() => Some(want),
                _ = shutdown.changed() => return,
            };
            let current = self.state.topology();
            let now = Instant::now();
            tokio::time::sleep_until(pace.next_at(started, want, &config, current.as_deref(), now))
                .await;
            // Requests that came while waiting are answered by this round too.
            due = match want.max(self.state.take_wanted()) {
                Some(want) => pace::for_event(want, self.state.topology().as_deref()),
                None => tick,
            };
        }
    }

    /// One round: a check first when `due` says so, the map fetched whole if the check finds it
    /// changed or cannot tell. True when the map was fetched.
    async fn round(&self, due: Due) -> bool {
        let current = self.state.topology().filter(|map| self.can_check(map));
        if let (Due::Check(probe), Some(current)) = (due, current) {
            let probe = self.dialect.probe(probe);
            let checked = self.check(&current, probe).await;
            let metrics = self.metrics.group::<TopologyMetrics>();
            match checked {
                Checked::Unchanged => {
                    metrics.check(probe.name(), "unchanged");
                    // What was counted so far is answered: the map is the cluster's.
                    self.state.refresh_started();
                    return false;
                }
                Checked::Changed => metrics.check(probe.name(), "changed"),
                Checked::Failed(reason) => {
                    metrics.check(probe.name(), "failed");
                    tracing::debug!(node = current.source(), %reason, probe = probe.name(), "topology check failed; fetching the map");
                }
            }
        }
        self.refresh_once().await;
        true
    }

    /// Whether the node `map` came from can be asked for a check (a fingerprint is one node's
    /// view, so no other node can answer it): only while it serves — a primary of the map, or a
    /// replica where reads go to replicas, so no connection is opened to a node on standby just
    /// to check — and is not failing. Otherwise the map is fetched (primaries and healthy nodes
    /// first), and the next checks go to the node that answered.
    fn can_check(&self, map: &Topology) -> bool {
        let source = map.source();
        let replicas = self.upstreams.reads_replicas();
        map.shards()
            .iter()
            .flat_map(|s| {
                let replicas = s.replicas.iter().filter(move |_| replicas);
                std::iter::once(&s.primary).chain(replicas)
            })
            .find(|node| node.addr().as_ref() == source)
            .is_some_and(|node| trouble(node) == 0)
    }

    /// Asks known nodes (healthy ones first, in random order), then the seeds, until an answer
    /// settles it.
    async fn refresh_once(&self) -> bool {
        self.state.refresh_started();
        let complete = self.try_refresh().await;
        self.metrics.group::<TopologyMetrics>().refresh(complete);
        complete
    }

    async fn try_refresh(&self) -> bool {
        let started = Instant::now();
        let current = self.state.topology();
        let current = current.as_deref();
        let known = self.state.known_epochs();
        let stagger = ASK_NEXT_AFTER.min(self.state.config().refresh_timeout);
        let mut asks = Asks::new(self.candidates(current), stagger, |addr| async move {
            let map = self.fetch_logged(&addr).await;
            (addr, map)
        });
        let mut answered = Vec::new();
        let adopted = self.decide(current, &known, &mut asks, &mut answered).await;
        log_refresh(started, asks.asked(), asks.failed(), &answered, adopted);
        adopted
    }

    /// The current map's nodes, then the seeds (shuffled). Nodes that are not answering go last — ejected
    /// ones at the very end, nodes with a failure streak before them — so a refresh (often
    /// triggered by that very node's trouble) does not start by waiting on one. Otherwise the
    /// order is random, spreading the load; when no read policy reads replicas the primaries
    /// come first: their pooled connections are open anyway, and a replica is asked only if no
    /// primary answers, so no connection is opened to a node on standby just to refresh.
    fn candidates(&self, current: Option<&Topology>) -> Vec<String> {
        let all = self.upstreams.reads_replicas();
        let mut nodes: Vec<(u8, &Arc<Node>)> = Vec::new();
        if let Some(t) = current {
            nodes.extend(t.shards().iter().map(|s| (0, &s.primary)));
            let replicas = t.shards().iter().flat_map(|s| s.replicas.iter());
            nodes.extend(replicas.map(|r| (u8::from(!all), r)));
        }
        nodes.shuffle(&mut rand::rng());
        // Stable: the random order stays within each rank.
        nodes.sort_by_key(|&(group, node)| (trouble(node), group));
        let mut candidates: Vec<String> = nodes.iter().map(|(_, n)| n.addr().to_string()).collect();
        // In random order too: the node that answers the first fetch is the one the periodic
        // checks go to, and a fleet started with the same seeds must not all check the first.
        let mut seeds = self.state.config().seeds.clone();
        seeds.shuffle(&mut rand::rng());
        for seed in seeds {
            if !candidates.contains(&seed) {
                candidates.push(seed);
            }
        }
        candidates
    }
}

/// How far `node` is from answering: 0 healthy, 1 failing lately, 2 ejected.
fn trouble(node: &Node) -> u8 {
    if node.is_ejected() {
        2
    } else {
        u8::from(node.health().snapshot().consecutive_failures > 0)
    }
}

/// One line per refresh: at debug when the first node asked answered, at info when the refresh
/// went past nodes that did not answer (failed, or slower than [`ASK_NEXT_AFTER`]) — a frozen
/// or unreachable node shows up here by name, with what it cost. The message says which: a node
/// that refused the connection (its reason is on the `topology refresh failed` line before) is
/// not one that "did not answer in time".
fn log_refresh(
    started: Instant,
    asked: &[String],
    failed: &[String],
    answered: &[String],
    adopted: bool,
) {
    let elapsed_ms = started.elapsed().as_millis() as u64;
    // Nodes asked before the last one that answered and not answered themselves; when none
    // answered, every node asked.
    let last = answered
        .last()
        .and_then(|a| asked.iter().position(|x| x == a))
        .unwrap_or(asked.len());
    let passed: Vec<&str> = asked[..last]
        .iter()
        .filter(|a| !answered.contains(a))
        .map(String::as_str)
        .collect();
    if passed.is_empty() {
        tracing::debug!(elapsed_ms, asked = asked.len(), answered = %answered.join(", "), adopted, "topology refresh done");
    } else {
        let went_past = went_past(&passed, failed);
        tracing::info!(elapsed_ms, asked = asked.len(), answered = %answered.join(", "), passed_over = %passed.join(", "), adopted, "{went_past}");
    }
}

/// The summary line's message for a refresh that went past the nodes `passed`: whether they
/// failed (refused the connection, closed it, answered an error: the nodes in `failed`), were
/// slow, or some of each.
fn went_past(passed: &[&str], failed: &[String]) -> &'static str {
    let is_failed = |p: &&str| failed.iter().any(|f| f == p);
    if passed.iter().all(is_failed) {
        "topology refresh went past nodes that failed (refused, closed or answered an error)"
    } else if passed.iter().any(is_failed) {
        "topology refresh went past nodes that failed or did not answer in time"
    } else {
        "topology refresh went past nodes that did not answer in time"
    }
}

#[cfg(test)]
mod tests;
