//! Admission of hot keys (`near_cache.hot_keys`): an estimate of each key's read rate in a
//! fixed-size count-min sketch, halved every second, so memory never grows with the keys.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use twox_hash::XxHash3_64;

/// Rows and counters per row: about 64 KiB, over-estimates rare at ten thousand hot keys.
const ROWS: usize = 4;
const WIDTH: usize = 4096;
/// How often the counters are halved.
const DECAY_MS: u64 = 1000;

pub(super) struct Admission {
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
    pub(crate) fn new(min_reads_per_second: u32) -> Admission {
        Admission {
            counters: (0..ROWS * WIDTH).map(|_| AtomicU32::new(0)).collect(),
            threshold: min_reads_per_second.saturating_mul(2).max(1),
            halved_at: AtomicU64::new(0),
            seed: 0x686f74,
        }
    }

    /// Counts one read of `key`; whether its rate reaches the threshold.
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
