//! Deciding whether a freshly read slot map may replace the current one: never an older map, and
//! a surprising change only once a second node agrees.
//!
//! Pure functions over [`SlotOwners`], so the rules are tested on small hand-built maps without
//! sockets; [`Topology`] implements it for the refresher.

use std::fmt;

use super::{Topology, SLOT_COUNT};

/// The part of a slot map the safety rules read.
pub trait SlotOwners {
    /// The primary address owning `slot` and its config epoch.
    fn owner(&self, slot: u16) -> Option<(&str, u64)>;
    /// False when the map's epochs are unknown (`CLUSTER NODES` unreadable).
    fn has_epochs(&self) -> bool;
    /// True when `addr` is in the map as a primary or a replica.
    fn contains(&self, addr: &str) -> bool;
    /// Every primary address (each once).
    fn primaries(&self) -> Vec<&str>;
    /// How many slots have an owner.
    fn owned(&self) -> usize;
}

/// A slot the candidate gives to an owner with a lower epoch than the current owner's: the
/// candidate node has not heard of a newer claim yet.
#[derive(Debug, PartialEq, Eq)]
pub struct Stale {
    pub slot: u16,
    pub owner: String,
    pub epoch: u64,
    pub current_owner: String,
    pub current_epoch: u64,
}

/// Why a candidate map needs a second node's agreement before it is adopted.
#[derive(Debug, PartialEq, Eq)]
pub enum Surprise {
    /// It owns fewer slots than the current map.
    FewerSlots { current: usize, candidate: usize },
    /// A current primary is in it neither as a primary nor as a replica.
    PrimaryGone(String),
    /// More than half of the slots would change owner at once.
    ManyMoved(usize),
}

impl fmt::Display for Surprise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Surprise::FewerSlots { current, candidate } => {
                write!(
                    f,
                    "owns {candidate} slots where the current map owns {current}"
                )
            }
            Surprise::PrimaryGone(addr) => write!(f, "primary {addr} is missing from it"),
            Surprise::ManyMoved(n) => write!(f, "{n} slots change owner at once"),
        }
    }
}

/// The first slot whose owner changes to one with a lower config epoch (Redis's rule: the higher
/// epoch wins a slot). Skipped when either map's epochs are unknown.
pub fn stale_slot(current: &impl SlotOwners, candidate: &impl SlotOwners) -> Option<Stale> {
    if !current.has_epochs() || !candidate.has_epochs() {
        return None;
    }
    (0..SLOT_COUNT as u16).find_map(|slot| {
        let (current_owner, current_epoch) = current.owner(slot)?;
        let (owner, epoch) = candidate.owner(slot)?;
        (owner != current_owner && epoch < current_epoch).then(|| Stale {
            slot,
            owner: owner.to_string(),
            epoch,
            current_owner: current_owner.to_string(),
            current_epoch,
        })
    })
}

/// Whether replacing `current` with `candidate` is surprising enough to ask another node first.
/// One partitioned node's view must not make redcar flap.
pub fn surprise(current: &impl SlotOwners, candidate: &impl SlotOwners) -> Option<Surprise> {
    if candidate.owned() < current.owned() {
        return Some(Surprise::FewerSlots {
            current: current.owned(),
            candidate: candidate.owned(),
        });
    }
    if let Some(gone) = current
        .primaries()
        .into_iter()
        .find(|p| !candidate.contains(p))
    {
        return Some(Surprise::PrimaryGone(gone.to_string()));
    }
    let moved = moved_slots(current, candidate);
    (moved > SLOT_COUNT / 2).then_some(Surprise::ManyMoved(moved))
}

/// Slots that had an owner and get a different one (or none); gaining an owner is no move.
fn moved_slots(current: &impl SlotOwners, candidate: &impl SlotOwners) -> usize {
    (0..SLOT_COUNT as u16)
        .filter(|&slot| match current.owner(slot) {
            Some((owner, _)) => candidate.owner(slot).map(|(o, _)| o) != Some(owner),
            None => false,
        })
        .count()
}

/// True when both maps give every slot the same primary (epochs and replicas aside).
pub fn same_assignment(a: &impl SlotOwners, b: &impl SlotOwners) -> bool {
    (0..SLOT_COUNT as u16)
        .all(|slot| a.owner(slot).map(|(o, _)| o) == b.owner(slot).map(|(o, _)| o))
}

impl SlotOwners for Topology {
    fn owner(&self, slot: u16) -> Option<(&str, u64)> {
        self.shard(slot)
            .map(|s| (s.primary.addr().as_ref(), s.epoch))
    }

    fn has_epochs(&self) -> bool {
        Topology::has_epochs(self)
    }

    fn contains(&self, addr: &str) -> bool {
        self.addrs().any(|a| a.as_ref() == addr)
    }

    fn primaries(&self) -> Vec<&str> {
        self.shards()
            .iter()
            .map(|s| s.primary.addr().as_ref())
            .collect()
    }

    fn owned(&self) -> usize {
        self.owned_slots()
    }
}

#[cfg(test)]
mod tests;
