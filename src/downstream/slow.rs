//! `client.close_idle_when_slow`: notices when this instance's command latency rises well above
//! its own baseline and tells the sessions to close their idle clients, so that clients behind a
//! load balancer reconnect, possibly to a healthier instance.
//!
//! Sessions pay one atomic add per finished command; a task samples the sum once per period.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::watch;

/// How often the latency is sampled.
const SAMPLE_PERIOD: Duration = Duration::from_secs(1);
/// Weight of the newest sample in the recent average (about the last 2 samples count).
const RECENT_WEIGHT: f64 = 0.5;
/// Weight of the newest sample in the baseline (a time constant of about 50 samples).
const BASELINE_WEIGHT: f64 = 0.02;
/// Samples seen before the baseline is trusted.
const WARM_UP_SAMPLES: u32 = 10;
/// Periods with fewer commands than this are skipped: too few to say anything.
const MIN_COMMANDS: u64 = 20;
/// Slow means: recent above this many times the baseline ...
const SLOW_RATIO: f64 = 2.0;
/// ... and above this absolute floor (µs), so a fast instance going from 50 µs to 120 µs is not
/// called slow.
const SLOW_FLOOR_US: f64 = 1000.0;

/// `recent` packs a command count (high bits) and a latency sum in µs (low bits) into one word,
/// so recording is one `fetch_add`.
const SUM_BITS: u32 = 40;
const SUM_MASK: u64 = (1 << SUM_BITS) - 1;
/// One command's latency is capped (about 16 s) so a period's sum cannot carry into the count.
const MAX_ONE_US: u64 = 1 << 24;

/// Shared by every session (one per process).
pub(crate) struct LatencyWatch {
    /// Commands recorded since the watcher last looked, packed with their latency sum (µs) so
    /// recording is one `fetch_add` (see `SUM_BITS`); the watcher takes and resets it.
    recent: AtomicU64,
    /// Whether latency is well above its baseline now; sessions subscribe to its changes.
    slow: watch::Sender<bool>,
}

impl LatencyWatch {
    pub(crate) fn new() -> Arc<LatencyWatch> {
        Arc::new(LatencyWatch {
            recent: AtomicU64::new(0),
            slow: watch::channel(false).0,
        })
    }

    /// One finished command, dispatch to reply.
    #[inline]
    pub(crate) fn record(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).map_or(MAX_ONE_US, |us| us.min(MAX_ONE_US));
        self.recent
            .fetch_add((1 << SUM_BITS) | us, Ordering::Relaxed);
    }

    /// Changes to "slow" (true) and back. A new receiver has seen the current state, so a client
    /// that connects while the instance is slow is not closed for it.
    pub(crate) fn subscribe(&self) -> watch::Receiver<bool> {
        self.slow.subscribe()
    }

    /// Samples every [`SAMPLE_PERIOD`] until `shutdown`.
    pub(crate) async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut baseline = Baseline::default();
        let mut tick = tokio::time::interval(SAMPLE_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            let (commands, sum_us) = self.take();
            if commands < MIN_COMMANDS {
                continue;
            }
            let slow = baseline.observe(sum_us as f64 / commands as f64);
            // What tests (and anyone tuning) wait for: the baseline is trusted from the
            // (WARM_UP_SAMPLES + 1)th sample on.
            tracing::debug!(
                samples = baseline.samples,
                trusted = baseline.samples > WARM_UP_SAMPLES,
                recent_us = baseline.recent as u64,
                baseline_us = baseline.baseline as u64,
                "latency sample (client.close_idle_when_slow)"
            );
            if slow != *self.slow.borrow() {
                tracing::info!(
                    slow,
                    recent_us = baseline.recent as u64,
                    baseline_us = baseline.baseline as u64,
                    "latency state changed (client.close_idle_when_slow)"
                );
                self.slow.send_replace(slow);
            }
        }
    }

    /// Commands and their summed latency since the last call.
    fn take(&self) -> (u64, u64) {
        let word = self.recent.swap(0, Ordering::Relaxed);
        (word >> SUM_BITS, word & SUM_MASK)
    }
}

