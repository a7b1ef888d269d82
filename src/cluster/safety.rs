//! Deciding whether a freshly read slot map may replace the current one: never an older map, and
//! a surprising change only once a second node agrees.
//!
//! Pure functions over [`SlotOwners`], so the rules are tested on small hand-built maps without
//! sockets; [`Topology`] and [`KnownEpochs`] (each slot's last adopted owner and its config
//! epoch, kept across maps) implement it for the refresher.

use std::fmt;

use super::{Topology, SLOT_COUNT};

/// The part of a slot map the safety rules read.
pub(crate) trait SlotOwners {
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

/// A slot the candidate gives to an owner with a lower epoch than the known owner's: the
/// candidate node has not heard of a newer claim yet. `epoch` is `None` when the candidate's
/// epochs are unknown, so its change of owner cannot be checked.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Stale {
    /// The first such slot, in slot order.
    pub(crate) slot: u16,
    /// The owner the candidate map gives it.
    pub(crate) owner: String,
    /// That owner's config epoch in the candidate; `None` when the candidate has no epochs.
    pub(crate) epoch: Option<u64>,
    /// The owner redcar knows for the slot.
    pub(crate) current_owner: String,
    /// The known owner's config epoch.
    pub(crate) current_epoch: u64,
}

/// Slot → index into `KnownEpochs::owners` for a slot never owned in a map with epochs.
const NONE: u16 = u16::MAX;

/// Each slot's owner and config epoch in the last adopted map that had epochs and gave the slot
/// an owner. A slot left unowned by a later map, or a later map read without epochs, does not
/// erase what was known, so a node that missed a failover cannot hand the slot back to the old
/// owner in either case. Built by the refresher only (once per adopted map), never per command.
#[derive(Debug, Default)]
pub(crate) struct KnownEpochs {
    /// Slot → index into `owners`; empty until the first map with epochs.
    slots: Vec<u16>,
    /// Each distinct (owner, epoch) pair once; a slot points here, so the whole table is 32 KiB of
    /// indices plus a few owners rather than 16384 strings.
    owners: Vec<(String, u64)>,
}

impl KnownEpochs {
    /// `self` updated with `map`'s owners; the same when `map`'s epochs are unknown.
    pub(crate) fn updated(&self, map: &impl SlotOwners) -> KnownEpochs {
        if !map.has_epochs() {
            return KnownEpochs {
                slots: self.slots.clone(),
                owners: self.owners.clone(),
            };
        }
        let mut next = KnownEpochs {
            slots: Vec::with_capacity(SLOT_COUNT),
            owners: Vec::new(),
        };
        for slot in 0..SLOT_COUNT as u16 {
            let Some((owner, epoch)) = map.owner(slot).or_else(|| self.owner(slot)) else {
                next.slots.push(NONE);
                continue;
            };
            // Owners are few and their slots mostly contiguous: the last one usually matches.
            let index = match next
                .owners
                .iter()
                .rposition(|(o, e)| o == owner && *e == epoch)
            {
                Some(index) => index,
                None => {
                    next.owners.push((owner.to_string(), epoch));
                    next.owners.len() - 1
                }
            };
            next.slots.push(u16::try_from(index).unwrap_or(NONE));
        }
        next
    }
}

impl SlotOwners for KnownEpochs {
    /// Reads through the slot's index; a slot never known has none.
    fn owner(&self, slot: u16) -> Option<(&str, u64)> {
        let index = *self.slots.get(usize::from(slot))?;
        let (owner, epoch) = self.owners.get(usize::from(index))?;
        Some((owner.as_str(), *epoch))
    }

    /// Known once a map with epochs was adopted.
    fn has_epochs(&self) -> bool {
        !self.slots.is_empty()
    }

    /// Only owners: the known epochs list no replicas.
    fn contains(&self, addr: &str) -> bool {
        self.owners.iter().any(|(o, _)| o == addr)
    }

    fn primaries(&self) -> Vec<&str> {
        let mut primaries: Vec<&str> = self.owners.iter().map(|(o, _)| o.as_str()).collect();
        primaries.sort_unstable();
        primaries.dedup();
        primaries
    }

    /// Slots with a known owner, from any map with epochs so far.
    fn owned(&self) -> usize {
        self.slots.iter().filter(|&&i| i != NONE).count()
    }
}

/// Why a candidate map needs a second node's agreement before it is adopted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Surprise {
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

/// The first slot whose owner would change to one with a lower config epoch than the known
/// owner's (Redis's rule: the higher epoch wins a slot), or to any other owner when the
/// candidate's epochs are unknown. `known` is what earlier maps said ([`KnownEpochs`]); nothing
/// is stale while no map with epochs was ever seen.
///
/// One exception: the change is accepted when `source`, the node the candidate came from, is the
/// known owner itself. An owner gives a slot away only when it has seen the new owner's claim
/// win, so its word is the best there is; this lets through the one legitimate move to a lower
/// epoch, `CLUSTER SETSLOT <slot> NODE` on a target that was not `IMPORTING` (its epoch is not
/// bumped, yet Redis 7 hands the slot over once the old owner lets go of it).
pub(crate) fn stale_slot(
    known: &impl SlotOwners,
    candidate: &impl SlotOwners,
    source: &str,
) -> Option<Stale> {
    if !known.has_epochs() {
        return None;
    }
    let epochs = candidate.has_epochs();
    (0..SLOT_COUNT as u16).find_map(|slot| {
        let (current_owner, current_epoch) = known.owner(slot)?;
        let (owner, epoch) = candidate.owner(slot)?;
        if owner == current_owner || source == current_owner {
            return None;
        }
        let epoch = epochs.then_some(epoch);
        epoch.is_none_or(|e| e < current_epoch).then(|| Stale {
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
pub(crate) fn surprise(current: &impl SlotOwners, candidate: &impl SlotOwners) -> Option<Surprise> {
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

/// What a second node's map says about a surprising `candidate`: `Some(true)` it gives every
/// slot the same primary, `Some(false)` it does not, `None` it cannot vouch either way — it is
/// stale itself, or its epochs are unknown while redcar knows some (a node that missed the change
/// proves nothing against it, and an unverifiable map proves nothing for it).
pub(crate) fn second_opinion(
    known: &impl SlotOwners,
    candidate: &impl SlotOwners,
    second: &Topology,
) -> Option<bool> {
    second_opinion_of(known, candidate, second, second.source())
}

/// [`second_opinion`] with the second map's source given apart (tests use plain maps).
fn second_opinion_of(
    known: &impl SlotOwners,
    candidate: &impl SlotOwners,
    second: &impl SlotOwners,
    source: &str,
) -> Option<bool> {
    if known.has_epochs() && (!second.has_epochs() || stale_slot(known, second, source).is_some()) {
        return None;
    }
    Some(same_assignment(candidate, second))
}

/// True when both maps give every slot the same primary (epochs and replicas aside).
fn same_assignment(a: &impl SlotOwners, b: &impl SlotOwners) -> bool {
    (0..SLOT_COUNT as u16)
        .all(|slot| a.owner(slot).map(|(o, _)| o) == b.owner(slot).map(|(o, _)| o))
}

impl SlotOwners for Topology {
    /// The slot's shard's primary and the shard's config epoch.
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

    /// In shard order; a primary owning several ranges is one shard, so each appears once.
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
