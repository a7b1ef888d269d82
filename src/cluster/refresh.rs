//! Keeps the slot map fresh: asks a known node for `CLUSTER SLOTS` and `CLUSTER NODES`
//! periodically and on request, and swaps in the new snapshot atomically — unless it is older
//! than the current one, or a surprising change no second node confirms (see `safety`).

use std::sync::Arc;

use bytes::Bytes;
use rand::seq::SliceRandom;
use tokio::sync::watch;
use tokio::time::Instant;

use super::change::{describe_change, describe_first};
use super::nodes::{check_join, parse_cluster_nodes_reply, NodeStates};
use super::parse::{parse_cluster_slots, SlotRange};
use super::safety::{same_assignment, stale_slot, surprise, Surprise};
use super::{ClusterState, Topology};
use crate::metrics::{EventKind, Metrics};
use crate::protocol::{reply_frame_len, Frame, Limits};
use crate::upstream::Lane;
use crate::upstream::Upstreams;

/// `CLUSTER SLOTS` and `CLUSTER NODES`, pipelined in one write so both describe the same moment
/// of the same node's view.
const CLUSTER_SLOTS_AND_NODES: &[u8] =
    b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n*2\r\n$7\r\nCLUSTER\r\n$5\r\nNODES\r\n";

/// The refresh task.
pub struct Refresher {
    pub state: Arc<ClusterState>,
    pub upstreams: Arc<Upstreams>,
    pub limits: Limits,
    pub metrics: Arc<Metrics>,
}

/// What to do with a complete candidate map.
enum Verdict {
    Adopt,
    /// Older than the current map: try the next node.
    Stale,
    /// Adopt only if another node agrees.
    Confirm(Surprise),
}