/// The two moving averages (µs) and the rule comparing them.
#[derive(Default)]
struct Baseline {
    /// The fast-moving average (µs).
    recent: f64,
    /// The slow-moving average (µs): the instance's normal.
    baseline: f64,
    /// Samples so far; no verdict until the baseline has enough of them.
    samples: u32,
}

impl Baseline {
    /// Takes one period's mean latency; returns whether the instance is slow now.
    fn observe(&mut self, mean_us: f64) -> bool {
        if self.samples == 0 {
            self.recent = mean_us;
            self.baseline = mean_us;
        } else {
            self.recent += RECENT_WEIGHT * (mean_us - self.recent);
            self.baseline += BASELINE_WEIGHT * (mean_us - self.baseline);
        }
        self.samples = self.samples.saturating_add(1);
        self.samples > WARM_UP_SAMPLES
            && self.recent > SLOW_RATIO * self.baseline
            && self.recent > SLOW_FLOOR_US
    }
}

/// A session's view of the latency state: its next change, awaited by a boxed future that owns
/// the receiver (a few words in the session, instead of a `changed()` future in every turn's
/// `select!`); off when the watch is off.
pub(crate) struct SlowChanges(Option<Pin<Box<dyn Future<Output = Changed> + Send>>>);

/// The new state and the receiver to wait on next; `None` once the watch is gone.
type Changed = Option<(bool, watch::Receiver<bool>)>;

impl SlowChanges {
    /// Watching `latency`, or off.
    pub(crate) fn new(latency: Option<&LatencyWatch>) -> SlowChanges {
        SlowChanges(latency.map(|watch| Self::next(watch.subscribe())))
    }

    fn next(mut receiver: watch::Receiver<bool>) -> Pin<Box<dyn Future<Output = Changed> + Send>> {
        Box::pin(async move {
            receiver.changed().await.ok()?;
            let slow = *receiver.borrow_and_update();
            Some((slow, receiver))
        })
    }

    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Whether the watch changed its mind (ready: true when slow). Never ready while off, or
    /// once the watch is gone.
    pub(crate) fn poll_changed(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        let Some(next) = self.0.as_mut() else {
            return Poll::Pending;
        };
        match next.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some((slow, receiver))) => {
                self.0 = Some(Self::next(receiver));
                Poll::Ready(slow)
            }
            Poll::Ready(None) => {
                self.0 = None;
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(baseline: &mut Baseline, mean_us: f64, samples: usize) -> bool {
        (0..samples).fold(false, |_, _| baseline.observe(mean_us))
    }

    #[test]
    fn a_jump_well_above_the_baseline_is_slow_and_the_baseline_adapts() {
        let mut b = Baseline::default();
        assert!(!feed(&mut b, 800.0, 30), "steady is not slow");
        assert!(
            !b.observe(2400.0),
            "one sample moves `recent` only half way (1600 µs)"
        );
        assert!(b.observe(2400.0), "2000 µs > 2 × ~830 µs and > 1 ms");
        assert!(
            !feed(&mut b, 2400.0, 60),
            "a lasting shift becomes the new baseline"
        );
    }

    #[test]
    fn below_the_floor_or_during_warm_up_nothing_is_slow() {
        let mut fast = Baseline::default();
        feed(&mut fast, 50.0, 30);
        assert!(!feed(&mut fast, 500.0, 5), "10× but under 1 ms");
        let mut young = Baseline::default();
        feed(&mut young, 800.0, 3);
        assert!(!feed(&mut young, 5000.0, 3), "still warming up");
    }

    #[test]
    fn recording_is_one_word_of_count_and_sum() {
        let watch = LatencyWatch::new();
        watch.record(Duration::from_micros(300));
        watch.record(Duration::from_micros(700));
        watch.record(Duration::from_secs(3600));
        assert_eq!(watch.take(), (3, 1000 + MAX_ONE_US));
        assert_eq!(watch.take(), (0, 0));
    }
}
