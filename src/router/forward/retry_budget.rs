//! The retry budget: retries may add at most `ratio` of the request rate (plus a small floor),
//! so when a node or the whole cluster is failing, retries cannot multiply the load on it.
//!
//! A sliding window of 10 s, estimated from the current and the previous window (weighted by how
//! much of the previous one still overlaps), as rate limiters commonly do. Retries are rare, so a
//! mutex taken only when a retry is asked for costs the hot path nothing; requests are counted
//! by the node connections per written batch, not here.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

const WINDOW: Duration = Duration::from_secs(10);

/// `router.retry_budget:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct RetryBudgetConfig {
    /// Retries allowed as a share of requests sent (0.2 = one retry per five requests).
    pub(crate) ratio: f64,
    /// Retries always allowed per second, however few requests there were.
    pub(crate) min_per_second: u32,
}

impl Default for RetryBudgetConfig {
    fn default() -> Self {
        RetryBudgetConfig {
            ratio: 0.2,
            min_per_second: 10,
        }
    }
}

pub(in crate::router) struct RetryBudget {
    /// The current and previous window's counts; locked once per retry, never per plain command.
    window: Mutex<BudgetWindow>,
}

struct BudgetWindow {
    /// Under the same mutex as the counts, so a reload can change it (`set_config`).
    config: RetryBudgetConfig,
    /// When the current window began.
    started: Instant,
    /// The request counter's value when this window started.
    requests_at_start: u64,
    /// Retries spent in the current window.
    retries: u64,
    /// Requests sent in the previous window: with the current one's, the traffic the budget is a
    /// share of.
    previous_requests: u64,
    /// Retries spent in the previous window.
    previous_retries: u64,
}

impl RetryBudget {
    pub(crate) fn new(config: RetryBudgetConfig) -> RetryBudget {
        RetryBudget {
            window: Mutex::new(BudgetWindow {
                config,
                started: Instant::now(),
                requests_at_start: 0,
                retries: 0,
                previous_requests: 0,
                previous_retries: 0,
            }),
        }
    }

    /// Reloaded settings; the counts of the current window are kept.
    pub(crate) fn set_config(&self, config: RetryBudgetConfig) {
        self.window.lock().unwrap_or_else(|e| e.into_inner()).config = config;
    }

    /// Takes one retry from the budget if there is one. `requests` is the running total of
    /// requests sent to nodes.
    pub(crate) fn try_spend(&self, now: Instant, requests: u64) -> bool {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(w.started);
        if elapsed >= WINDOW {
            let one_window_ago = elapsed < WINDOW * 2;
            w.previous_requests = if one_window_ago {
                requests.saturating_sub(w.requests_at_start)
            } else {
                0
            };
            w.previous_retries = if one_window_ago { w.retries } else { 0 };
            let windows = (elapsed.as_millis() / WINDOW.as_millis()) as u32;
            w.started += WINDOW * windows;
            w.requests_at_start = requests;
            w.retries = 0;
        }
        let into = now.saturating_duration_since(w.started).as_secs_f64() / WINDOW.as_secs_f64();
        let overlap = (1.0 - into).clamp(0.0, 1.0);
        let current_requests = requests.saturating_sub(w.requests_at_start) as f64;
        let recent_requests = w.previous_requests as f64 * overlap + current_requests;
        let recent_retries = w.previous_retries as f64 * overlap + w.retries as f64;
        let allowed = f64::from(w.config.min_per_second) * WINDOW.as_secs_f64()
            + w.config.ratio * recent_requests;
        if recent_retries + 1.0 > allowed {
            return false;
        }
        w.retries += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(ratio: f64, min_per_second: u32) -> RetryBudget {
        RetryBudget::new(RetryBudgetConfig {
            ratio,
            min_per_second,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn retries_are_capped_at_the_ratio_of_requests() {
        let b = budget(0.2, 0);
        let now = Instant::now();
        let granted = (0..100).filter(|_| b.try_spend(now, 100)).count();
        assert_eq!(granted, 20, "20% of 100 requests");
        // More requests earn more retries.
        let granted = (0..100).filter(|_| b.try_spend(now, 200)).count();
        assert_eq!(granted, 20);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reloaded_budget_applies_to_the_next_retry() {
        let b = budget(0.0, 1);
        let now = Instant::now();
        assert_eq!((0..50).filter(|_| b.try_spend(now, 0)).count(), 10);
        b.set_config(RetryBudgetConfig {
            ratio: 0.0,
            min_per_second: 3,
        });
        // The 10 already spent still count against the new floor of 30.
        assert_eq!((0..50).filter(|_| b.try_spend(now, 0)).count(), 20);
    }

    #[tokio::test(start_paused = true)]
    async fn the_floor_allows_retries_without_traffic() {
        let b = budget(0.0, 2);
        let now = Instant::now();
        let granted = (0..100).filter(|_| b.try_spend(now, 0)).count();
        assert_eq!(granted, 20, "2/s over a 10 s window");
    }

    #[tokio::test(start_paused = true)]
    async fn old_retries_stop_counting_as_the_window_slides() {
        let b = budget(0.0, 1);
        let start = Instant::now();
        assert_eq!((0..50).filter(|_| b.try_spend(start, 0)).count(), 10);
        assert!(!b.try_spend(start + Duration::from_secs(9), 0));
        // Half of the previous window still overlaps: 5 of its 10 retries count.
        let later = start + Duration::from_secs(15);
        assert_eq!((0..50).filter(|_| b.try_spend(later, 0)).count(), 5);
        // Two windows later nothing old counts.
        let much_later = start + Duration::from_secs(40);
        assert_eq!((0..50).filter(|_| b.try_spend(much_later, 0)).count(), 10);
    }
}