impl Refresher {
    /// Refreshes now, then every `refresh_interval` or on request, until `shutdown` fires.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            let started = Instant::now();
            self.refresh_once().await;
            // Read each round, so reloaded intervals apply from the next one.
            let config = self.state.config();
            let next = started + config.refresh_min_gap;
            tokio::select! {
                _ = tokio::time::sleep(config.refresh_interval) => {}
                _ = self.state.refresh_wanted() => {}
                _ = shutdown.changed() => return,
            }
            tokio::time::sleep_until(next).await;
        }
    }

    /// Asks known nodes (in random order), then the seeds, until one gives a usable map.
    pub async fn refresh_once(&self) -> bool {
        self.state.refresh_started();
        let complete = self.try_refresh().await;
        self.metrics.refresh(complete);
        complete
    }

    async fn try_refresh(&self) -> bool {
        let current = self.state.topology();
        let current = current.as_deref();
        let candidates = self.candidates(current);
        let mut partial = None;
        for (i, addr) in candidates.iter().enumerate() {
            let Some(map) = self.fetch_logged(addr).await else {
                continue;
            };
            if !map.is_complete() {
                self.keep_partial(current, map, &mut partial);
                continue;
            }
            let Some(current) = current else {
                // The first map has nothing to be compared with.
                self.publish(None, map);
                return true;
            };
            match self.verdict(current, &map) {
                Verdict::Adopt => {
                    self.publish(Some(current), map);
                    return true;
                }
                Verdict::Stale => continue,
                Verdict::Confirm(why) => {
                    return self.confirm(current, map, why, &candidates[i + 1..]).await;
                }
            }
        }
        // A partial map is better than none, but never replaces a complete one.
        if let Some(map) = partial {
            self.publish(current, map);
        }
        false
    }

    /// The current map's nodes in random order (spreading the load), then the seeds. When no
    /// read policy reads replicas, the primaries come first (in random order): their pooled
    /// connections are open anyway, and a replica is asked only if none answers, so no
    /// connection is opened to a node on standby just to refresh.
    fn candidates(&self, current: Option<&Topology>) -> Vec<String> {
        let all = self.upstreams.reads_replicas();
        let (mut candidates, mut replicas): (Vec<String>, Vec<String>) = match current {
            Some(t) if !all => (
                t.shards()
                    .iter()
                    .map(|s| s.primary.addr().to_string())
                    .collect(),
                t.shards()
                    .iter()
                    .flat_map(|s| s.replicas.iter().map(|r| r.addr().to_string()))
                    .collect(),
            ),
            Some(t) => (t.addrs().map(|a| a.to_string()).collect(), Vec::new()),
            None => Default::default(),
        };
        candidates.shuffle(&mut rand::rng());
        replicas.shuffle(&mut rand::rng());
        candidates.append(&mut replicas);
        for seed in &self.state.config().seeds {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        candidates
    }

    /// Remembers the first acceptable partial map, to adopt if no complete one turns up.
    fn keep_partial(&self, current: Option<&Topology>, map: Topology, kept: &mut Option<Topology>) {
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
        if current.is_some_and(|c| self.is_stale(c, &map)) {
            return;
        }
        kept.get_or_insert(map);
    }

    fn verdict(&self, current: &Topology, candidate: &Topology) -> Verdict {
        if self.is_stale(current, candidate) {
            return Verdict::Stale;
        }
        match surprise(current, candidate) {
            Some(why) => Verdict::Confirm(why),
            None => Verdict::Adopt,
        }
    }

    /// Applies the epoch rule, logging and counting a rejection.
    fn is_stale(&self, current: &Topology, candidate: &Topology) -> bool {
        let Some(stale) = stale_slot(current, candidate) else {
            return false;
        };
        tracing::warn!(
            node = candidate.source(),
            slot = stale.slot,
            owner = %stale.owner,
            epoch = stale.epoch,
            current_owner = %stale.current_owner,
            current_epoch = stale.current_epoch,
            "rejected a stale slot map: the current owner has a higher config epoch"
        );
        self.reject(
            "stale",
            candidate.source(),
            format!(
                "slot {} owner {} has epoch {} < current owner {}'s {}",
                stale.slot, stale.owner, stale.epoch, stale.current_owner, stale.current_epoch
            ),
        );
        true
    }

    /// Adopts `candidate` only if the first of `others` that answers (not its own source) gives
    /// the same slot → primary assignment; otherwise keeps the current map.
    async fn confirm(
        &self,
        current: &Topology,
        candidate: Topology,
        why: Surprise,
        others: &[String],
    ) -> bool {
        let others = others.iter().filter(|a| a.as_str() != candidate.source());
        for addr in others {
            let Some(second) = self.fetch_logged(addr).await else {
                continue;
            };
            if same_assignment(&candidate, &second) {
                tracing::info!(node = candidate.source(), confirmed_by = %addr, %why, "surprising slot map confirmed");
                self.publish(Some(current), candidate);
                return true;
            }
            tracing::warn!(node = candidate.source(), other = %addr, %why, "surprising slot map not confirmed by another node; keeping the current map");
            self.reject(
                "unconfirmed",
                candidate.source(),
                format!("{why}; {addr} disagrees"),
            );
            return false;
        }
        tracing::warn!(node = candidate.source(), %why, "surprising slot map, and no other node answered to confirm it; keeping the current map");
        self.reject(
            "unconfirmed",
            candidate.source(),
            format!("{why}; no other node answered"),
        );
        false
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
        self.metrics.topology_rejected(reason);
        let detail = format!("{reason}: {detail}");
        self.metrics
            .events
            .push(EventKind::TopologyRejected, source, detail);
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
mod tests {
    use super::*;

    #[test]
    fn the_two_replies_are_cut_apart() {
        let limits = Limits::default();
        let reply = Bytes::from_static(
            b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n$5\r\nnodes\r\n",
        );
        let (slots, nodes) = split_replies(reply, &limits).expect("two frames");
        assert_eq!(slots.as_array().map(<[Frame]>::len), Some(1));
        assert_eq!(nodes.as_bytes().map(|b| b.as_ref()), Some(&b"nodes"[..]));
        let one = Bytes::from_static(b"*0\r\n");
        assert!(split_replies(one, &limits).is_err(), "NODES reply missing");
    }
}
