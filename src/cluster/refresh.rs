//! Keeps the slot map fresh: asks known nodes for `CLUSTER SLOTS` and `CLUSTER NODES`
//! periodically and on request — another node as soon as one is slow to answer (`ask`) — and
//! swaps in the new snapshot atomically, unless it is older than what is known (config epochs)
//! or a surprising change no second node confirms (see `safety`).

mod ask;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rand::seq::SliceRandom;
use tokio::sync::watch as signal;
use tokio::time::Instant;

use self::ask::Asks;
use self::watch::Watch;
use super::change::{describe_change, describe_first};
use super::nodes::{check_join, parse_cluster_nodes_reply, NodeStates};
use super::parse::{parse_cluster_slots, SlotRange};
use super::safety::{second_opinion, stale_slot, surprise, KnownEpochs, Surprise};
use super::TopologyMetrics;
use super::{ClusterState, Topology};
use crate::metrics::{EventKind, Metrics};
use crate::protocol::{reply_frame_len, Frame, Limits};
use crate::upstream::Lane;
use crate::upstream::{Node, Upstreams};

/// `CLUSTER SLOTS` and `CLUSTER NODES`, pipelined in one write so both describe the same moment
/// of the same node's view.
const CLUSTER_SLOTS_AND_NODES: &[u8] =
    b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n*2\r\n$7\r\nCLUSTER\r\n$5\r\nNODES\r\n";

/// How long one refresh query may go unanswered before the next node is asked too (at most
/// `refresh_timeout`). A node answers both commands in well under a millisecond (about 30 µs of
/// its CPU for a 6-node cluster), so this fires only for a node that is frozen, overloaded or
/// unreachable, and costs one more query.
const ASK_NEXT_AFTER: Duration = Duration::from_millis(100);

/// The refresh task.
pub(crate) struct Refresher {
    pub(crate) state: Arc<ClusterState>,
    pub(crate) upstreams: Arc<Upstreams>,
    pub(crate) limits: Limits,
    pub(crate) metrics: Arc<Metrics>,
}

impl Refresher {
    /// Refreshes now, then every `refresh_interval` (more often while the map leaves out a
    /// replica the cluster knows: `watch`) or on request, until `shutdown` fires.
    pub(crate) async fn run(self, mut shutdown: signal::Receiver<bool>) {
        let mut watch = Watch::default();
        loop {
            let started = Instant::now();
            self.refresh_once().await;
            // Read each round, so reloaded intervals apply from the next one.
            let config = self.state.config();
            let next = started + config.refresh_min_gap;
            // Replicas matter sooner only where reads go to them.
            let current = self
                .state
                .topology()
                .filter(|_| self.upstreams.reads_replicas());
            let interval = watch.interval(current.as_deref(), config.refresh_interval, started);
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = self.state.refresh_wanted() => {}
                _ = shutdown.changed() => return,
            }
            tokio::time::sleep_until(next).await;
        }
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
        log_refresh(started, asks.asked(), &answered, adopted);
        adopted
    }

    /// Takes the answers as they arrive until one settles the refresh: true when a complete map
    /// was adopted. `answered` collects the nodes that gave a map, in order.
    async fn decide(
        &self,
        current: Option<&Topology>,
        known: &KnownEpochs,
        asks: &mut Asks<'_>,
        answered: &mut Vec<String>,
    ) -> bool {
        let mut partial = None;
        let mut surprising: Option<(Topology, Surprise)> = None;
        while let Some((addr, map)) = asks.next().await {
            let Some(map) = map else {
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

    /// The current map's nodes, then the seeds. Nodes that are not answering go last — ejected
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
        for seed in &self.state.config().seeds {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        candidates
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

    async fn fetch_logged(&self, addr: &str) -> Option<Topology> {
        self.fetch(addr)
            .await
            .inspect_err(|reason| {
                tracing::warn!(node = %addr, %reason, "topology refresh failed");
                self.state.note_refresh_error(format!("{addr}: {reason}"));
            })
            .ok()
    }

    async fn fetch(&self, addr: &str) -> Result<Topology, String> {
        let node = self.upstreams.node(addr);
        let call = node.send_frames(
            Bytes::from_static(CLUSTER_SLOTS_AND_NODES),
            false,
            Lane::default(),
            2,
        );
        let timeout = self.state.config().refresh_timeout;
        let reply = match tokio::time::timeout(timeout, call).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no reply within {timeout:?}")),
        };
        let (slots, nodes) = split_replies(reply, &self.limits)?;
        // The answering node's own migration markers, whatever becomes of its map.
        self.state.migrating().note_cluster_nodes(&nodes);
        let ranges = parse_cluster_slots(&slots, addr)?;
        let states = joined_states(&ranges, &nodes)
            .inspect_err(|reason| {
                tracing::warn!(node = %addr, %reason, "cannot read CLUSTER NODES: this map's config epochs are unknown, so the stale-map check is skipped for it")
            })
            .ok();
        Ok(Topology::build(
            &ranges,
            states.as_ref(),
            &self.upstreams,
            Arc::from(addr),
        ))
    }

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
        let keep: Vec<Arc<str>> = topology.addrs().cloned().collect();
        topology.assign_standby(self.upstreams.reads_replicas());
        if let Some(previous) = previous {
            self.state.migrating().note_new_map(previous, &topology);
        }
        self.state.remember_epochs(&topology);
        // Adopted first, so a node only the old map had is free and forgotten now.
        self.state.adopt(topology);
        let in_previous = |addr: &str| previous.is_some_and(|p| p.addrs().any(|a| &**a == addr));
        self.upstreams.retain(
            |addr| keep.iter().any(|k| k.as_ref() == addr) || seeds.iter().any(|s| s == addr),
            |addr| usize::from(in_previous(addr)),
        );
    }

    /// Counts a map not adopted and records it in the event log.
    fn reject(&self, reason: &'static str, source: &str, detail: String) {
        self.metrics.group::<TopologyMetrics>().rejected(reason);
        let detail = format!("{reason}: {detail}");
        self.metrics
            .events
            .push(EventKind::TopologyRejected, source, detail);
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
/// or unreachable node shows up here by name, with what it cost.
fn log_refresh(started: Instant, asked: &[String], answered: &[String], adopted: bool) {
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
        tracing::info!(elapsed_ms, asked = asked.len(), answered = %answered.join(", "), passed_over = %passed.join(", "), adopted, "topology refresh went past nodes that did not answer in time");
    }
}

/// Cuts the two pipelined replies apart (one contiguous slice from the node connection).
fn split_replies(reply: Bytes, limits: &Limits) -> Result<(Frame, Frame), String> {
    let first = reply_frame_len(&reply, limits)
        .map_err(|e| e.to_string())?
        .ok_or("CLUSTER SLOTS reply is incomplete")?;
    let slots = Frame::from_bytes(reply.slice(..first), limits).map_err(|e| e.to_string())?;
    let nodes = Frame::from_bytes(reply.slice(first..), limits)
        .map_err(|e| format!("CLUSTER NODES reply: {e}"))?;
    Ok((slots, nodes))
}

/// `CLUSTER NODES` parsed and checked to cover every node `CLUSTER SLOTS` named.
fn joined_states(ranges: &[SlotRange], nodes: &Frame) -> Result<NodeStates, String> {
    let states = parse_cluster_nodes_reply(nodes)?;
    check_join(ranges, &states)?;
    Ok(states)
}

#[cfg(test)]
mod tests;
