//! Durations from a run of clock readings to one later reading, in nanoseconds, with the last
//! one remembered: `Instant::saturating_duration_since` is not free (a `Timespec` subtraction,
//! its checks, a `Duration` built from it), and the commands of one pipelined read share their start (one clock read per read), as the
//! commands of one node batch share their queueing time. Finishing a run of them pays for the
//! first and compares an `Instant` for the rest.

use tokio::time::Instant;

/// Nanoseconds from earlier readings to `now`, remembering the last earlier one.
pub(crate) struct ElapsedClock {
    now: Instant,
    /// The last earlier reading asked about, and its answer.
    last: Option<(Instant, u64)>,
}

impl ElapsedClock {
    /// Durations up to `now`.
    #[inline]
    pub(crate) fn new(now: Instant) -> ElapsedClock {
        ElapsedClock { now, last: None }
    }

    /// The reading durations end at.
    #[inline]
    pub(crate) fn now(&self) -> Instant {
        self.now
    }

    /// Nanoseconds from `earlier` to `now` (0 when `earlier` is later; saturates after 584
    /// years).
    #[inline]
    pub(crate) fn nanos(&mut self, earlier: Instant) -> u64 {
        match self.last {
            Some((at, ns)) if at == earlier => ns,
            _ => {
                let since = self.now.saturating_duration_since(earlier);
                let ns = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
                self.last = Some((earlier, ns));
                ns
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn runs_of_readings_and_changes_between_them() {
        let start = Instant::now();
        let now = start + Duration::from_micros(1234);
        let mut since = ElapsedClock::new(now);
        assert_eq!(since.now(), now);
        assert_eq!(since.nanos(start), 1_234_000);
        assert_eq!(since.nanos(start), 1_234_000, "remembered");
        let later = start + Duration::from_micros(34);
        assert_eq!(since.nanos(later), 1_200_000, "a new reading is measured");
        assert_eq!(since.nanos(start), 1_234_000, "and the old one again");
        assert_eq!(
            since.nanos(now + Duration::from_secs(1)),
            0,
            "never negative"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn paused_time_is_measured_as_it_advances() {
        let start = Instant::now();
        tokio::time::advance(Duration::from_millis(7)).await;
        assert_eq!(ElapsedClock::new(Instant::now()).nanos(start), 7_000_000);
    }
}
