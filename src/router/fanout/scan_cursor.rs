//! The cluster-wide SCAN cursor: which primary is being scanned, that primary's own cursor, and a
//! check that the set of primaries has not changed since the scan started.
//!
//! Layout of the 64-bit cursor the client sees (decimal, like Redis's):
//!
//! ```text
//!  63 ............ 22 | 21 ....... 10 | 9 ..... 0
//!  node cursor (42 b) | check (12 b)  | shard (10 b)
//! ```
//!
//! - `shard` indexes the primaries sorted by address (stable across slot-map refreshes);
//! - `check` is a 12-bit hash of that sorted address list;
//! - cursor `0` starts a scan at shard 0; when the last shard's node returns `0`, redcar returns
//!   `0`. Moving to the next shard returns a cursor with node cursor 0, never `0` itself.
//!
//! Redis node cursors are below the node's hash table size, far below 2^42 keys; a larger one is
//! an error rather than a silent wrap. At most 1024 primaries are supported.

const SHARD_BITS: u32 = 10;
const CHECK_BITS: u32 = 12;
const NODE_SHIFT: u32 = SHARD_BITS + CHECK_BITS;
const SHARD_MASK: u64 = (1 << SHARD_BITS) - 1;
const CHECK_MASK: u64 = (1 << CHECK_BITS) - 1;

/// Most primaries a SCAN cursor can name.
pub(super) const MAX_SHARDS: usize = 1 << SHARD_BITS;

/// A decoded client cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScanCursor {
    /// Index into the primaries sorted by address.
    pub(crate) shard: usize,
    /// Fingerprint of the primaries when the cursor was made.
    pub(crate) check: u16,
    /// The cursor to send to that primary.
    pub(crate) node: u64,
}

impl ScanCursor {
    /// Splits a client cursor into its parts (every u64 decodes; validity is checked by the caller
    /// against the current primaries).
    pub(crate) fn decode(cursor: u64) -> ScanCursor {
        ScanCursor {
            shard: (cursor & SHARD_MASK) as usize,
            check: ((cursor >> SHARD_BITS) & CHECK_MASK) as u16,
            node: cursor >> NODE_SHIFT,
        }
    }

    /// The client cursor; `None` if a part does not fit its field.
    pub(crate) fn encode(self) -> Option<u64> {
        if self.shard >= MAX_SHARDS
            || u64::from(self.check) > CHECK_MASK
            || self.node >> (64 - NODE_SHIFT) != 0
        {
            return None;
        }
        Some(self.node << NODE_SHIFT | u64::from(self.check) << SHARD_BITS | self.shard as u64)
    }

    /// The client cursor to return after the node at `self.shard` answered `node_next`, with
    /// `shards` primaries in all: the same shard further on, the next shard from its start, or
    /// `0` when the last shard is done. `None` if the node cursor does not fit.
    pub(crate) fn next(self, node_next: u64, shards: usize) -> Option<u64> {
        if node_next != 0 {
            return ScanCursor {
                node: node_next,
                ..self
            }
            .encode();
        }
        if self.shard + 1 >= shards {
            return Some(0);
        }
        ScanCursor {
            shard: self.shard + 1,
            node: 0,
            ..self
        }
        .encode()
    }
}

/// 12-bit FNV-1a hash of the sorted primary addresses: a cursor made for another set of primaries
/// is recognised (except with probability 1/4096).
pub(super) fn fingerprint<'a>(addrs: impl Iterator<Item = &'a str>) -> u16 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for addr in addrs {
        for byte in addr.bytes().chain(std::iter::once(b',')) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    ((hash ^ (hash >> 32)) & CHECK_MASK) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_the_start() {
        let start = ScanCursor::decode(0);
        assert_eq!(
            start,
            ScanCursor {
                shard: 0,
                check: 0,
                node: 0
            }
        );
    }

    #[test]
    fn round_trips_and_keeps_fields_apart() {
        let cursor = ScanCursor {
            shard: 5,
            check: 0xabc,
            node: 123_456_789,
        };
        let encoded = cursor.encode().expect("fits");
        assert_eq!(ScanCursor::decode(encoded), cursor);
        let max = ScanCursor {
            shard: MAX_SHARDS - 1,
            check: 0xfff,
            node: (1 << 42) - 1,
        };
        assert_eq!(ScanCursor::decode(max.encode().expect("fits")), max);
        assert_eq!(ScanCursor::decode(u64::MAX), max);
    }

    #[test]
    fn refuses_fields_that_do_not_fit() {
        let base = ScanCursor {
            shard: 0,
            check: 1,
            node: 0,
        };
        assert_eq!(
            ScanCursor {
                node: 1 << 42,
                ..base
            }
            .encode(),
            None
        );
        assert_eq!(
            ScanCursor {
                shard: MAX_SHARDS,
                ..base
            }
            .encode(),
            None
        );
        assert_eq!(
            ScanCursor {
                check: 0x1000,
                ..base
            }
            .encode(),
            None
        );
    }

    #[test]
    fn next_walks_every_shard_then_ends_at_zero() {
        let check = 7;
        let mut cursor = 0;
        let mut visited = Vec::new();
        // Each node needs two calls: first returns 99, then 0.
        loop {
            let mut at = ScanCursor::decode(cursor);
            if cursor != 0 {
                assert_eq!(at.check, check);
            }
            at.check = check;
            visited.push((at.shard, at.node));
            let node_next = if at.node == 0 { 99 } else { 0 };
            cursor = at.next(node_next, 3).expect("fits");
            assert!(visited.len() < 10, "must terminate");
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(
            visited,
            vec![(0, 0), (0, 99), (1, 0), (1, 99), (2, 0), (2, 99)]
        );
    }

    #[test]
    fn moving_to_the_next_shard_is_never_zero() {
        let at = ScanCursor {
            shard: 0,
            check: 0,
            node: 5,
        };
        assert_eq!(at.next(0, 2), Some(1));
        assert_eq!(at.next(0, 1), Some(0));
    }

    #[test]
    fn fingerprint_depends_on_the_addresses() {
        let a = fingerprint(["127.0.0.1:7000", "127.0.0.1:7001"].into_iter());
        let b = fingerprint(["127.0.0.1:7000", "127.0.0.1:7002"].into_iter());
        let again = fingerprint(["127.0.0.1:7000", "127.0.0.1:7001"].into_iter());
        assert_eq!(a, again);
        assert_ne!(a, b);
        assert!(u64::from(a) <= CHECK_MASK);
    }
}
