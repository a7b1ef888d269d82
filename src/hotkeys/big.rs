//! The biggest requests and replies seen: a fixed number of entries, the smallest of them
//! replaced by anything bigger. Only sizes past `hotkeys.big_value_threshold` get here.

use std::time::SystemTime;

use serde::Serialize;

use super::text::Text;

/// Which way the big value went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Direction {
    /// A client sent it (a big value written).
    Request,
    /// A node answered it (a big value or a big reply read).
    Reply,
}

/// One big request or reply, by command and key.
#[derive(Clone, Debug)]
pub(super) struct Big {
    /// The hash of command, key and node: two entries with the same hash and direction are one.
    pub(super) hash: u64,
    /// A big request and a big reply of the same key are kept apart.
    pub(super) direction: Direction,
    /// The command's name; rewritten together with `text` whenever a bigger size comes in.
    pub(super) command: &'static str,
    /// Key and node of the biggest occurrence.
    pub(super) text: Text,
    /// The biggest size seen for it, in bytes as sent on the wire.
    pub(super) size: u64,
    /// How many times it was seen past the threshold.
    pub(super) seen: u64,
    /// When it was seen last.
    pub(super) at: SystemTime,
}

/// The biggest `capacity` entries, one per command, key and direction.
pub(super) struct BigList {
    /// Unordered: `offer` scans it, a cost paid only by values past the threshold.
    entries: Vec<Big>,
    /// `big_top_n`, at least 1.
    capacity: usize,
}

// === impl BigList ===

impl BigList {
    /// Allocates all `capacity` entries now, so `offer` never allocates.
    pub(super) fn new(capacity: usize) -> BigList {
        BigList {
            entries: Vec::with_capacity(capacity),
            capacity: capacity.max(1),
        }
    }

    /// Records one big value; `fill` writes its key and node when it takes an entry.
    pub(super) fn offer(
        &mut self,
        hash: u64,
        direction: Direction,
        size: u64,
        at: SystemTime,
        fill: impl FnOnce(&mut Big),
    ) {
        if let Some(known) = self
            .entries
            .iter_mut()
            .find(|e| e.hash == hash && e.direction == direction)
        {
            known.seen += 1;
            known.at = at;
            if size >= known.size {
                known.size = size;
                fill(known);
            }
            return;
        }
        let mut big = Big {
            hash,
            direction,
            command: "",
            text: Text::default(),
            size,
            seen: 1,
            at,
        };
        if self.entries.len() < self.capacity {
            fill(&mut big);
            self.entries.push(big);
            return;
        }
        let Some(smallest) = self.entries.iter_mut().min_by_key(|e| e.size) else {
            return;
        };
        if size > smallest.size {
            fill(&mut big);
            *smallest = big;
        }
    }

    /// In no particular order; the report sorts the merged lists.
    pub(super) fn entries(&self) -> &[Big] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_biggest_and_counts_repeats() {
        let mut list = BigList::new(3);
        let now = SystemTime::now();
        for (hash, size) in [(1, 100), (2, 300), (3, 200), (4, 50), (5, 400), (2, 10)] {
            list.offer(hash, Direction::Reply, size, now, |big| big.command = "get");
        }
        let mut kept: Vec<(u64, u64, u64)> = list
            .entries()
            .iter()
            .map(|e| (e.hash, e.size, e.seen))
            .collect();
        kept.sort();
        // 1 and 4 were the smallest; 2 was seen twice and keeps its biggest size.
        assert_eq!(kept, [(2, 300, 2), (3, 200, 1), (5, 400, 1)]);
        // The same key sent and answered is two entries.
        list.offer(5, Direction::Request, 500, now, |_| {});
        assert!(list
            .entries()
            .iter()
            .any(|e| e.hash == 5 && e.direction == Direction::Request));
    }
}
