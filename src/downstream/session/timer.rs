//! A session timer made on first use: most sessions never arm most of theirs (idle, age,
//! request and budget timers are off by default or rare), and an idle client should not hold
//! one it does not need.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::{sleep_until, Instant, Sleep};

#[derive(Default)]
pub(super) struct LazyTimer(Option<Pin<Box<Sleep>>>);

// === impl LazyTimer ===

impl LazyTimer {
    /// Arms the timer for `deadline`, making it if it was never armed (or was freed).
    pub(super) fn reset(&mut self, deadline: Instant) {
        match &mut self.0 {
            Some(sleep) => sleep.as_mut().reset(deadline),
            None => self.0 = Some(Box::pin(sleep_until(deadline))),
        }
    }

    /// Whether it exists (it may have fired already).
    pub(super) fn is_made(&self) -> bool {
        self.0.is_some()
    }

    /// The deadline it was last armed for.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.0.as_ref().map(|sleep| sleep.deadline())
    }

    /// Frees it (an idle session gives back what it does not need).
    pub(super) fn free(&mut self) {
        self.0 = None;
    }

    /// Resolves when the deadline passes; never, if the timer was never armed.
    #[cfg(test)]
    pub(super) async fn fired(&mut self) {
        std::future::poll_fn(|cx| self.poll_fired(cx)).await
    }

    /// `fired` (built for tests only) as a poll.
    pub(super) fn poll_fired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.0 {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Pending,
        }
    }
}

/// The busy spell's op timer: a [`LazyTimer`] whose `Sleep` is polled only when it may have
/// fired. A `Sleep` that returned `Pending` keeps the task's waker until it fires (or is reset),
/// so polling it again in every turn of the session's loop only re-registered the same waker,
/// two or three times per one-at-a-time command. Here a turn looks at one flag and the entry's state instead.
#[derive(Default)]
pub(super) struct OpTimer {
    timer: LazyTimer,
    /// Polled since the last reset and found pending: the waker is with the timer.
    waiting: bool,
}

// === impl OpTimer ===

impl OpTimer {
    /// Arms the timer for `deadline` (it is polled again at the next turn).
    pub(super) fn reset(&mut self, deadline: Instant) {
        self.timer.reset(deadline);
        self.waiting = false;
    }

    /// The deadline it was last armed for.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.timer.deadline()
    }

    /// Resolves when the deadline passes.
    #[cfg(test)]
    pub(super) async fn fired(&mut self) {
        std::future::poll_fn(|cx| self.poll_fired(cx)).await
    }

    /// Ready once the deadline passed. Must be polled from one task (its waker is kept).
    pub(super) fn poll_fired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let elapsed = self
            .timer
            .0
            .as_ref()
            .is_some_and(|sleep| sleep.is_elapsed());
        if self.waiting && !elapsed {
            return Poll::Pending;
        }
        let polled = self.timer.poll_fired(cx);
        self.waiting = polled.is_pending();
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn fires_at_its_deadline_once_armed_and_not_before() {
        let mut timer = LazyTimer::default();
        assert!(!timer.is_made());
        let never = tokio::time::timeout(Duration::from_secs(3600), timer.fired()).await;
        assert!(never.is_err(), "an unarmed timer never fires");
        let deadline = Instant::now() + Duration::from_secs(5);
        timer.reset(deadline);
        assert_eq!(timer.deadline(), Some(deadline));
        let early = tokio::time::timeout(Duration::from_secs(4), timer.fired()).await;
        assert!(early.is_err());
        timer.fired().await;
        assert!(Instant::now() >= deadline);
        timer.free();
        assert!(!timer.is_made());
    }

    #[tokio::test(start_paused = true)]
    async fn the_op_timer_fires_at_its_deadline_without_being_polled_in_between() {
        let mut timer = OpTimer::default();
        let start = Instant::now();
        timer.reset(start + Duration::from_secs(5));
        // Polled many times before its deadline (a busy loop's turns), then awaited.
        for _ in 0..10 {
            let early = tokio::time::timeout(Duration::from_millis(100), timer.fired()).await;
            assert!(early.is_err());
        }
        timer.fired().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(5));
        // Reset earlier and later: each deadline is kept.
        timer.reset(Instant::now() + Duration::from_secs(1));
        let early = tokio::time::timeout(Duration::from_millis(500), timer.fired()).await;
        assert!(early.is_err());
        timer.reset(Instant::now() + Duration::from_secs(3));
        let before = Instant::now();
        timer.fired().await;
        assert_eq!(Instant::now(), before + Duration::from_secs(3));
        timer.reset(Instant::now() + Duration::from_secs(2));
        let early = tokio::time::timeout(Duration::from_millis(500), timer.fired()).await;
        assert!(early.is_err());
        timer.reset(Instant::now() + Duration::from_millis(100));
        let before = Instant::now();
        timer.fired().await;
        assert_eq!(Instant::now(), before + Duration::from_millis(100));
    }
}
