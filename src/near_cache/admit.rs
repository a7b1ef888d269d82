//! Admission of hot keys (`near_cache.hot_keys`): an estimate of each key's read rate in a
//! fixed-size count-min sketch, halved every second, so memory never grows with the keys.
//!
//! The counters are relaxed atomics: readers on every worker count without a lock, and a lost
//! increment or a halving that races with one only nudges an estimate. A count-min estimate never
//! under-counts, so a key read often enough is always admitted; a cold key may be admitted early
//! when it shares every row's counter with hot ones, which costs cache room, not correctness
//! (docs/near-cache.md, "What is cached").

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use twox_hash::XxHash3_64;

/// Rows and counters per row: about 64 KiB, over-estimates rare at ten thousand hot keys.
const ROWS: usize = 4;
/// Counters per row, a power of two so the column is the hash's low bits.
const WIDTH: usize = 4096;
/// How often the counters are halved.
const DECAY_MS: u64 = 1000;

/// Made once when `near_cache.hot_keys` is set, shared by every session of the process.
pub(super) struct Admission {
    /// `ROWS` rows of `WIDTH` counters, row after row.
    counters: Box<[AtomicU32]>,
    /// A key is admitted when its count reaches this: after halving every second, a steady
    /// rate of `r` reads per second holds a count near `2r`.
    threshold: u32,
    /// When the counters were last halved ([`clock_ms`](crate::upstream::clock_ms)).
    halved_at: AtomicU64,
    /// The seed of the key hash (xxh3): fixed, so a key's place does not change with the process.
    seed: u64,
}

impl Admission {
    /// A rate of 0 gives a threshold of 1: every read admits.
    pub(crate) fn new(min_reads_per_second: u32) -> Admission {
        Admission {
            counters: (0..ROWS * WIDTH).map(|_| AtomicU32::new(0)).collect(),
            threshold: min_reads_per_second.saturating_mul(2).max(1),
            halved_at: AtomicU64::new(0),
            seed: 0x686f74,
        }
    }

    /// Counts one read of `key`; whether its rate reaches the threshold.
    /// `now` is in milliseconds on the crate's coarse clock. Every call counts, admitted or not, so
    /// a key's estimate keeps rising while it is read.
    pub(crate) fn read(&self, key: &[u8], now: u64) -> bool {
        self.decay(now);
        let hash = XxHash3_64::oneshot_with_seed(self.seed, key);
        let mut estimate = u32::MAX;
        for row in 0..ROWS {
            // Each row takes its own 16 bits of the hash (WIDTH is 2^12).
            let column = ((hash >> (row * 16)) as usize) % WIDTH;
            let counter = &self.counters[row * WIDTH + column];
            let count = counter.fetch_add(1, Ordering::Relaxed).saturating_add(1);
            estimate = estimate.min(count);
        }
        estimate >= self.threshold
    }

    /// Halves every counter once per [`DECAY_MS`] (whoever sees the time pass first does it).
    /// The compare-exchange picks one caller per period; the others go on counting while it halves.
    /// A clock that jumps ahead by several periods halves once, not once per period missed.
    fn decay(&self, now: u64) {
        let last = self.halved_at.load(Ordering::Relaxed);
        if now < last + DECAY_MS {
            return;
        }
        if self
            .halved_at
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        for counter in self.counters.iter() {
            let count = counter.load(Ordering::Relaxed);
            counter.store(count / 2, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_read_often_is_admitted_and_a_rare_one_is_not() {
        let admission = Admission::new(50);
        let mut admitted_at = None;
        for i in 0..200 {
            if admission.read(b"hot", 1) && admitted_at.is_none() {
                admitted_at = Some(i);
            }
        }
        // The threshold is twice the rate: the 100th read in the first second admits it.
        assert_eq!(admitted_at, Some(99));
        for n in 0..1000 {
            let key = format!("cold:{n}");
            assert!(!admission.read(key.as_bytes(), 2), "{key} read once");
        }
        // Ten seconds of halving later, the hot key has to earn its place again.
        for second in 1..=10 {
            admission.decay(second * DECAY_MS + 1);
        }
        assert!(!admission.read(b"hot", 10 * DECAY_MS + 2));
    }
}
