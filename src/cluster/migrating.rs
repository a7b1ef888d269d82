//! Which slots are being migrated between primaries right now, as far as redcar has seen: one
//! bit per slot, tested on every replica-read's path, so such reads can go to the primary.
//!
//! A replica cannot follow a migration: Redis 7 keeps `MIGRATING`/`IMPORTING` on the two
//! primaries only, so the source's replica answers nil for a key already moved to the target
//! where its primary would answer `-ASK`. redcar learns a migration from any `-ASK` it receives
//! for the slot (at once) and from a refresh whose node is the source or the target (`CLUSTER
//! NODES` shows `[slot->-id]` / `[slot-<-id]` on its own line only). It forgets it [`GRACE`]
//! after a `-MOVED` for the slot (the handover is done) or a refresh from the slot's owner that
//! shows no marker, at once when it adopts a map that gives the slot a new owner, and [`HOLD`]
//! after the last sign of it in any case (a migration abandoned with `SETSLOT STABLE` sends no
//! `MOVED`).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::nodes::own_slots;
use super::{Topology, SLOT_COUNT};
use crate::protocol::Frame;

/// How long a mark lasts after the last `-ASK` or marker seen for the slot. Long, because while
/// a slot is marked its reads go to the primary, whose `-ASK`s renew the mark, and a refresh
/// reaches the source or target only now and then (it asks one node at random); the mark ends
/// sooner on the `-MOVED` that follows the handover.
const HOLD: Duration = Duration::from_secs(60);

/// How long a mark outlives the end of its migration at most: until the map names the new
/// owner (before that, reads would go to the old owner's replicas, and one that has not heard of
/// the handover still serves the slot without the keys that moved). A map that names the new
/// owner ends the mark at once ([`MigratingSlots::note_new_map`]).
pub(crate) const GRACE: Duration = Duration::from_secs(5);

const WORDS: usize = SLOT_COUNT / 64;

/// The migrating slots: a bitmap (the hot path's one test) and, per slot, when its mark lapses.
pub(crate) struct MigratingSlots {
    bits: Box<[AtomicU64]>,
    /// Seconds since `base` at which each slot's mark lapses; read only for marked slots.
    until: Box<[AtomicU32]>,
    base: Instant,
}

impl MigratingSlots {
    pub(crate) fn new() -> MigratingSlots {
        MigratingSlots {
            bits: (0..WORDS).map(|_| AtomicU64::new(0)).collect(),
            until: (0..SLOT_COUNT).map(|_| AtomicU32::new(0)).collect(),
            base: Instant::now(),
        }
    }

    /// True while `slot` is marked migrating. One relaxed load and a bit test when it is not;
    /// no allocation either way.
    #[inline]
    pub(crate) fn contains(&self, slot: u16) -> bool {
        let (word, bit) = position(slot);
        if self.bits[word].load(Ordering::Relaxed) & bit == 0 {
            return false;
        }
        self.still_marked(slot)
    }

    /// A `-ASK` for `slot`: it is migrating now.
    pub(crate) fn note_ask(&self, slot: u16) {
        self.mark(slot, self.now());
    }

    /// A `-MOVED` for `slot`: its owner changed for good, so any migration of it is over (a new
    /// one is seen again by its first `-ASK`).
    pub(crate) fn note_moved(&self, slot: u16) {
        self.wind_down(slot, self.now());
    }

    /// A refresh's `CLUSTER NODES` reply: its own line's markers mark their slots, and a slot it
    /// owns with no marker is not migrating (it is the source, or the target after handover).
    pub(crate) fn note_cluster_nodes(&self, reply: &Frame) {
        let Some(text) = reply.as_bytes().and_then(|b| std::str::from_utf8(b).ok()) else {
            return;
        };
        let Some(own) = own_slots(text) else {
            return;
        };
        let now = self.now();
        for &(start, end) in &own.owned {
            for slot in start..=end {
                if !own.moving.contains(&slot) {
                    self.wind_down(slot, now);
                }
            }
        }
        for &slot in &own.moving {
            self.mark(slot, now);
        }
    }

