//! Why a cache was flushed whole: the `cause` label shared by client-side caching
//! (`redcar_tracking_flushes`) and the near cache (`redcar_near_cache_flushes`).

/// Why every tracking client was told to flush its cache, or the near cache dropped everything
/// (a closed set: the `cause` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushCause {
    /// A slot changed owner (failover, migration, node replaced).
    Topology,
    /// An invalidation connection or a tracked lane to a node was lost.
    ConnectionLost,
    /// A node sent a null invalidation (FLUSHALL, FLUSHDB).
    NodeFlush,
}

impl FlushCause {
    /// Every cause, for series that exist from the start.
    pub(crate) const ALL: [FlushCause; 3] = [
        FlushCause::Topology,
        FlushCause::ConnectionLost,
        FlushCause::NodeFlush,
    ];

    /// The `cause` label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            FlushCause::Topology => "topology",
            FlushCause::ConnectionLost => "connection_lost",
            FlushCause::NodeFlush => "node_flush",
        }
    }
}
