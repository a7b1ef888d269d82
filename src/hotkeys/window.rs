//! A sliding window of Space-Saving sketches: the window is cut into sub-windows, each with its
//! own sketch; a new sub-window clears the oldest, so a key that went cold leaves the list
//! within one window.

use std::time::Duration;

use tokio::time::Instant;

use super::sketch::{Counter, SpaceSaving};

/// The last `buckets.len()` sub-windows of one shard, the current one last begun at `end - span`.
pub(super) struct RateWindow {
    /// One sketch per sub-window (`config::BUCKETS` of them), used as a ring.
    buckets: Vec<SpaceSaving>,
    /// One sub-window's length (`HotKeysConfig::bucket`).
    span: Duration,
    /// Which sketch counts now.
    current: usize,
    /// When the current sub-window ends (sub-windows of every shard begin at the same instants,
    /// counted from `epoch`).
    end: Instant,
    /// Start-up: `covered` never claims more time than has passed since.
    epoch: Instant,
}

// === impl Window ===

impl RateWindow {
    /// All sketches are allocated here, so counting never allocates. At least one bucket.
    pub(super) fn new(
        buckets: usize,
        span: Duration,
        counters: usize,
        epoch: Instant,
    ) -> RateWindow {
        RateWindow {
            buckets: (0..buckets.max(1))
                .map(|_| SpaceSaving::new(counters))
                .collect(),
            span,
            current: 0,
            end: epoch + span,
            epoch,
        }
    }

    /// Counts `weight` for `hash` in the current sub-window (see [`SpaceSaving::offer`]).
    pub(super) fn offer(
        &mut self,
        now: Instant,
        hash: u64,
        weight: u64,
        fill: impl FnOnce(&mut Counter),
    ) {
        self.advance(now);
        self.buckets[self.current].offer(hash, weight, fill);
    }

    /// Moves to the sub-window `now` falls in, clearing those that fell out of the window.
    /// After an idle spell longer than the whole window every sketch is cleared, once each, and
    /// `end` jumps ahead in whole spans, so sub-window boundaries stay aligned to `epoch`.
    pub(super) fn advance(&mut self, now: Instant) {
        if now < self.end {
            return;
        }
        let span = self.span.as_nanos().max(1);
        let behind = (now.duration_since(self.end).as_nanos() / span + 1) as u64;
        let steps = behind.min(self.buckets.len() as u64);
        for _ in 0..steps {
            self.current = (self.current + 1) % self.buckets.len();
            self.buckets[self.current].clear();
        }
        let ahead = u32::try_from(behind).unwrap_or(u32::MAX);
        self.end += self.span.saturating_mul(ahead);
    }

    /// How much time the counters cover at `now`: the full sub-windows kept and the current
    /// one so far (less right after start-up).
    /// Used to turn counts into rates, so a key is not under-rated right after start-up.
    pub(super) fn covered(&self, now: Instant) -> Duration {
        let kept = self.span * (self.buckets.len() as u32 - 1);
        let begun = self.end.checked_sub(self.span).unwrap_or(self.end);
        let so_far = now.saturating_duration_since(begun);
        (kept + so_far).min(now.saturating_duration_since(self.epoch))
    }

    /// Every counter of every sub-window (one key may appear in several).
    pub(super) fn counters(&self) -> impl Iterator<Item = &Counter> {
        self.buckets.iter().flat_map(|bucket| bucket.counters())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(epoch: Instant) -> RateWindow {
        RateWindow::new(5, Duration::from_secs(2), 8, epoch)
    }

    fn total(window: &RateWindow, hash: u64) -> u64 {
        window
            .counters()
            .filter(|c| c.hash == hash)
            .map(|c| c.count)
            .sum()
    }

    #[test]
    fn counts_expire_once_the_window_has_passed() {
        let epoch = Instant::now();
        let mut w = window(epoch);
        for i in 0..10u64 {
            w.offer(epoch + Duration::from_millis(100 * i), 7, 1, |_| {});
        }
        assert_eq!(total(&w, 7), 10);
        // Still inside the 10 s window (5 × 2 s) 8 s later.
        w.advance(epoch + Duration::from_secs(8));
        assert_eq!(total(&w, 7), 10);
        // Its sub-window is cleared once five newer ones have begun.
        w.advance(epoch + Duration::from_secs(10));
        assert_eq!(total(&w, 7), 0);
    }

    #[test]
    fn a_long_silence_clears_everything_at_once() {
        let epoch = Instant::now();
        let mut w = window(epoch);
        w.offer(epoch, 1, 5, |_| {});
        w.offer(epoch + Duration::from_secs(3), 2, 5, |_| {});
        w.offer(epoch + Duration::from_secs(3600), 3, 1, |_| {});
        assert_eq!((total(&w, 1), total(&w, 2), total(&w, 3)), (0, 0, 1));
        // Sub-windows stay aligned to the epoch: 3600 s is the start of one.
        let covered = w.covered(epoch + Duration::from_millis(3_600_500));
        assert_eq!(covered, Duration::from_millis(8_500));
    }

    #[test]
    fn coverage_grows_from_start_up_to_the_window() {
        let epoch = Instant::now();
        let w = window(epoch);
        assert_eq!(
            w.covered(epoch + Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        let mut w = w;
        w.advance(epoch + Duration::from_secs(30));
        assert_eq!(
            w.covered(epoch + Duration::from_secs(31)),
            Duration::from_secs(9)
        );
    }
}
