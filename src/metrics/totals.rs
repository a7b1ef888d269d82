//! Cheap totals read back from the registry for redcar's own `# Redcar` INFO section.

use std::time::Duration;

use super::{ListenerLabel, Metrics, ResultLabel};

/// What redcar reports about itself in INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub uptime: Duration,
    /// Clients connected now, over every listener.
    pub clients: i64,
    /// Clients accepted since start.
    pub accepted: u64,
    /// Commands sent again after a connection failure or a transient error reply.
    pub retries: u64,
    pub refreshes_ok: u64,
    pub refreshes_failed: u64,
}

/// Every listener label (see `downstream::listener`).
const LISTENERS: [&str; 2] = ["tcp", "unix"];

impl Metrics {
    /// Reads the totals without creating series that do not exist yet.
    pub fn totals(&self) -> Totals {
        let mut clients = 0;
        let mut accepted = 0;
        for listener in LISTENERS {
            let label = ListenerLabel { listener };
            if let Some(gauge) = self.client_connections.get(&label) {
                clients += gauge.get();
            }
            if let Some(counter) = self.client_connections_total.get(&label) {
                accepted += counter.get();
            }
        }
        let refreshes = |result| {
            self.refreshes
                .get(&ResultLabel { result })
                .map_or(0, |c| c.get())
        };
        Totals {
            uptime: self.started.elapsed(),
            clients,
            accepted,
            retries: self.retries.get(),
            refreshes_ok: refreshes("ok"),
            refreshes_failed: refreshes("failed"),
        }
    }
}
