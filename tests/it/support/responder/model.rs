//! A Redis Cluster described as data: nodes with ids, addresses, roles, config epochs and slots,
//! and the changes a cluster goes through (a failover, slots moved, a node failed, added or
//! forgotten). The replies (`replies.rs`) are rendered from it as a real node would answer.

use std::collections::HashMap;

/// One node of the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// 40 hex digits.
    pub id: String,
    pub host: String,
    pub port: u16,
    pub role: Role,
    /// Flagged `fail` by the cluster.
    pub failed: bool,
    /// Replication offset (a replica at 0 has not synced: `loading`, left out of `SLOTS`).
    pub offset: u64,
}

/// A primary owns slots under its config epoch; a replica follows a primary (by id).
#[derive(Clone, Debug, PartialEq)]
pub enum Role {
    Primary { epoch: u64, slots: Vec<(u16, u16)> },
    Replica { of: String },
}

/// The whole cluster.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub nodes: Vec<Node>,
    pub current_epoch: u64,
}

/// A small deterministic generator (xorshift), so a seed gives the same cluster every time.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn id(&mut self) -> String {
        format!(
            "{:016x}{:016x}{:08x}",
            self.next(),
            self.next(),
            self.next() as u32
        )
    }
}

impl Node {
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub fn is_primary(&self) -> bool {
        matches!(self.role, Role::Primary { .. })
    }

    pub fn slots(&self) -> &[(u16, u16)] {
        match &self.role {
            Role::Primary { slots, .. } => slots,
            Role::Replica { .. } => &[],
        }
    }
}

impl Model {
    /// `shards` primaries with `replicas` replicas each, the 16384 slots cut into
    /// `shards * fragments` ranges of random sizes dealt out at random (a map fragmented by
    /// years of resharding). `addr(i)` places node `i` (primaries first).
    pub fn fragmented(
        shards: usize,
        replicas: usize,
        fragments: usize,
        seed: u64,
        addr: impl Fn(usize) -> (String, u16),
    ) -> Model {
        let mut rng = Rng::new(seed);
        let pieces = (shards * fragments).clamp(1, 16384);
        let mut cuts: Vec<u16> = Vec::new();
        while cuts.len() + 1 < pieces {
            let cut = 1 + rng.below(16383) as u16;
            if !cuts.contains(&cut) {
                cuts.push(cut);
            }
        }
        cuts.sort_unstable();
        let starts: Vec<u16> = std::iter::once(0).chain(cuts.iter().copied()).collect();
        let ends: Vec<u16> = cuts
            .iter()
            .map(|c| c - 1)
            .chain(std::iter::once(16383))
            .collect();
        let mut owners: Vec<usize> = (0..pieces).map(|i| i % shards).collect();
        for i in (1..owners.len()).rev() {
            owners.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut owned: Vec<Vec<(u16, u16)>> = vec![Vec::new(); shards];
        for ((start, end), owner) in starts.into_iter().zip(ends).zip(owners) {
            owned[owner].push((start, end));
        }
        let mut model = Model::default();
        for (i, slots) in owned.into_iter().enumerate() {
            let (host, port) = addr(i);
            let epoch = i as u64 + 1;
            model.nodes.push(Node {
                id: rng.id(),
                host,
                port,
                role: Role::Primary { epoch, slots },
                failed: false,
                offset: 1000 + rng.below(1000),
            });
        }
        for r in 0..shards * replicas {
            let (host, port) = addr(shards + r);
            let of = model.nodes[r % shards].id.clone();
            model.nodes.push(Node {
                id: rng.id(),
                host,
                port,
                role: Role::Replica { of },
                failed: false,
                offset: 1000 + rng.below(1000),
            });
        }
        model.current_epoch = (shards * (1 + replicas)) as u64;
        model
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    pub fn node_mut(&mut self, id: &str) -> Option<&mut Node> {
        self.nodes.iter_mut().find(|n| n.id == id)
    }

    pub fn by_addr(&self, addr: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.addr() == addr)
    }

    pub fn primaries(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.is_primary())
    }

    pub fn replicas_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes
            .iter()
            .filter(move |n| matches!(&n.role, Role::Replica { of } if of == id))
    }

    /// The config epoch a node shows (a replica shows its primary's).
    pub fn epoch_of(&self, node: &Node) -> u64 {
        match &node.role {
            Role::Primary { epoch, .. } => *epoch,
            Role::Replica { of } => self.node(of).map_or(0, |p| self.epoch_of(p)),
        }
    }

    /// The primary owning `slot`.
    pub fn owner(&self, slot: u16) -> Option<&Node> {
        self.primaries()
            .find(|p| p.slots().iter().any(|&(a, b)| a <= slot && slot <= b))
    }

    /// Slot → owner index, for rendering ranges in slot order.
    pub fn slot_owners(&self) -> Vec<Option<usize>> {
        let mut owners = vec![None; 16384];
        for (i, node) in self.nodes.iter().enumerate() {
            for &(a, b) in node.slots() {
                for slot in a..=b {
                    owners[usize::from(slot)] = Some(i);
                }
            }
        }
        owners
    }

    /// The replica `id` takes over its primary's slots with a new, highest epoch; the old
    /// primary and its other replicas follow it (a failover).
    pub fn failover(&mut self, id: &str) {
        let Some(Role::Replica { of }) = self.node(id).map(|n| n.role.clone()) else {
            panic!("{id} is not a replica");
        };
        let slots = self
            .node(&of)
            .map(|p| p.slots().to_vec())
            .unwrap_or_default();
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        for node in &mut self.nodes {
            if node.id == id {
                node.role = Role::Primary {
                    epoch,
                    slots: slots.clone(),
                };
            } else if node.id == of || matches!(&node.role, Role::Replica { of: o } if *o == of) {
                node.role = Role::Replica { of: id.to_string() };
            }
        }
    }

    /// Moves the slots `start..=end` to the primary `to`; `bump`: it takes a new epoch (as a
    /// migration ending on a node without the highest epoch does).
    pub fn move_slots(&mut self, start: u16, end: u16, to: &str, bump: bool) {
        if bump {
            self.current_epoch += 1;
        }
        let current = self.current_epoch;
        for node in &mut self.nodes {
            let Role::Primary { epoch, slots } = &mut node.role else {
                continue;
            };
            let mut kept = Vec::new();
            for &(a, b) in slots.iter() {
                if b < start || a > end {
                    kept.push((a, b));
                    continue;
                }
                if a < start {
                    kept.push((a, start - 1));
                }
                if b > end {
                    kept.push((end + 1, b));
                }
            }
            if node.id == to {
                kept.push((start, end));
                kept.sort_unstable();
                if bump {
                    *epoch = current;
                }
            }
            *slots = kept;
        }
    }

    /// Nodes by id, for quick lookups in renderers.
    pub fn index(&self) -> HashMap<&str, &Node> {
        self.nodes.iter().map(|n| (n.id.as_str(), n)).collect()
    }
}
