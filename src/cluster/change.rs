//! Describes what a newly adopted slot map changes, in one line for the event log: primaries
//! replaced (slots moved from one owner to another), nodes added and removed.
//!
//! Runs once per adopted map (a 16384-slot walk), never per command.

use std::collections::BTreeMap;

use super::safety::SlotOwners;
use super::SLOT_COUNT;

/// Owner changes listed by address; more are summed into "and N more".
const LISTED: usize = 4;

/// One line for the first map adopted.
///
/// `nodes` is every address in the map, primaries and replicas. Written to the event log and the
/// `adopted new slot map` log line.
pub(crate) fn describe_first(next: &impl SlotOwners, nodes: &[&str]) -> String {
    format!(
        "first slot map: {} primaries, {} nodes, {} of {SLOT_COUNT} slots owned",
        next.primaries().len(),
        nodes.len(),
        next.owned()
    )
}

/// One line saying how `next` differs from `previous` (`*_nodes`: every address in each map).
///
/// Parts, in order: slot moves between owners (the four biggest by address pair, the rest counted),
/// a change in how many slots are owned, nodes added, nodes removed. When nothing of that changed
/// (only replicas or epochs did), the line says `replica roles changed`, so an adoption never logs
/// an empty change.
pub(crate) fn describe_change(
    previous: &impl SlotOwners,
    previous_nodes: &[&str],
    next: &impl SlotOwners,
    next_nodes: &[&str],
) -> String {
    let mut parts = Vec::new();
    let moves = owner_moves(previous, next);
    let moved: usize = moves.values().sum();
    if moved > 0 {
        let mut listed: Vec<(&(String, String), &usize)> = moves.iter().collect();
        listed.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let mut text: Vec<String> = listed
            .iter()
            .take(LISTED)
            .map(|((from, to), n)| format!("{from} → {to} ({n} slots)"))
            .collect();
        if listed.len() > LISTED {
            text.push(format!("and {} more", listed.len() - LISTED));
        }
        parts.push(format!("{moved} slots moved: {}", text.join(", ")));
    }
    if previous.owned() != next.owned() {
        parts.push(format!(
            "owned slots {} → {}",
            previous.owned(),
            next.owned()
        ));
    }
    let added: Vec<&str> = diff(next_nodes, previous_nodes);
    if !added.is_empty() {
        parts.push(format!("nodes added: {}", added.join(", ")));
    }
    let removed: Vec<&str> = diff(previous_nodes, next_nodes);
    if !removed.is_empty() {
        parts.push(format!("nodes removed: {}", removed.join(", ")));
    }
    if parts.is_empty() {
        // Same owners and nodes: a replica moved between shards, or epochs changed.
        parts.push("replica roles changed".to_string());
    }
    parts.join("; ")
}

/// (old owner, new owner) → slots, for slots whose owner changed; "unowned" stands for none.
///
/// A `BTreeMap`, so pairs with equal counts are listed in a stable order and the line reads the
/// same for the same change.
fn owner_moves(
    previous: &impl SlotOwners,
    next: &impl SlotOwners,
) -> BTreeMap<(String, String), usize> {
    let mut moves = BTreeMap::new();
    for slot in 0..SLOT_COUNT as u16 {
        let from = previous.owner(slot).map(|(o, _)| o);
        let to = next.owner(slot).map(|(o, _)| o);
        if from != to {
            let name = |o: Option<&str>| o.unwrap_or("unowned").to_string();
            *moves.entry((name(from), name(to))).or_insert(0) += 1;
        }
    }
    moves
}

/// Addresses in `a` and not in `b`, sorted.
fn diff<'a>(a: &[&'a str], b: &[&str]) -> Vec<&'a str> {
    let mut out: Vec<&str> = a.iter().copied().filter(|x| !b.contains(x)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slot ranges `(start, end, primary)`.
    struct Map(Vec<(u16, u16, &'static str)>);

    impl SlotOwners for Map {
        fn owner(&self, slot: u16) -> Option<(&str, u64)> {
            self.0
                .iter()
                .find(|(s, e, _)| (*s..=*e).contains(&slot))
                .map(|(_, _, p)| (*p, 0))
        }
        fn has_epochs(&self) -> bool {
            false
        }
        fn contains(&self, addr: &str) -> bool {
            self.0.iter().any(|(_, _, p)| *p == addr)
        }
        fn primaries(&self) -> Vec<&str> {
            let mut p: Vec<&str> = self.0.iter().map(|(_, _, p)| *p).collect();
            p.dedup();
            p
        }
        fn owned(&self) -> usize {
            self.0.iter().map(|(s, e, _)| usize::from(e - s) + 1).sum()
        }
    }

    fn three() -> Map {
        Map(vec![
            (0, 5460, "a:1"),
            (5461, 10922, "b:1"),
            (10923, 16383, "c:1"),
        ])
    }

    #[test]
    fn a_failover_names_the_old_and_new_primary() {
        let after = Map(vec![
            (0, 5460, "a:1"),
            (5461, 10922, "b:2"),
            (10923, 16383, "c:1"),
        ]);
        let text = describe_change(
            &three(),
            &["a:1", "b:1", "c:1", "b:2"],
            &after,
            &["a:1", "b:2", "c:1"],
        );
        assert_eq!(
            text,
            "5462 slots moved: b:1 → b:2 (5462 slots); nodes removed: b:1"
        );
    }

    #[test]
    fn lost_slots_and_new_nodes_are_reported() {
        let after = Map(vec![(0, 5460, "a:1"), (10923, 16383, "c:1")]);
        let text = describe_change(
            &three(),
            &["a:1", "b:1", "c:1"],
            &after,
            &["a:1", "c:1", "d:1"],
        );
        assert!(text.contains("b:1 → unowned (5462 slots)"), "{text}");
        assert!(text.contains("owned slots 16384 → 10922"), "{text}");
        assert!(text.contains("nodes added: d:1"), "{text}");
        assert!(text.contains("nodes removed: b:1"), "{text}");
    }

    #[test]
    fn same_owners_and_nodes_is_a_replica_change() {
        let nodes = ["a:1", "b:1", "c:1"];
        assert_eq!(
            describe_change(&three(), &nodes, &three(), &nodes),
            "replica roles changed"
        );
        assert_eq!(
            describe_first(&three(), &nodes),
            "first slot map: 3 primaries, 3 nodes, 16384 of 16384 slots owned"
        );
    }
}
