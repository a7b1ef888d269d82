//! Space-Saving (Metwally et al., 2005) over a fixed set of counters: the heaviest keys of a
//! stream in bounded memory, each count an overestimate by at most the `error` it carries.
//!
//! Everything is allocated when the sketch is made: counting never allocates. A min-heap finds
//! the counter to take over in O(log k), and an open-addressing index (linear probing, twice as
//! many slots as counters, backward-shift deletion) finds a key's counter in O(1).
//!
//! Invariants a change must keep: every counter is in the heap exactly once (`place` and `heap` are
//! inverse permutations), every counter's hash is in the index exactly once, and the index is at
//! most half full (so `find` always meets an `EMPTY` slot and ends). `sketch_tests.rs` checks the
//! counts against exact ones, and that every counter is found again after many takeovers.

use super::text::Text;

/// An index slot that holds no counter.
const EMPTY: u32 = u32::MAX;

/// One counter: a key (with its command and node), its estimated weight and the error bound.
#[derive(Clone, Debug)]
pub(super) struct Counter {
    /// Identifies command, key and node (see [`super::HotKeys`]); equal hashes are one key.
    pub(super) hash: u64,
    /// Estimated weight: the true weight plus at most `error`.
    pub(super) count: u64,
    /// What the key may have been credited with before it was seen (the count it took over).
    pub(super) error: u64,
    /// The command counted; rewritten with `text` when the counter is taken over by another key.
    pub(super) command: &'static str,
    /// The key and node, kept for the report; the hash alone decides identity.
    pub(super) text: Text,
}

/// The heaviest `capacity` keys, approximately.
pub(super) struct SpaceSaving {
    /// At most `capacity`, allocated up front; a counter's index never changes once it exists.
    counters: Vec<Counter>,
    /// Counter indices ordered as a min-heap by count.
    heap: Vec<u32>,
    /// Counter index → its place in `heap`.
    place: Vec<u32>,
    /// Hash → counter index (EMPTY when free); a power of two long.
    index: Box<[u32]>,
    /// Counters kept: `top_k` × `COUNTERS_PER_SHOWN`, at least 1.
    capacity: usize,
}

// === impl SpaceSaving ===

impl SpaceSaving {
    /// The index gets at least twice as many slots as counters, rounded up to a power of two.
    pub(super) fn new(capacity: usize) -> SpaceSaving {
        let capacity = capacity.max(1);
        SpaceSaving {
            counters: Vec::with_capacity(capacity),
            heap: Vec::with_capacity(capacity),
            place: Vec::with_capacity(capacity),
            index: vec![EMPTY; (capacity * 2).next_power_of_two()].into_boxed_slice(),
            capacity,
        }
    }

    /// Adds `weight` to the key `hash`; `fill` writes its command and text when the key takes a
    /// counter (first seen, or taking over the smallest one).
    pub(super) fn offer(&mut self, hash: u64, weight: u64, fill: impl FnOnce(&mut Counter)) {
        if let Some(at) = self.find(hash) {
            let i = self.index[at] as usize;
            self.counters[i].count += weight;
            self.sift_down(self.place[i] as usize);
            return;
        }
        if self.counters.len() < self.capacity {
            let i = self.counters.len();
            let mut counter = Counter {
                hash,
                count: weight,
                error: 0,
                command: "",
                text: Text::default(),
            };
            fill(&mut counter);
            self.counters.push(counter);
            self.place.push(self.heap.len() as u32);
            self.heap.push(i as u32);
            self.insert(hash, i);
            self.sift_up(self.heap.len() - 1);
            return;
        }
        // Take over the smallest counter: the newcomer may have had up to its count already.
        let i = self.heap[0] as usize;
        if let Some(at) = self.find(self.counters[i].hash) {
            self.remove_at(at);
        }
        let counter = &mut self.counters[i];
        let min = counter.count;
        counter.hash = hash;
        counter.count = min + weight;
        counter.error = min;
        fill(counter);
        self.insert(hash, i);
        self.sift_down(0);
    }

    /// The counters, in no order.
    pub(super) fn counters(&self) -> &[Counter] {
        &self.counters
    }

    /// Forgets every key; keeps the memory.
    pub(super) fn clear(&mut self) {
        self.counters.clear();
        self.heap.clear();
        self.place.clear();
        self.index.fill(EMPTY);
    }

    /// Index slots are a power of two, so a hash's home slot is its low bits.
    fn mask(&self) -> usize {
        self.index.len() - 1
    }

    /// The index slot holding `hash`'s counter.
    fn find(&self, hash: u64) -> Option<usize> {
        let mask = self.mask();
        let mut at = hash as usize & mask;
        loop {
            let i = self.index[at];
            if i == EMPTY {
                return None;
            }
            if self.counters[i as usize].hash == hash {
                return Some(at);
            }
            at = (at + 1) & mask;
        }
    }

    /// The first free slot of the probe run from the home slot; never full, since the index has
    /// twice the slots of the counters.
    fn insert(&mut self, hash: u64, counter: usize) {
        let mask = self.mask();
        let mut at = hash as usize & mask;
        while self.index[at] != EMPTY {
            at = (at + 1) & mask;
        }
        self.index[at] = counter as u32;
    }

    /// Frees an index slot, moving later entries of the probe run back so lookups still find
    /// them (no tombstones, so the index never fills up).
    fn remove_at(&mut self, mut hole: usize) {
        let mask = self.mask();
        self.index[hole] = EMPTY;
        let mut next = (hole + 1) & mask;
        while self.index[next] != EMPTY {
            let i = self.index[next];
            let home = self.counters[i as usize].hash as usize & mask;
            // `i` may move to the hole if the hole lies between its home slot and where it is.
            if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                self.index[hole] = i;
                self.index[next] = EMPTY;
                hole = next;
            }
            next = (next + 1) & mask;
        }
    }

    /// The count of the counter at heap position `place`.
    fn count_at(&self, place: usize) -> u64 {
        self.counters[self.heap[place] as usize].count
    }

    /// Swaps two heap positions and keeps `place` pointing at them.
    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.place[self.heap[a] as usize] = a as u32;
        self.place[self.heap[b] as usize] = b as u32;
    }

    /// Restores the heap after a new counter is pushed at the end.
    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            if self.count_at(parent) <= self.count_at(at) {
                break;
            }
            self.swap(parent, at);
            at = parent;
        }
    }

    /// Restores the heap after a counter grew: only downward moves are needed, since counts only
    /// rise (a taken-over counter is at the root and grows too).
    fn sift_down(&mut self, mut at: usize) {
        let len = self.heap.len();
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut smallest = at;
            if left < len && self.count_at(left) < self.count_at(smallest) {
                smallest = left;
            }
            if right < len && self.count_at(right) < self.count_at(smallest) {
                smallest = right;
            }
            if smallest == at {
                return;
            }
            self.swap(at, smallest);
            at = smallest;
        }
    }
}

#[cfg(test)]
#[path = "sketch_tests.rs"]
mod tests;