    /// `next` is adopted in place of `previous`: a marked slot it gives a new owner is no longer
    /// marked. The handover is done and in the map, so its reads go to the new owner's replicas,
    /// which have the moved keys (one that has not heard of the handover answers `-MOVED`, which
    /// is followed); the old owner's replicas, which may still serve the slot without them, are
    /// no longer asked. Keeping the mark for [`GRACE`] would send those reads to the new owner
    /// alone, and a new owner frozen in that time would time them out with a replica in sync.
    pub(crate) fn note_new_map(&self, previous: &Topology, next: &Topology) {
        let owner = |map: &Topology, slot: u16| map.shard(slot).map(|s| s.primary.addr().clone());
        for slot in self.slots() {
            let now = owner(next, slot);
            if now.is_some() && now != owner(previous, slot) {
                self.clear(slot);
            }
        }
    }

    /// The slots marked now, in order (`/topology`).
    pub(crate) fn slots(&self) -> Vec<u16> {
        (0..SLOT_COUNT as u16)
            .filter(|&slot| self.contains(slot))
            .collect()
    }

    fn mark(&self, slot: u16, now: u32) {
        let lapse = now.saturating_add(HOLD.as_secs() as u32);
        self.until[usize::from(slot)].store(lapse, Ordering::Relaxed);
        let (word, bit) = position(slot);
        self.bits[word].fetch_or(bit, Ordering::Release);
    }

    /// The migration of a marked `slot` is over: the mark lapses within [`GRACE`].
    fn wind_down(&self, slot: u16, now: u32) {
        let (word, bit) = position(slot);
        if self.bits[word].load(Ordering::Relaxed) & bit == 0 {
            return;
        }
        let lapse = now.saturating_add(GRACE.as_secs() as u32);
        self.until[usize::from(slot)].fetch_min(lapse, Ordering::Relaxed);
    }

    fn clear(&self, slot: u16) {
        let (word, bit) = position(slot);
        if self.bits[word].load(Ordering::Relaxed) & bit != 0 {
            self.bits[word].fetch_and(!bit, Ordering::Release);
        }
    }

    /// The slow half of [`contains`](Self::contains), for a marked slot: a lapsed mark is
    /// cleared. A mark renewed while it is being cleared is put back.
    #[cold]
    fn still_marked(&self, slot: u16) -> bool {
        // Pairs with `mark`'s release: the lapse time stored before the bit is seen with it.
        std::sync::atomic::fence(Ordering::Acquire);
        let until = &self.until[usize::from(slot)];
        let now = self.now();
        if now < until.load(Ordering::Acquire) {
            return true;
        }
        self.clear(slot);
        if now < until.load(Ordering::Acquire) {
            let (word, bit) = position(slot);
            self.bits[word].fetch_or(bit, Ordering::Release);
            return true;
        }
        false
    }

    /// Whole seconds since `base` (plus one, so a fresh state's zeroed `until` has lapsed).
    fn now(&self) -> u32 {
        u32::try_from(self.base.elapsed().as_secs())
            .unwrap_or(u32::MAX - 1)
            .saturating_add(1)
    }
}

impl Default for MigratingSlots {
    fn default() -> Self {
        Self::new()
    }
}

