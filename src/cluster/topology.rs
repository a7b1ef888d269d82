//! An immutable snapshot of the cluster: which shard owns each of the 16384 slots.

use std::sync::Arc;

use super::parse::SlotRange;
use super::SLOT_COUNT;
use crate::upstream::{Node, Upstreams};

/// Marks a slot no shard owns (yet).
const UNOWNED: u16 = u16::MAX;

/// A primary and its replicas, as handles to their shared connections.
#[derive(Debug)]
pub struct Shard {
    pub primary: Arc<Node>,
    pub replicas: Vec<Arc<Node>>,
}

/// The slot map. Built whole, never mutated: a refresh swaps in a new one.
pub struct Topology {
    /// Slot → index into `shards`, or `UNOWNED`.
    slots: Box<[u16]>,
    shards: Vec<Shard>,
    owned: usize,
    /// The node whose `CLUSTER SLOTS` reply this map came from.
    source: Arc<str>,
}

impl Topology {
    /// Builds the map from parsed ranges, grouping ranges with the same primary into one shard.
    pub fn build(ranges: &[SlotRange], upstreams: &Upstreams, source: Arc<str>) -> Topology {
        let mut slots = vec![UNOWNED; SLOT_COUNT].into_boxed_slice();
        let mut shards: Vec<Shard> = Vec::new();
        let mut owned = 0;
        for range in ranges {
            let Some(primary) = &range.primary else {
                continue;
            };
            let index = match shards
                .iter()
                .position(|s| s.primary.addr().as_ref() == primary)
            {
                Some(index) => index,
                None => {
                    shards.push(Shard {
                        primary: upstreams.node(primary),
                        replicas: range.replicas.iter().map(|r| upstreams.node(r)).collect(),
                    });
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
        Topology {
            slots,
            shards,
            owned,
            source,
        }
    }

    /// The shard that owns `slot`, if any.
    pub fn shard(&self, slot: u16) -> Option<&Shard> {
        let index = *self.slots.get(usize::from(slot))?;
        self.shards.get(usize::from(index))
    }

    /// True when every slot has an owner.
    pub fn is_complete(&self) -> bool {
        self.owned == SLOT_COUNT
    }

    /// How many slots have an owner.
    pub fn owned_slots(&self) -> usize {
        self.owned
    }

    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// The node this snapshot was read from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Every node address in the map, primaries first.
    pub fn addrs(&self) -> impl Iterator<Item = &Arc<str>> {
        let primaries = self.shards.iter().map(|s| s.primary.addr());
        let replicas = self
            .shards
            .iter()
            .flat_map(|s| s.replicas.iter().map(|r| r.addr()));
        primaries.chain(replicas)
    }

    /// Contiguous slot ranges with the same owner, in slot order.
    pub fn ranges(&self) -> Vec<(u16, u16, Option<&Shard>)> {
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

    /// A one-line description of who owns what, to log when the map changes.
    pub fn summary(&self) -> String {
        let parts: Vec<String> = self
            .ranges()
            .into_iter()
            .map(|(start, end, shard)| {
                let who = shard.map_or("unowned", |s| s.primary.addr().as_ref());
                format!("{start}-{end}:{who}")
            })
            .collect();
        parts.join(" ")
    }
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topology")
            .field("owned", &self.owned)
            .field("shards", &self.shards)
            .field("source", &self.source)
            .finish()
    }
}
