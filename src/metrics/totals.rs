//! Cheap totals read back from the registry for redcar's own `# Redcar` INFO section.

use std::time::Duration;

use super::Metrics;

/// What redcar reports about itself in INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    pub(crate) uptime: Duration,
    /// Clients connected now, over every listener.
    pub(crate) clients: i64,
    /// Clients accepted since start.
    pub(crate) accepted: u64,
    /// Commands sent again after a connection failure or a transient error reply.
    pub(crate) retries: u64,
    pub(crate) refreshes_ok: u64,
    pub(crate) refreshes_failed: u64,
}

impl Metrics {
    /// Reads the totals without creating series that do not exist yet.
    pub(crate) fn totals(&self) -> Totals {
        let (clients, accepted) = self.clients.connected_and_accepted();
        let (refreshes_ok, refreshes_failed) = self.topology.refreshes();
        Totals {
            uptime: self.process.uptime(),
            clients,
            accepted,
            retries: self.router.retries(),
            refreshes_ok,
            refreshes_failed,
        }
    }
}
