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

/// The node a candidate map came from, when it owns none of the slots in question.
const ELSEWHERE: &str = "x:1";

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
    assert_eq!(stale_slot(&current, &after, ELSEWHERE), None);
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
    let stale = stale_slot(&current, &old, ELSEWHERE).expect("stale");
    assert_eq!(
        stale,
        Stale {
            slot: 10922,
            owner: "b:1".to_string(),
            epoch: Some(2),
            current_owner: "c:1".to_string(),
            current_epoch: 3,
        }
    );
    // The other way round it is the newer map.
    assert_eq!(stale_slot(&old, &current, ELSEWHERE), None);
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
    assert_eq!(stale_slot(&current, &same, ELSEWHERE), None);
    let moved_back = map(&[(0, 16383, "a:1", 1)]);
    assert!(stale_slot(&current, &moved_back, ELSEWHERE).is_some());
    // Nothing is known without epochs: no rule to apply.
    assert_eq!(
        stale_slot(&three_shards().without_epochs(), &moved_back, ELSEWHERE),
        None
    );
    // The same owners without epochs change nothing, so they are never stale.
    assert_eq!(
        stale_slot(&current, &three_shards().without_epochs(), ELSEWHERE),
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

/// `three_shards` after a failover of a:1 to a:2, which the cluster gave epoch 4.
fn after_failover() -> Map {
    map(&[
        (0, 5460, "a:2", 4),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ])
    .with_replica("a:1")
}

/// What a node that missed that failover still says (the demoted a:1 itself, just before it
/// hears of it, or any node the news has not reached).
fn before_failover() -> Map {
    three_shards()
}

fn known_from(maps: &[&Map]) -> KnownEpochs {
    maps.iter()
        .fold(KnownEpochs::default(), |known, m| known.updated(*m))
}

#[test]
fn a_node_that_missed_a_failover_cannot_hand_the_range_back() {
    let known = known_from(&[&three_shards(), &after_failover()]);
    for source in ["a:1", "b:2", ELSEWHERE] {
        let stale = stale_slot(&known, &before_failover(), source)
            .unwrap_or_else(|| panic!("the old map from {source} is not stale"));
        assert_eq!(
            (stale.slot, stale.owner.as_str(), stale.epoch),
            (0, "a:1", Some(1))
        );
        assert_eq!(
            (stale.current_owner.as_str(), stale.current_epoch),
            ("a:2", 4)
        );
    }
    // The failover itself, and a later one back to a:1 with a newer epoch, are adopted.
    assert_eq!(
        stale_slot(&known_from(&[&three_shards()]), &after_failover(), "a:2"),
        None
    );
    let back = map(&[
        (0, 5460, "a:1", 5),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ]);
    assert_eq!(stale_slot(&known, &back, ELSEWHERE), None);
}

#[test]
fn a_slot_left_unowned_keeps_its_known_epoch() {
    // A partial map (a node that saw a:1 turn replica before hearing a:2's claim) is adopted
    // while the current map is partial too; the epoch of 0-5460 is not forgotten.
    let partial = map(&[(5461, 10922, "b:1", 2), (10923, 16383, "c:1", 3)]);
    let known = known_from(&[&after_failover(), &partial]);
    assert_eq!(known.owner(0), Some(("a:2", 4)));
    assert_eq!(known.owned(), 16384);
    assert!(stale_slot(&known, &before_failover(), ELSEWHERE).is_some());
    // Comparing with the partial map alone, as before, let the old map through.
    assert_eq!(stale_slot(&partial, &before_failover(), ELSEWHERE), None);
}

#[test]
fn a_map_without_epochs_cannot_move_a_slot() {
    let known = known_from(&[&after_failover()]);
    let unverifiable = before_failover().without_epochs();
    let stale = stale_slot(&known, &unverifiable, ELSEWHERE).expect("unverifiable move");
    assert_eq!((stale.slot, stale.epoch), (0, None));
    // And it does not erase what is known.
    let kept = known.updated(&unverifiable);
    assert_eq!(kept.owner(0), Some(("a:2", 4)));
}

#[test]
fn a_slot_migration_bumps_the_target_and_is_adopted() {
    // SETSLOT 100 IMPORTING on b:1, then SETSLOT 100 NODE b:1: Redis 7 gives the importing
    // target a new epoch above every other (here 4), then the slot.
    let known = known_from(&[&three_shards()]);
    let migrated = map(&[
        (0, 99, "a:1", 1),
        (100, 100, "b:1", 4),
        (101, 5460, "a:1", 1),
        (5461, 10922, "b:1", 4),
        (10923, 16383, "c:1", 3),
    ]);
    assert_eq!(stale_slot(&known, &migrated, ELSEWHERE), None);
    assert_eq!(surprise(&three_shards(), &migrated), None);
    // A target that already had the highest epoch keeps it, and still wins.
    let to_c = map(&[
        (0, 99, "a:1", 1),
        (100, 100, "c:1", 3),
        (101, 5460, "a:1", 1),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "c:1", 3),
    ]);
    assert_eq!(stale_slot(&known, &to_c, ELSEWHERE), None);
    // A node that has not heard of the handover yet cannot give the slot back to a:1.
    let known = known.updated(&migrated);
    let stale = stale_slot(&known, &three_shards(), ELSEWHERE).expect("stale");
    assert_eq!((stale.slot, stale.owner.as_str()), (100, "a:1"));
}

#[test]
fn a_move_to_a_lower_epoch_is_taken_from_the_old_owner_only() {
    // SETSLOT 10923 NODE a:1 without IMPORTING: a:1 keeps epoch 1 < c:1's 3, and Redis hands
    // the slot over anyway once c:1 lets go of it. Only c:1's own word is taken for that.
    let known = known_from(&[&three_shards()]);
    let moved = map(&[
        (0, 5460, "a:1", 1),
        (5461, 10922, "b:1", 2),
        (10923, 10923, "a:1", 1),
        (10924, 16383, "c:1", 3),
    ]);
    assert!(stale_slot(&known, &moved, "b:1").is_some());
    assert!(stale_slot(&known, &moved, "a:1").is_some());
    assert_eq!(stale_slot(&known, &moved, "c:1"), None);
}

#[test]
fn a_second_opinion_counts_only_from_a_node_that_is_not_behind() {
    let known = known_from(&[&three_shards()]);
    let candidate = after_failover();
    assert_eq!(
        second_opinion_of(&known, &candidate, &after_failover(), ELSEWHERE),
        Some(true)
    );
    let other = map(&[
        (0, 5460, "a:2", 4),
        (5461, 10922, "b:1", 2),
        (10923, 16383, "a:2", 4),
    ]);
    assert_eq!(
        second_opinion_of(&known, &candidate, &other, ELSEWHERE),
        Some(false)
    );
    // Without epochs it can vouch for nothing, once epochs are known.
    let blind = after_failover().without_epochs();
    assert_eq!(
        second_opinion_of(&known, &candidate, &blind, ELSEWHERE),
        None
    );
    // A node behind what is known neither confirms nor refutes.
    let newer = known.updated(&after_failover());
    let surprising = map(&[(0, 8191, "a:2", 4), (8192, 16383, "c:1", 3)]);
    assert_eq!(
        second_opinion_of(&newer, &surprising, &before_failover(), ELSEWHERE),
        None
    );
    // With no epochs ever seen, agreement is all there is to go by.
    let none = KnownEpochs::default();
    assert_eq!(
        second_opinion_of(&none, &candidate, &blind, ELSEWHERE),
        Some(true)
    );
}
