//! Cheap totals read back from the groups for redcar's own `# Redcar` INFO section.

use std::time::Duration;

/// What redcar reports about itself in INFO; each group fills in its part
/// ([`super::MetricGroup::add_totals`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Since the process started (not since the first process of an upgrade chain).
    pub(crate) uptime: Duration,
    /// This process, its restart generation (upgrades in place since the first start) and,
    /// while an upgrade hands its clients over, the old process (0 otherwise).
    pub(crate) pid: u32,
    pub(crate) generation: u64,
    /// See `pid`.
    pub(crate) old_pid: u32,
    /// Clients connected now, over every listener.
    pub(crate) clients: i64,
    /// Clients accepted since start.
    pub(crate) accepted: u64,
    /// Commands sent again after a connection failure or a transient error reply.
    pub(crate) retries: u64,
    /// Slot-map refreshes that succeeded since start.
    pub(crate) refreshes_ok: u64,
    /// Slot-map refreshes that failed since start.
    pub(crate) refreshes_failed: u64,
}
