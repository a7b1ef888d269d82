//! Cheap totals read back from the groups for redcar's own `# Redcar` INFO section.

use std::time::Duration;

use super::Metrics;

/// What redcar reports about itself in INFO; each group fills in its part
/// ([`super::MetricGroup::add_totals`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
    /// Reads the totals without creating series that do not exist yet (a group not added
    /// counts 0).
    pub(crate) fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        self.groups.each(|group| group.add_totals(&mut totals));
        totals
    }
}
