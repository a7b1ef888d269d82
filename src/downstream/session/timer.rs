//! A session timer made on first use: most sessions never arm most of theirs (idle, age,
//! request and budget timers are off by default or rare), and an idle client should not hold
//! one it does not need.

use std::future::{poll_fn, Future};
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
    pub(super) async fn fired(&mut self) {
        poll_fn(|cx| self.poll_fired(cx)).await
    }

    /// [`fired`](Self::fired) as a poll.
    pub(super) fn poll_fired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.0 {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Pending,
        }
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
}
