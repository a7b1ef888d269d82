//! The safety rules on small hand-built maps.

use super::*;

/// A slot map as plain data: slot → (primary, epoch), plus replica addresses.
struct Map {
    owners: Vec<Option<(String, u64)>>,
    replicas: Vec<String>,
    epochs: bool,
}

/// `(start, end, primary, epoch)` ranges; slots not listed are unowned.
fn map(ranges: &[(u16, u16, &str, u64)]) -> Map {
    let mut owners = vec![None; SLOT_COUNT];
    for &(start, end, primary, epoch) in ranges {
        for owner in &mut owners[usize::from(start)..=usize::from(end)] {
            *owner = Some((primary.to_string(), epoch));
        }
    }
    Map {
        owners,
        replicas: Vec::new(),
        epochs: true,
    }
}

impl Map {
    fn with_replica(mut self, addr: &str) -> Map {
        self.replicas.push(addr.to_string());
        self
    }

    fn without_epochs(mut self) -> Map {
        self.epochs = false;
        self
    }
}

impl SlotOwners for Map {
    fn owner(&self, slot: u16) -> Option<(&str, u64)> {
        let (addr, epoch) = self.owners[usize::from(slot)].as_ref()?;
        Some((addr.as_str(), *epoch))
    }

    fn has_epochs(&self) -> bool {
        self.epochs
    }

    fn contains(&self, addr: &str) -> bool {
        self.replicas.iter().any(|r| r == addr) || self.primaries().contains(&addr)
    }

    fn primaries(&self) -> Vec<&str> {
        let mut primaries: Vec<&str> = self
            .owners
            .iter()
            .flatten()
            .map(|(a, _)| a.as_str())
            .collect();
        primaries.sort_unstable();
        primaries.dedup();
        primaries
    }

    fn owned(&self) -> usize {
        self.owners.iter().flatten().count()
    }
}

/// Three primaries a, b, c with epochs 1, 2, 3 and one replica each.
fn three_shards() -> Map {
    map(&[
        (0, 5460, "a:1", 1),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ])
    .with_replica("a:2")
    .with_replica("b:2")
    .with_replica("c:2")
}

#[test]
fn a_failover_to_a_higher_epoch_is_not_stale() {
    let current = three_shards();
    let after = map(&[
        (0, 5460, "a:2", 4),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ])
    .with_replica("a:1");
    assert_eq!(stale_slot(&current, &after), None);
    assert_eq!(surprise(&current, &after), None);
}

#[test]
fn an_owner_with_a_lower_epoch_makes_the_map_stale() {
    // The candidate node still thinks b owns a slot that c (epoch 3) took from it.
    let current = map(&[
        (0, 5460, "a:1", 1),
        (5461, 10921, "b:1", 2),
        (10922, 16383, "c:1", 3),
    ]);
    let old = map(&[
        (0, 5460, "a:1", 1),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ]);
    let stale = stale_slot(&current, &old).expect("stale");
    assert_eq!(
        stale,
        Stale {
            slot: 10922,
            owner: "b:1".to_string(),
            epoch: 2,
            current_owner: "c:1".to_string(),
            current_epoch: 3,
        }
    );
    // The other way round it is the newer map.
    assert_eq!(stale_slot(&old, &current), None);
}

#[test]
fn same_owner_or_unknown_epochs_are_never_stale() {
    let current = three_shards();
    // The owner's epoch went down (e.g. the current map read it from a confused node): same owner,
    // so no slot changes hands and nothing is stale.
    let same = map(&[
        (0, 5460, "a:1", 0),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ]);
    assert_eq!(stale_slot(&current, &same), None);
    let moved_back = map(&[(0, 16383, "a:1", 1)]);
    assert!(stale_slot(&current, &moved_back).is_some());
    assert_eq!(
        stale_slot(&current, &map(&[(0, 16383, "a:1", 1)]).without_epochs()),
        None
    );
    assert_eq!(
        stale_slot(&three_shards().without_epochs(), &moved_back),
        None
    );
}

#[test]
fn owning_fewer_slots_is_surprising() {
    let current = three_shards();
    let fewer = map(&[
        (0, 5460, "a:1", 1),
        (5461, 10922, "b:1", 2),
        (10923, 16382, "c:1", 3),
    ]);
    assert_eq!(
        surprise(&current, &fewer),
        Some(Surprise::FewerSlots {
            current: 16384,
            candidate: 16383
        })
    );
}

#[test]
fn a_vanished_primary_is_surprising_but_a_demoted_one_is_not() {
    let current = three_shards();
    let vanished = map(&[
        (0, 5460, "a:2", 4),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ]);
    assert_eq!(
        surprise(&current, &vanished),
        Some(Surprise::PrimaryGone("a:1".to_string()))
    );
    let demoted = vanished.with_replica("a:1");
    assert_eq!(surprise(&current, &demoted), None);
}

#[test]
fn more_than_half_of_the_slots_moving_is_surprising() {
    let current = map(&[(0, 8191, "a:1", 1), (8192, 16383, "b:1", 2)]);
    // Exactly half moves: not yet surprising.
    let half = map(&[(0, 16383, "b:1", 2)]).with_replica("a:1");
    assert_eq!(surprise(&current, &half), None);
    // The two swap halves; slot 8192 stays with b.
    let more = map(&[(0, 8192, "b:1", 5), (8193, 16383, "a:1", 6)]);
    assert_eq!(surprise(&current, &more), Some(Surprise::ManyMoved(16383)));
}

#[test]
fn slots_gaining_an_owner_are_not_moves() {
    let booting = map(&[(0, 100, "a:1", 1)]);
    let complete = map(&[
        (0, 5460, "a:1", 1),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ]);
    assert_eq!(surprise(&booting, &complete), None);
}

#[test]
fn agreement_compares_primaries_only() {
    let first = three_shards();
    let second = map(&[
        (0, 5460, "a:1", 7),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ]);
    assert!(same_assignment(&first, &second));
    let other = map(&[
        (0, 5460, "a:1", 1),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "b:1", 3),
    ]);
    assert!(!same_assignment(&first, &other));
    let partial = map(&[(0, 5460, "a:1", 1), (5461, 10922, "b:1", 2)]);
    assert!(!same_assignment(&first, &partial));
}
