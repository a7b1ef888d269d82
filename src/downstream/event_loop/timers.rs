//! A loop client's timers that rarely fire (`client.idle_timeout`, `client.max_age`,
//! `client.request_timeout`, the buffer budget's recheck): one heap per loop, an entry armed when
//! a timer starts and looked at when due. An entry whose reason passed is dropped then; nothing
//! is done per command.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tokio::time::Instant;

/// Which timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Which {
    /// `client.idle_timeout`.
    Idle,
    /// `client.max_age`.
    Age,
    /// `client.request_timeout` for a request begun and not complete.
    Request,
    /// A client paused by the buffer budget looks again.
    Budget,
    /// A user's rate (`auth.users[].limits`) lets the parked command start.
    Throttle,
}

/// The loop's pending timers.
#[derive(Default)]
pub(super) struct Timers {
    /// Due times, earliest first, with the client's token; a timer for a client that left is
    /// ignored when it fires (its token no longer matches).
    heap: BinaryHeap<Reverse<(Instant, u64, Which)>>,
}

impl Timers {
    /// Arms `which` for client `token` at `at`.
    pub(super) fn arm(&mut self, at: Instant, token: u64, which: Which) {
        self.heap.push(Reverse((at, token, which)));
    }

    /// When the next timer is due.
    pub(super) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _, _))| *at)
    }

    /// A timer due by `now`, if any (every loop turn asks).
    #[inline]
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<(u64, Which)> {
        match self.heap.peek() {
            Some(Reverse((at, _, _))) if *at <= now => self
                .heap
                .pop()
                .map(|Reverse((_, token, which))| (token, which)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timers_come_due_in_order() {
        let now = Instant::now();
        let mut timers = Timers::default();
        timers.arm(now + Duration::from_secs(2), 1, Which::Age);
        timers.arm(now + Duration::from_secs(1), 2, Which::Idle);
        assert_eq!(timers.next(), Some(now + Duration::from_secs(1)));
        assert_eq!(timers.pop_due(now), None);
        let later = now + Duration::from_secs(3);
        assert_eq!(timers.pop_due(later), Some((2, Which::Idle)));
        assert_eq!(timers.pop_due(later), Some((1, Which::Age)));
        assert_eq!(timers.pop_due(later), None);
    }
}
