//! An immutable snapshot of the cluster: which shard owns each of the 16384 slots.
//!
//! Who reads it: every keyed command looks up its slot's shard here (one array index, then the
//! shard's node handles), through a lock-free snapshot of the current map, so the command path
//! never locks or allocates for routing. What holds: a map is never changed after it is built; a
//! refresh builds a new one and swaps it in whole, so a command routes by one consistent map from
//! start to end even while a new one is being adopted. The shards hold `Arc<Node>` handles straight
//! from the upstream registry, so a node that stays across maps keeps its connections.

use std::sync::Arc;

use super::change_check::Print;
use super::nodes::NodeStates;
use super::parse::{SlotNode, SlotRange};
use super::SLOT_COUNT;
use crate::upstream::{Node, Upstreams};

/// Marks a slot no shard owns (yet).
const UNOWNED: u16 = u16::MAX;

/// A primary and its replicas, as handles to their shared connections.
#[derive(Debug)]
pub(crate) struct Shard {
    /// The slot owner: every write of the shard's slots goes here.
    pub(crate) primary: Arc<Node>,
    /// Replicas the cluster does not consider failed (`fail`, `handshake`, `noaddr`).
    pub(crate) replicas: Vec<Arc<Node>>,
    /// The primary's config epoch (`CLUSTER NODES`); 0 when the map's epochs are unknown.
    pub(crate) epoch: u64,
}

/// The slot map. Built whole, never mutated: a refresh swaps in a new one.
pub(crate) struct Topology {
    /// Slot → index into `shards`, or `UNOWNED`.
    slots: Box<[u16]>,
    /// One shard per distinct primary, in the order the ranges named them.
    shards: Vec<Shard>,
    /// How many slots have an owner: 16384 for a complete map.
    owned: usize,
    /// The node whose `CLUSTER SLOTS` reply this map came from.
    source: Arc<str>,
    /// False when `CLUSTER NODES` could not be read: every epoch is 0 and means nothing.
    has_epochs: bool,
    /// Ids of nodes the answering node knows (`CLUSTER NODES`) that this map serves no reads
    /// from: replicas failed, or restarted and not yet synced (`CLUSTER SLOTS` lists a replica
    /// only once its replication offset is non-zero), and members that own no slot, as a new
    /// replica looks until its role has reached this node. Sorted. The refresher watches such a
    /// map closely.
    left_out: Vec<String>,
    /// The fingerprint of the answering node's view when the map was read, for the checks that
    /// ask whether it changed (`change_check`); empty for maps not read from a cluster.
    print: Print,
}

impl Topology {
    /// Builds the map from parsed ranges, grouping ranges with the same primary into one shard.
    /// `states` (from `CLUSTER NODES`, already joined by id) gives epochs and drops failed
    /// replicas; without it every epoch is 0 and the map says it has none.
    pub(crate) fn build(
        ranges: &[SlotRange],
        states: Option<&NodeStates>,
        upstreams: &Upstreams,
        source: Arc<str>,
    ) -> Topology {
        // The nodes [`shard`] takes, made at once.
        upstreams.make_nodes(ranges.iter().flat_map(|r| {
            let usable = |n: &&SlotNode| usable(n, states);
            let replicas = r.replicas.iter().filter(usable);
            r.primary.iter().chain(replicas).map(|n| n.addr.as_str())
        }));
        let mut slots = vec![UNOWNED; SLOT_COUNT].into_boxed_slice();
        let mut shards: Vec<Shard> = Vec::new();
        let mut owned = 0;
        for range in ranges {
            let Some(primary) = &range.primary else {
                continue;
            };
            let index = match shards
                .iter()
                .position(|s| s.primary.addr().as_ref() == primary.addr)
            {
                Some(index) => index,
                None => {
                    shards.push(shard(primary, &range.replicas, states, upstreams));
                    shards.len() - 1
                }
            };
            for slot in &mut slots[usize::from(range.start)..=usize::from(range.end)] {
                if *slot == UNOWNED {
                    owned += 1;
                }
                *slot = index as u16;
            }
        }
        let left_out = states.map_or_else(Vec::new, |states| left_out(ranges, states));
        Topology {
            slots,
            shards,
            owned,
            source,
            has_epochs: states.is_some(),
            left_out,
            print: Print::default(),
        }
    }

    /// The map with the fingerprint of the view it was read from.
    pub(crate) fn with_print(self, print: Print) -> Topology {
        Topology { print, ..self }
    }

    /// The fingerprint of the view the map was read from.
    pub(crate) fn print(&self) -> &Print {
        &self.print
    }

