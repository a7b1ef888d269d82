//! A per-node cap on new connections per second, shared by the pipelined connections and the
//! dedicated pool, so a restart of many app processes or a node flap cannot become a reconnect
//! storm on the Redis nodes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Token buckets by node address: `rate` connects per second, bursts of up to `rate`.
pub(crate) struct ConnectLimit {
    /// 0: unlimited.
    rate: u32,
    /// One token bucket per node address; locked once per connect, never per command.
    buckets: Mutex<HashMap<String, ConnectBucket>>,
}

struct ConnectBucket {
    /// May go negative: connects already promised to callers that are waiting.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

impl ConnectLimit {
    pub(crate) fn new(rate: u32) -> ConnectLimit {
        ConnectLimit {
            rate,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Waits for the right to open one connection to `addr`. If that would take longer than
    /// `max_wait`, takes nothing and returns how long it would have taken.
    pub(crate) async fn admit(&self, addr: &str, max_wait: Duration) -> Result<(), Duration> {
        let wait = self.reserve(addr, Instant::now(), max_wait)?;
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        Ok(())
    }

    /// Takes a token (possibly one that only exists `wait` from now, which is returned).
    fn reserve(&self, addr: &str, now: Instant, max_wait: Duration) -> Result<Duration, Duration> {
        if self.rate == 0 {
            return Ok(Duration::ZERO);
        }
        let rate = f64::from(self.rate);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.entry(addr.to_string()).or_insert(ConnectBucket {
            tokens: rate,
            at: now,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refill).min(rate);
        bucket.at = now;
        let wait = Duration::from_secs_f64(((1.0 - bucket.tokens) / rate).max(0.0));
        if wait > max_wait {
            return Err(wait);
        }
        bucket.tokens -= 1.0;
        Ok(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_up_to_the_rate_then_spaces_connects_out() {
        let limit = ConnectLimit::new(2);
        let now = Instant::now();
        let second = Duration::from_secs(1);
        assert_eq!(limit.reserve("a", now, second), Ok(Duration::ZERO));
        assert_eq!(limit.reserve("a", now, second), Ok(Duration::ZERO));
        assert_eq!(
            limit.reserve("a", now, second),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(limit.reserve("a", now, second), Ok(Duration::from_secs(1)));
        assert_eq!(
            limit.reserve("a", now, second),
            Err(Duration::from_millis(1500)),
            "too long a wait takes nothing"
        );
        // Another node has its own bucket; time refills.
        assert_eq!(limit.reserve("b", now, second), Ok(Duration::ZERO));
        let later = now + Duration::from_secs(2);
        assert_eq!(limit.reserve("a", later, second), Ok(Duration::ZERO));
    }

    #[test]
    fn zero_means_unlimited() {
        let limit = ConnectLimit::new(0);
        let now = Instant::now();
        for _ in 0..1000 {
            assert_eq!(limit.reserve("a", now, Duration::ZERO), Ok(Duration::ZERO));
        }
    }
}