fn position(slot: u16) -> (usize, u64) {
    let slot = usize::from(slot) % SLOT_COUNT;
    (slot / 64, 1 << (slot % 64))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use bytes::Bytes;

    impl MigratingSlots {
        /// Moves the clock `by` into the future, as if that much time had passed.
        fn age(&mut self, by: Duration) {
            self.base = self.base.checked_sub(by).unwrap_or(self.base);
        }
    }

    const A: &str = "07c37dfeb235213a872192d90877d0cd55635b91";
    const B: &str = "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1";

    fn nodes(text: String) -> Frame {
        Frame::Bulk(Bytes::from(text))
    }

    #[test]
    fn ask_marks_one_slot_and_moved_winds_it_down() {
        let set = MigratingSlots::new();
        assert!(!set.contains(42));
        set.note_ask(42);
        assert!(set.contains(42));
        assert!(!set.contains(41) && !set.contains(43) && !set.contains(42 + 64));
        assert_eq!(set.slots(), vec![42]);
        set.note_moved(42);
        set.note_moved(7);
        assert_eq!(set.slots(), vec![42], "only within the grace");
    }

    #[test]
    fn moved_ends_a_mark_after_the_grace_and_never_extends_it() {
        let mut set = MigratingSlots::new();
        set.note_ask(42);
        set.note_moved(42);
        set.age(GRACE - Duration::from_secs(2));
        set.note_moved(42);
        assert!(set.contains(42));
        set.age(Duration::from_secs(3));
        assert!(!set.contains(42), "lapsed one grace after the first MOVED");
        set.note_ask(42);
        assert!(set.contains(42), "a new ASK marks it again");
    }

    #[test]
    fn the_first_and_last_slots_have_their_own_bits() {
        let set = MigratingSlots::new();
        set.note_ask(0);
        set.note_ask(16383);
        assert_eq!(set.slots(), vec![0, 16383]);
    }

    #[test]
    fn a_mark_lapses_after_the_hold_and_an_ask_renews_it() {
        let mut set = MigratingSlots::new();
        set.note_ask(5);
        set.age(HOLD - Duration::from_secs(5));
        assert!(set.contains(5), "within the hold");
        set.note_ask(5);
        set.age(Duration::from_secs(10));
        assert!(set.contains(5), "renewed by the second ASK");
        set.age(HOLD);
        assert!(!set.contains(5), "lapsed");
        assert!(set.slots().is_empty());
    }

    #[test]
    fn the_source_and_target_lines_mark_their_markers() {
        let set = MigratingSlots::new();
        let source = format!(
            "{A} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-99 [42->-{B}]\n\
             {B} 127.0.0.1:7001@17001 master - 0 0 2 connected 100-16383\n"
        );
        set.note_cluster_nodes(&nodes(source));
        assert_eq!(set.slots(), vec![42]);
        let target = format!(
            "{A} 127.0.0.1:7000@17000 master - 0 0 1 connected 0-99\n\
             {B} 127.0.0.1:7001@17001 myself,master - 0 0 2 connected 100-16383 [7-<-{A}]\n"
        );
        set.note_cluster_nodes(&nodes(target));
        assert_eq!(
            set.slots(),
            vec![7, 42],
            "a node not owning 42 says nothing of it"
        );
    }

    #[test]
    fn the_owner_without_a_marker_ends_the_mark() {
        let mut set = MigratingSlots::new();
        set.note_ask(42);
        set.note_ask(500);
        let owner = format!(
            "{A} 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-99\n\
             {B} 127.0.0.1:7001@17001 master - 0 0 2 connected 100-16383 [500->-{A}]\n"
        );
        set.note_cluster_nodes(&nodes(owner));
        set.age(GRACE);
        // Other nodes' markers are not shown by Redis; 500 keeps its mark from the ASK.
        assert_eq!(set.slots(), vec![500]);
    }

    #[tokio::test]
    async fn a_map_that_gives_the_slot_a_new_owner_ends_the_mark() {
        let (upstreams, _metrics) = crate::upstream::Upstreams::for_tests(true);
        let map = |primary: &str| {
            let replicas = [format!("{primary}1")];
            Topology::single_shard(primary, &replicas, &upstreams, Arc::from("seed"))
        };
        let (source, target) = (map("127.0.0.1:7000"), map("127.0.0.1:7001"));
        let set = MigratingSlots::new();
        set.note_ask(42);
        set.note_new_map(&source, &map("127.0.0.1:7000"));
        assert_eq!(set.slots(), vec![42], "same owner: still migrating");
        set.note_moved(42);
        set.note_new_map(&source, &target);
        assert!(set.slots().is_empty(), "the map names the new owner: over");
        set.note_ask(42);
        assert_eq!(set.slots(), vec![42], "a new ASK marks it again");
    }

    #[test]
    fn a_replica_or_an_unreadable_reply_changes_nothing() {
        let set = MigratingSlots::new();
        set.note_ask(42);
        let replica = format!(
            "{A} 127.0.0.1:7000@17000 master - 0 0 1 connected 0-16383\n\
             {B} 127.0.0.1:7001@17001 myself,slave {A} 0 0 1 connected\n"
        );
        set.note_cluster_nodes(&nodes(replica));
        set.note_cluster_nodes(&Frame::Error(Bytes::from_static(b"ERR nope")));
        set.note_cluster_nodes(&nodes("garbage".to_string()));
        assert_eq!(set.slots(), vec![42]);
    }
}
