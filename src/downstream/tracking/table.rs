//! Which tracking sessions read which key: filled when a tracked read is sent, emptied for a key
//! when the key is invalidated (Redis's rule: a key is tracked again only once read again).
//! Bounded: at the bound the oldest key is evicted, and its sessions told it is invalid.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

/// Key → the sessions that read it since its last invalidation.
pub(super) struct Table {
    entries: HashMap<Bytes, TrackedKey>,
    /// Keys in the order they entered; a key whose entry was removed (or made again since)
    /// stays here with its old number until it reaches the front, or a compaction.
    order: VecDeque<(Bytes, u64)>,
    next: u64,
    max_keys: usize,
}

struct TrackedKey {
    sessions: Vec<u64>,
    /// Its place in `order`.
    seq: u64,
}

impl Table {
    pub(super) fn new(max_keys: usize) -> Table {
        Table {
            entries: HashMap::new(),
            order: VecDeque::new(),
            next: 0,
            max_keys: max_keys.max(1),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Notes that `session` read `key`. Returns the key evicted to make room and its sessions,
    /// when the table was full.
    pub(super) fn add(&mut self, key: &Bytes, session: u64) -> Option<(Bytes, Vec<u64>)> {
        if let Some(entry) = self.entries.get_mut(key) {
            if !entry.sessions.contains(&session) {
                entry.sessions.push(session);
            }
            return None;
        }
        let evicted = if self.entries.len() >= self.max_keys {
            self.evict_oldest()
        } else {
            None
        };
        let seq = self.next;
        self.next += 1;
        self.entries.insert(
            key.clone(),
            TrackedKey {
                sessions: vec![session],
                seq,
            },
        );
        self.order.push_back((key.clone(), seq));
        self.compact();
        evicted
    }

    /// The sessions that read `key` (the key is no longer tracked).
    pub(super) fn take(&mut self, key: &[u8]) -> Option<Vec<u64>> {
        self.entries.remove(key).map(|entry| entry.sessions)
    }

    /// `session` wrote `key` with NOLOOP: it is not told about its own write.
    pub(super) fn forget(&mut self, key: &[u8], session: u64) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.sessions.retain(|&s| s != session);
        }
    }

    /// Forgets every key; returns the sessions that had any.
    pub(super) fn clear(&mut self) -> Vec<u64> {
        let mut sessions: Vec<u64> = self
            .entries
            .drain()
            .flat_map(|(_, entry)| entry.sessions)
            .collect();
        self.order.clear();
        sessions.sort_unstable();
        sessions.dedup();
        sessions
    }

    fn evict_oldest(&mut self) -> Option<(Bytes, Vec<u64>)> {
        while let Some((key, seq)) = self.order.pop_front() {
            if self.entries.get(&key).is_some_and(|e| e.seq == seq) {
                let entry = self.entries.remove(&key)?;
                return Some((key, entry.sessions));
            }
        }
        None
    }

    /// Drops the stale numbers from `order` once they outnumber the live ones.
    fn compact(&mut self) {
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order
                .retain(|(key, seq)| entries.get(key).is_some_and(|e| e.seq == *seq));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Bytes {
        Bytes::copy_from_slice(k.as_bytes())
    }

    #[test]
    fn a_key_names_its_readers_once_until_invalidated() {
        let mut table = Table::new(10);
        assert!(table.add(&key("a"), 1).is_none());
        table.add(&key("a"), 2);
        table.add(&key("a"), 1);
        assert_eq!(table.take(b"a"), Some(vec![1, 2]));
        assert_eq!(table.take(b"a"), None, "untracked until read again");
    }

    #[test]
    fn noloop_writers_are_left_out() {
        let mut table = Table::new(10);
        table.add(&key("a"), 1);
        table.add(&key("a"), 2);
        table.forget(b"a", 1);
        assert_eq!(table.take(b"a"), Some(vec![2]));
    }

    #[test]
    fn at_the_bound_the_oldest_key_is_evicted_with_its_readers() {
        let mut table = Table::new(2);
        table.add(&key("a"), 1);
        table.add(&key("b"), 2);
        // "a" is invalidated and read again: it is now younger than "b".
        table.take(b"a");
        table.add(&key("a"), 3);
        assert_eq!(table.add(&key("c"), 4), Some((key("b"), vec![2])));
        assert_eq!(table.add(&key("d"), 4), Some((key("a"), vec![3])));
        assert_eq!(table.len(), 2);
    }

    #[test]
    fn stale_order_entries_do_not_pile_up() {
        let mut table = Table::new(1000);
        for round in 0..1000 {
            table.add(&key("a"), round);
            table.take(b"a");
        }
        assert!(table.order.len() <= 66, "{}", table.order.len());
    }

    #[test]
    fn clearing_names_every_reader_once() {
        let mut table = Table::new(10);
        table.add(&key("a"), 2);
        table.add(&key("b"), 1);
        table.add(&key("b"), 2);
        assert_eq!(table.clear(), vec![1, 2]);
        assert_eq!(table.len(), 0);
    }
}