    /// A map in which one primary (with these replicas) owns all 16384 slots: how a
    /// non-cluster backend (a standalone node, a Sentinel-managed primary) looks to the router,
    /// so pipelining, read policies, retries and health work for it unchanged.
    pub(crate) fn single_shard(
        primary: &str,
        replicas: &[String],
        upstreams: &Upstreams,
        source: Arc<str>,
    ) -> Topology {
        let shard = Shard {
            primary: upstreams.node(primary),
            replicas: replicas.iter().map(|r| upstreams.node(r)).collect(),
            epoch: 0,
        };
        Topology {
            slots: vec![0; SLOT_COUNT].into_boxed_slice(),
            shards: vec![shard],
            owned: SLOT_COUNT,
            source,
            has_epochs: false,
            left_out: Vec::new(),
            print: Print::default(),
        }
    }

    /// Tells each node of the map, once it is adopted, whether it has anything to serve:
    /// primaries do, replicas only when `reads_replicas`. A node with nothing to serve (a
    /// replica under `read_policy: primary`, a primary demoted by a failover) is put on standby:
    /// its pooled connections close within a second of their last command. Each node's health
    /// learns its role too (a primary's ejections do not grow: `Health::set_primary`), and each
    /// replica its primary (checked at once while that primary is down: `Health::due_for_check`).
    pub(crate) fn assign_standby(&self, reads_replicas: bool) {
        for shard in &self.shards {
            shard.primary.set_standby(false);
            shard.primary.health().set_primary(true);
            shard.primary.health().set_shard_primary(None);
            for replica in &shard.replicas {
                replica.set_standby(!reads_replicas);
                replica.health().set_primary(false);
                replica
                    .health()
                    .set_shard_primary(Some(shard.primary.addr()));
            }
        }
    }

    /// True when the shards' epochs were read from `CLUSTER NODES`.
    pub(crate) fn has_epochs(&self) -> bool {
        self.has_epochs
    }

    /// Replicas (and slotless nodes) the cluster knows and this map leaves out (node ids,
    /// sorted).
    pub(crate) fn left_out(&self) -> &[String] {
        &self.left_out
    }

    /// The shard that owns `slot`, if any.
    pub(crate) fn shard(&self, slot: u16) -> Option<&Shard> {
        let index = *self.slots.get(usize::from(slot))?;
        self.shards.get(usize::from(index))
    }

    /// True when every slot has an owner.
    pub(crate) fn is_complete(&self) -> bool {
        self.owned == SLOT_COUNT
    }

    /// How many slots have an owner.
    pub(crate) fn owned_slots(&self) -> usize {
        self.owned
    }

    /// Every shard of the map (each primary once).
    pub(crate) fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// The node this snapshot was read from.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// Every node address in the map, primaries first.
    pub(crate) fn addrs(&self) -> impl Iterator<Item = &Arc<str>> {
        let primaries = self.shards.iter().map(|s| s.primary.addr());
        let replicas = self
            .shards
            .iter()
            .flat_map(|s| s.replicas.iter().map(|r| r.addr()));
        primaries.chain(replicas)
    }

    /// Contiguous slot ranges with the same owner, in slot order.
    pub(crate) fn ranges(&self) -> Vec<(u16, u16, Option<&Shard>)> {
        let mut ranges = Vec::new();
        let mut start = 0;
        while start < SLOT_COUNT {
            let owner = self.slots[start];
            let mut end = start;
            while end + 1 < SLOT_COUNT && self.slots[end + 1] == owner {
                end += 1;
            }
            ranges.push((
                start as u16,
                end as u16,
                self.shards.get(usize::from(owner)),
            ));
            start = end + 1;
        }
        ranges
    }

    /// A one-line description of who owns what (`start-end:primary+replica...`), to log when
    /// the map changes.
    pub(crate) fn summary(&self) -> String {
        let parts: Vec<String> = self
            .ranges()
            .into_iter()
            .map(|(start, end, shard)| {
                let Some(shard) = shard else {
                    return format!("{start}-{end}:unowned");
                };
                // Replicas too: a replica that joins or fails changes where reads may go.
                let mut who = shard.primary.addr().to_string();
                for replica in &shard.replicas {
                    who.push('+');
                    who.push_str(replica.addr());
                }
                format!("{start}-{end}:{who}")
            })
            .collect();
        parts.join(" ")
    }
}

/// One shard: its primary's epoch, and the replicas `CLUSTER NODES` does not flag as failed.
fn shard(
    primary: &SlotNode,
    replicas: &[SlotNode],
    states: Option<&NodeStates>,
    upstreams: &Upstreams,
) -> Shard {
    let state = |node: &SlotNode| {
        let id = node.id.as_ref()?;
        states?.get(id).copied()
    };
    Shard {
        primary: upstreams.node(&primary.addr),
        replicas: replicas
            .iter()
            .filter(|r| usable(r, states))
            .map(|r| upstreams.node(&r.addr))
            .collect(),
        epoch: state(primary).map_or(0, |s| s.config_epoch),
    }
}

