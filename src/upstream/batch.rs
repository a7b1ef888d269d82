//! When a node connection may take more commands, and when it may write what it took: the
//! in-flight cap (`upstream.max_in_flight_per_connection`) and the write-coalescing window
//! (`upstream.flush_interval`).
//!
//! Both only decide *when* the connection task pulls from its queue or writes: commands stay in
//! the queue in the order they were sent, so neither can reorder or drop anything.

use std::pin::Pin;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::time::{sleep_until, Instant, Sleep};

use super::UpstreamConfig;

/// Stop pulling new commands while this many bytes wait to be written: back-pressure instead of
/// an unbounded write buffer when a node is slow to read.
pub(super) const WRITE_HIGH_WATER: usize = 256 * 1024;

/// One connection's batching state.
pub(super) struct Batching {
    /// `upstream.max_in_flight_per_connection`.
    max_in_flight: usize,
    /// `upstream.flush_interval`: how long a lone batch may wait for company.
    interval: Duration,
    /// The window is open: queued bytes wait for more commands (or for the window to end).
    holding: bool,
    /// Ends the open window. One timer per connection, reset per batch only when the window is
    /// on (with `flush_interval: 0` it is never armed).
    window: Pin<Box<Sleep>>,
    /// Batches that filled the connection up to `max_in_flight`.
    capped: Counter,
}

impl Batching {
    pub(crate) fn new(config: &UpstreamConfig, capped: Counter) -> Batching {
        Batching {
            max_in_flight: config.max_in_flight_per_connection.max(1),
            interval: config.flush_interval,
            holding: false,
            window: Box::pin(sleep_until(Instant::now())),
            capped,
        }
    }

    /// Room for one more command: below the write buffer's high-water mark and below the cap
    /// on commands queued or written and not yet answered.
    #[inline]
    pub(crate) fn has_room(&self, buffered: usize, in_flight: usize) -> bool {
        buffered < WRITE_HIGH_WATER && in_flight < self.max_in_flight
    }

    /// A batch was taken from the queue. `fresh`: the write buffer was empty before it, so this
    /// batch starts a new write and (with a window) waits for company; a full connection
    /// writes at once, since nothing more could join.
    pub(crate) fn queued(&mut self, fresh: bool, buffered: usize, in_flight: usize) {
        let room = self.has_room(buffered, in_flight);
        if in_flight >= self.max_in_flight {
            self.capped.inc();
        }
        if !room {
            self.holding = false;
        } else if fresh && !self.interval.is_zero() {
            self.holding = true;
            self.window.as_mut().reset(Instant::now() + self.interval);
        }
    }

    /// False while the window is open.
    #[inline]
    pub(crate) fn may_write(&self) -> bool {
        !self.holding
    }

    /// True while the window is open (its timer is then worth polling).
    #[inline]
    pub(crate) fn holding(&self) -> bool {
        self.holding
    }

    /// The end of the open window.
    pub(crate) fn window(&mut self) -> &mut Pin<Box<Sleep>> {
        &mut self.window
    }

    /// The window ends: what is buffered is written.
    pub(crate) fn release(&mut self) {
        self.holding = false;
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
