//! The process-wide budget for client buffers (`client.max_buffered_bytes_total`): sessions
//! stop reading their clients while every session together holds too many bytes.
//!
//! Each session reports what it holds (unparsed input plus replies not yet written) once per
//! turn of its loop, as a difference added to one shared gauge: one relaxed atomic load per turn
//! and one add when the amount changed, nothing per command. Over the budget, a session holding
//! more than [`FLOOR`] stops reading (TCP pushes back on its client) until the total falls
//! below the low-water mark ([`LOW_WATER_PERCENT`] of the budget). Pausing only stops reading:
//! replies still come back from the nodes and are still written out, which is what releases
//! bytes, so the pause cannot deadlock on its own:
//!
//! - a session holding at most [`FLOOR`] always reads, so ordinary small clients keep being
//!   served however much the others hold;
//! - a paused session whose input ends in an incomplete request can only release it by reading
//!   the rest; one such session at a time holds the *progress permit* and may read until that
//!   request is complete (a client that never completes it is closed by
//!   `client.request_timeout`, which frees the permit).

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

/// A session holding no more than this keeps reading even over the budget (four reads' worth:
/// a few ordinary commands and their replies).
pub(crate) const FLOOR: usize = 64 * 1024;

/// Paused sessions resume once the total is at most this share of the budget, so they do not
/// flap around the limit on every read.
const LOW_WATER_PERCENT: usize = 75;

/// Shared by every session.
pub(crate) struct Budget {
    /// `client.max_buffered_bytes_total`; 0 turns the budget off.
    limit: usize,
    /// Reads resume once the total falls below this, a little under `limit`, so sessions do not
    /// flap between paused and reading.
    low_water: usize,
    /// Bytes held by every session now; also the exported gauge, so reporting costs no more.
    held: Gauge,
    /// Sessions not reading because of the budget now, and pauses since start.
    paused: Gauge,
    /// See `paused`.
    pauses: Counter,
    /// The id of the session allowed to read to finish its request while over budget; 0: none.
    permit: AtomicU64,
}

/// One session's share of the budget; dropping it gives the bytes (and any pause or permit) back.
pub(crate) struct BudgetShare<'b> {
    budget: &'b Budget,
    id: u64,
    held: usize,
    paused: bool,
}

// === impl Budget ===

impl Budget {
    pub(crate) fn new(limit: usize, held: Gauge, paused: Gauge, pauses: Counter) -> Budget {
        Budget {
            limit,
            low_water: limit / 100 * LOW_WATER_PERCENT,
            held,
            paused,
            pauses,
            permit: AtomicU64::new(0),
        }
    }

    /// A new session's share (session ids start at 1, so 0 can mean "no permit holder").
    pub(crate) fn share(&self, id: u64) -> BudgetShare<'_> {
        BudgetShare {
            budget: self,
            id,
            held: 0,
            paused: false,
        }
    }

    fn total(&self) -> usize {
        usize::try_from(self.held.get()).unwrap_or(0)
    }
}

// === impl BudgetShare ===

impl BudgetShare<'_> {
    /// Reports that the session now holds `bytes`; cheap when nothing changed.
    #[inline]
    pub(crate) fn set(&mut self, bytes: usize) {
        if bytes != self.held {
            let delta = bytes as i64 - self.held as i64;
            self.budget.held.inc_by(delta);
            self.held = bytes;
        }
    }

    /// Whether the session may read from its client now. `partial`: its input ends in an
    /// incomplete request, which only more input can complete.
    #[inline]
    pub(crate) fn may_read(&mut self, partial: bool) -> bool {
        let budget = self.budget;
        if budget.limit == 0 {
            return true;
        }
        let total = budget.total();
        if self.held <= FLOOR
            || total <= budget.low_water
            || (!self.paused && total <= budget.limit)
        {
            self.release_permit();
            self.resume();
            return true;
        }
        // Over budget (or above the low-water mark after a pause) and holding a real share.
        if partial && self.take_permit() {
            self.resume();
            return true;
        }
        self.release_permit();
        if !self.paused {
            self.paused = true;
            budget.paused.inc();
            budget.pauses.inc();
        }
        false
    }

    fn resume(&mut self) {
        if self.paused {
            self.paused = false;
            self.budget.paused.dec();
        }
    }

    fn take_permit(&self) -> bool {
        let permit = &self.budget.permit;
        permit.load(Ordering::Relaxed) == self.id
            || permit
                .compare_exchange(0, self.id, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    fn release_permit(&self) {
        let _ =
            self.budget
                .permit
                .compare_exchange(self.id, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

impl Drop for BudgetShare<'_> {
    fn drop(&mut self) {
        self.set(0);
        self.release_permit();
        self.resume();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: usize) -> Budget {
        Budget::new(
            limit,
            Gauge::default(),
            Gauge::default(),
            Counter::default(),
        )
    }

    #[test]
    fn shares_add_up_and_are_given_back_on_drop() {
        let budget = budget(1 << 20);
        let mut a = budget.share(1);
        let mut b = budget.share(2);
        a.set(1000);
        b.set(500);
        a.set(300);
        assert_eq!(budget.total(), 800);
        drop(a);
        assert_eq!(budget.total(), 500);
        drop(b);
        assert_eq!(budget.total(), 0);
    }

    #[test]
    fn big_holders_pause_over_budget_and_resume_below_low_water() {
        let limit = 1 << 20;
        let budget = budget(limit);
        let mut hog = budget.share(1);
        let mut small = budget.share(2);
        hog.set(limit + 1);
        small.set(FLOOR);
        assert!(!hog.may_read(false), "over budget: the hog stops reading");
        assert!(small.may_read(false), "a small session always reads");
        assert_eq!(budget.paused.get(), 1);
        assert_eq!(budget.pauses.get(), 1);
        // Below the limit but above the low-water mark: still paused (no flapping).
        hog.set(limit - 1 - FLOOR);
        assert!(!hog.may_read(false));
        assert_eq!(budget.pauses.get(), 1, "one pause, not one per check");
        hog.set(limit / 2);
        assert!(hog.may_read(false));
        assert_eq!(budget.paused.get(), 0);
    }

    #[test]
    fn one_session_at_a_time_may_finish_a_partial_request() {
        let limit = 1 << 20;
        let budget = budget(limit);
        let mut first = budget.share(1);
        let mut second = budget.share(2);
        first.set(limit);
        second.set(limit);
        assert!(first.may_read(true), "takes the permit");
        assert!(!second.may_read(true), "the permit is taken");
        assert!(
            first.may_read(true),
            "keeps it until its request is complete"
        );
        assert!(
            !first.may_read(false),
            "request complete: permit released, paused"
        );
        assert!(second.may_read(true), "the next one gets it");
        drop(second);
        assert!(first.may_read(true), "a dropped holder frees the permit");
        drop(first);
        assert_eq!(budget.paused.get(), 0);
        assert_eq!(budget.permit.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_zero_limit_never_pauses() {
        let budget = budget(0);
        let mut hog = budget.share(1);
        hog.set(usize::MAX / 4);
        assert!(hog.may_read(false));
    }
}