/// Whether `states` does not flag `node` as failed (`fail`, `handshake`, `noaddr`).
fn usable(node: &SlotNode, states: Option<&NodeStates>) -> bool {
    let state = node.id.as_ref().and_then(|id| states?.get(id));
    state.is_none_or(|s| !s.unusable)
}

/// Ids of the nodes in `states` that no range of the map serves reads from: replicas absent
/// from `CLUSTER SLOTS` or listed there but flagged unusable (see [`shard`]), and members that
/// own no slot and are not replicas in the answering node's view. Right after a cluster is
/// created, or a node is told `CLUSTER REPLICATE`, the other nodes list the new replica as a
/// primary without slots until gossip tells them its role (about a second): a map read then has
/// no replica for that shard, and under `prefer-replica` its reads go to the primary.
fn left_out(ranges: &[SlotRange], states: &NodeStates) -> Vec<String> {
    let listed = |id: &str| {
        ranges.iter().any(|r| {
            r.primary.iter().any(|p| p.id.as_deref() == Some(id))
                || r.replicas.iter().any(|n| n.id.as_deref() == Some(id))
        })
    };
    let mut ids: Vec<String> = states
        .iter()
        .filter(|(id, state)| {
            (state.replica && state.unusable) || ((state.replica || state.member) && !listed(id))
        })
        .map(|(id, _)| id.clone())
        .collect();
    ids.sort_unstable();
    ids
}

impl std::fmt::Debug for Topology {
    /// Leaves out the 16384-entry slot table, which would drown any debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topology")
            .field("owned", &self.owned)
            .field("shards", &self.shards)
            .field("source", &self.source)
            .field("has_epochs", &self.has_epochs)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::nodes::parse_cluster_nodes;
    use crate::cluster::parse::SlotNode;

    const P: &str = "07c37dfeb235213a872192d90877d0cd55635b91";
    const R: &str = "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1";
    const F: &str = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca";
    const S: &str = "1111111111111111111111111111111111111111";

    fn node(addr: &str, id: &str) -> SlotNode {
        SlotNode {
            addr: addr.to_string(),
            id: Some(id.to_string()),
        }
    }

    #[test]
    fn replicas_the_cluster_knows_but_slots_omits_or_fails_are_left_out() {
        // R is listed; F failed (listed by an old server, flagged fail); S restarted and has
        // not synced, so CLUSTER SLOTS omits it.
        let text = format!(
            "{P} 127.0.0.1:1@11 myself,master - 0 0 1 connected 0-16383\n\
             {R} 127.0.0.1:2@12 slave {P} 0 0 1 connected\n\
             {F} 127.0.0.1:3@13 slave,fail {P} 0 0 1 disconnected\n\
             {S} 127.0.0.1:4@14 slave {P} 0 0 1 connected\n"
        );
        let states = parse_cluster_nodes(&text).expect("valid");
        let ranges = vec![SlotRange {
            start: 0,
            end: 16383,
            primary: Some(node("127.0.0.1:1", P)),
            replicas: vec![node("127.0.0.1:2", R), node("127.0.0.1:3", F)],
        }];
        assert_eq!(
            left_out(&ranges, &states),
            vec![S.to_string(), F.to_string()]
        );
    }

    #[test]
    fn members_without_slots_are_left_out_but_not_nodes_being_met() {
        // N is a new replica the answering node still takes for a primary without slots; D a
        // dead primary a failover took the slots from (it rejoins as a replica); H is being met
        // and X has no address: neither can be read from, and H's id is a temporary one.
        const N: &str = "2222222222222222222222222222222222222222";
        const D: &str = "3333333333333333333333333333333333333333";
        const H: &str = "4444444444444444444444444444444444444444";
        const X: &str = "5555555555555555555555555555555555555555";
        let text = format!(
            "{P} 127.0.0.1:1@11 myself,master - 0 0 1 connected 0-16383\n\
             {R} 127.0.0.1:2@12 slave {P} 0 0 1 connected\n\
             {N} 127.0.0.1:3@13 master - 0 0 0 connected\n\
             {D} 127.0.0.1:4@14 master,fail - 0 0 0 disconnected\n\
             {H} 127.0.0.1:5@15 handshake - 0 0 0 connected\n\
             {X} :0@0 master,noaddr - 0 0 0 disconnected\n"
        );
        let states = parse_cluster_nodes(&text).expect("valid");
        let ranges = vec![SlotRange {
            start: 0,
            end: 16383,
            primary: Some(node("127.0.0.1:1", P)),
            replicas: vec![node("127.0.0.1:2", R)],
        }];
        assert_eq!(
            left_out(&ranges, &states),
            vec![N.to_string(), D.to_string()]
        );
    }
}
